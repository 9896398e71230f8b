"""docs/benchmarks.md and the results files it is rendered from (benchmarks/docs_page.py,
benchmarks/recorded.py): the page is the render of the committed files (a hand edit fails), a
hand-written page repeats no recorded figure (the checker on a pasted figure, and on the
project's pages), a figure's text, target and verdict, what a results file records (no host name
or path), and `make benchmark`'s scripts against the page's list."""

import json
import re
import socket
from pathlib import Path

import pytest
from benchmarks_loader import load

from costmodel.errors import CostModelError

rec = load("recorded", "recorded")
page = load("docs_page", "docs_page")
loso = load("loso", "loso")

ROOT = Path(__file__).resolve().parents[2]


def test_the_page_is_the_render_of_the_results_files():
    """A hand edit of docs/benchmarks.md, or a results file changed without rendering the page,
    fails here: `python benchmarks/docs_page.py` writes it again."""
    expected = page.render(rec.load_all(), page.loso_headline())
    assert page.PAGE.read_text(encoding="utf-8") == expected


def test_every_script_of_make_benchmark_has_its_results_file_or_is_listed_as_not_recorded():
    text = page.PAGE.read_text(encoding="utf-8")
    results = rec.load_all()
    for script in page.SCRIPTS:
        if script in results:
            assert f"### {script}\n" in text
            assert f"Re-run: `python benchmarks/{script}.py`" in text
        else:
            assert f"- {script}: `python benchmarks/{script}.py`" in text


def test_make_benchmark_runs_the_pages_scripts_then_renders_the_page():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^benchmark:.*\n((?:\t.*\n)+)", makefile, flags=re.M).group(1)
    scripts = re.findall(r"benchmarks/(\w+)\.py", recipe)
    assert scripts == [*page.SCRIPTS, "docs_page"]


def _results(*figures, script="bench_x"):
    measured = {"date": "2026-12-05", "cpus": 2, "python": "3.11.7", "load_1min": 1.5}
    return {script: json.loads(rec.text(script, list(figures), measured))}


def test_the_table_row_of_a_figure_its_target_and_verdict():
    got = page.render(
        _results(
            rec.figure("a step", 7.6, "s", 1, "what was timed", at_most=10.0),
            rec.figure("error", 17.8, "%", 1, "median |error|", at_most=7.0),
            rec.figure("rows", 259, "", 0, "counted"),
        ),
        "HEADLINE",
    )
    assert "| bench_x | a step | 7.6 s | <= 10 s | yes |" in got
    assert "| bench_x | error | 17.8% | <= 7% | no |" in got
    assert "| bench_x | rows | 259 |  |  |" in got
    assert "- error: median |error|" in got  # the note, per script
    assert "1-minute load average at the end of the run: 1.50." in got
    assert page.section(got, page.LOSO_HEADING).endswith("HEADLINE")
    assert (
        "### Not recorded yet" in got and "- bench_core: `python benchmarks/bench_core.py`" in got
    )


def test_a_figure_meets_its_target_as_shown():
    """The verdict reads the value as the page prints it: 1.0004 s shown as 1.000 s meets
    at most 1 s; 2.0 at least 2 does; 1.96 shown as 2.0 at least 2 does too."""
    assert rec.met(rec.figure("t", 1.0004, "s", 3, "", at_most=1.0)) is True
    assert rec.met(rec.figure("t", 1.0016, "s", 3, "", at_most=1.0)) is False
    assert rec.met(rec.figure("t", 1.96, "x", 1, "", at_least=2.0)) is True
    assert rec.met(rec.figure("t", 1.9, "x", 1, "", at_least=2.0)) is False
    assert rec.met(rec.figure("t", 3.0, "x", 1, "")) is None
    assert rec.shown(rec.figure("t", 3.14159, "x", 2, "")) == "3.14x"
    assert rec.target_text(rec.figure("t", 0, "ms", 1, "", at_least=500.0)) == ">= 500 ms"


def _pages(tmp_path, guide: str) -> list[Path]:
    """A checkout in tmp_path: README.md, a generated docs/benchmarks.md holding the figures
    and a hand-written docs/guide.md; the hand-written pages as hand_written_pages finds them."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# x\n\nSee docs/benchmarks.md.\n", encoding="utf-8")
    (tmp_path / "docs" / "benchmarks.md").write_text("7.6 s and 17.8%\n", encoding="utf-8")
    (tmp_path / "docs" / "guide.md").write_text(guide, encoding="utf-8")
    return page.hand_written_pages(tmp_path)


FIGURES = _results(
    rec.figure("a step", 7.6, "s", 1, ""),
    rec.figure("error", 17.8, "%", 1, ""),
    rec.figure("rows", 259, "", 0, ""),
)


def test_a_figure_pasted_into_a_hand_written_page_is_found(tmp_path):
    pages = _pages(tmp_path, "The step takes 7.6 s; the median error is 17.8%.\n")
    assert [p.name for p in pages] == ["README.md", "guide.md"]  # benchmarks.md is generated
    assert page.figures_in_pages(FIGURES, pages) == [
        'guide.md: "7.6 s" (bench_x: a step)',
        'guide.md: "17.8%" (bench_x: error)',
    ]


def test_a_longer_number_an_integer_or_a_listed_coincidence_is_not_a_figure(tmp_path, monkeypatch):
    pages = _pages(tmp_path, "27.6 s, 117.8%, 17.85%, 259 rows and 7.6 s again\n")
    assert page.figures_in_pages(FIGURES, pages) == ['guide.md: "7.6 s" (bench_x: a step)']
    monkeypatch.setitem(page.COINCIDENCES, ("guide.md", "7.6 s"), "another fact")
    assert page.figures_in_pages(FIGURES, pages) == []


def test_no_hand_written_docs_page_repeats_a_benchmark_figure():
    """A figure of docs/benchmarks.md belongs there: a hand-written page links to it."""
    docs = [p for p in page.hand_written_pages() if p.name != "README.md"]
    assert page.figures_in_pages(rec.load_all(), docs) == []


README = ROOT / "README.md"


@pytest.mark.xfail(
    "<!-- loso:begin -->" in README.read_text(encoding="utf-8"),
    reason="README.md before its rewrite (issue 37) still holds the benchmark figures typed "
    "into it and the LOSO block loso.py no longer writes",
)
def test_the_readme_repeats_no_benchmark_figure():
    assert page.figures_in_pages(rec.load_all(), [README]) == []


def test_a_results_file_says_when_and_where_without_host_or_path(tmp_path):
    rec.record("bench_x", [rec.figure("a step", 7.6, "s", 1, "timed")], folder=tmp_path,
               page=False)  # fmt: skip
    text = (tmp_path / "bench_x.json").read_text(encoding="utf-8")
    assert text.startswith(rec.HEADER)
    data = json.loads(text)
    assert set(data["measured"]) == {"date", "cpus", "python", "load_1min"}
    assert data["command"] == "python benchmarks/bench_x.py"
    assert data["figures"][0]["value"] == 7.6
    for path in [*rec.RESULTS.glob("*.json"), tmp_path / "bench_x.json"]:
        text = path.read_text(encoding="utf-8")
        assert socket.gethostname() not in text and str(Path.home()) not in text
        assert str(ROOT) not in text


def test_a_results_file_the_benchmarks_did_not_write_is_kept(tmp_path):
    (tmp_path / "bench_x.json").write_text('{"mine": 1}\n', encoding="utf-8")
    with pytest.raises(CostModelError, match="is not allowed"):
        rec.record("bench_x", [], folder=tmp_path, page=False)
    assert (tmp_path / "bench_x.json").read_text(encoding="utf-8") == '{"mine": 1}\n'


def test_the_loso_figures_are_those_of_loso_md():
    """benchmarks/results/loso.json holds the figures of loso.md's headline (loso.figures)."""
    headline = loso.headline_of(loso.OUTPUT.read_text(encoding="utf-8"))
    assert rec.load_all()["loso"]["figures"] == loso.figures(headline)
