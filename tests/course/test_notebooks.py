"""The notebook suite: sources and executed notebooks agree, every cell ran in order, the
notebooks re-run for another scenario, and nbval really compares their outputs.

nbval itself (strict: every output compared) runs over notebooks/ as part of `make test`.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest
from hang import hang_limit
from headlines import section_headlines
from notebook_text import shown as _shown

from costmodel.evaluate.account.account import account
from costmodel.publish import runner, suite
from costmodel.publish.markdown_cells import restore, template_of

ROOT = Path(__file__).resolve().parents[2]
SOURCES = suite.sources()
IDS = [p.stem for p in SOURCES]


def test_there_are_ten_notebooks():
    assert len(SOURCES) == 10, [p.name for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_source_and_notebook_agree(source):
    nb_path = source.with_suffix(".ipynb")
    assert nb_path.exists(), f"{nb_path.name} missing: run make notebooks"
    # the filled Markdown cells' templates back in their place (costmodel/publish/markdown_cells.py)
    regenerated = jupytext.writes(restore(jupytext.read(nb_path)), fmt="py:percent")
    assert regenerated == source.read_text(encoding="utf-8"), (
        f"{source.name} and {nb_path.name} disagree: run make notebooks"
    )


TEMPLATED = [p for p in SOURCES if any(template_of(c) for c in jupytext.read(p).cells)]


@pytest.mark.parametrize("source", TEMPLATED, ids=[p.stem for p in TEMPLATED])
def test_filled_markdown_is_what_the_library_gives_now(source, notebook_kernel):
    """nbval compares the outputs of code cells only: the filled Markdown cells of a stored
    notebook are compared here with a fresh fill (the course's scenario, the session's kernel),
    so that a figure a Markdown cell shows changes with the library or the test fails."""
    stored = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    ran, error = runner.run_notebook(source.stem, {}, notebook_kernel, suite.NOTEBOOKS)
    assert error is None, error
    ran.cells = [c for c in ran.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    filled = [(c.source, c.metadata.get("template")) for c in stored.cells if template_of(c)]
    again = [(c.source, c.metadata.get("template")) for c in ran.cells if template_of(c)]
    assert again == filled, f"{source.name}: run make notebooks NB={source.stem[:2]}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_code_cell_executed_in_order(source):
    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert code[0].metadata.get("tags") == ["parameters"], "first code cell: parameters"
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", cell.source
            assert output.get("name") != "stderr", f"stderr in {source.name}: {output}"


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_no_line_break_inside_a_chinese_paragraph(source):
    """Markdown cells and computed Markdown: a break between two CJK characters would reach
    the reader as a stray space (HTML, JupyterLab). Paragraphs are written on one line."""
    from costmodel.present.typography import cjk_breaks

    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += cjk_breaks(cell.source)
        for output in cell.get("outputs", []):
            found += cjk_breaks(output.get("data", {}).get("text/markdown", ""))
    assert not found, found[:5]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_notebook_links_the_conventions(source):
    link = "../docs/conventions.md"
    assert link in source.read_text(encoding="utf-8")
    assert (source.parent / link).resolve() == ROOT / "docs" / "conventions.md"
    assert (ROOT / "docs" / "conventions.md").is_file()


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_notebook_asks_the_reader_something(source):
    """At least one exercise (a cell tagged `exercise`) followed by its answer (cells tagged
    `solution`, which the student edition drops)."""
    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    tags = [set(c.metadata.get("tags", [])) for c in nb.cells]
    exercises = [i for i, t in enumerate(tags) if "exercise" in t]
    assert exercises, f"{source.name}: no cell tagged exercise"
    for i in exercises:
        after = tags[i + 1 :]
        answer = next((t for t in after if "solution" in t or "exercise" in t), set())
        assert "solution" in answer, f"{source.name}: exercise at cell {i} has no solution"
        assert "exercise" not in answer, f"{source.name}: exercise at cell {i} has no solution"


TEAM = {
    "name": "Test team: dense 13B, 16K context, 128 x H100",
    "activated_params": 12.0e9,
    "total_params": 13.0e9,
    "num_experts": 0,
    "experts_per_token": 0,
    "hidden_size": 5120,
    "num_layers": 40,
    "full_attention_every": 1,
    "num_heads": 40,
    "head_dim": 128,
    "seq_len": 16384,
    "mean_tokens_per_sample": 9000,
    "samples_per_step": 512,
    "step_time": 31.0,
    "num_gpus": 128,
    "gpu": "H100-SXM",
    "recompute": "selective",
    "measured_tokens_per_s": None,
    "vocab_size": 152064,
    "micro_batch": 2,
}


#: A figure quoted from the course, "5.85%（课程 06.3）": the run of characters before the quote
#: (no space, `|`, `"` or `（`) and the quote. The look-behind starts a match only where a run
#: starts (or after a `）`, where the previous match ended): the same matches as without it, but a
#: long run (an image's base64 data) is scanned once, not once per character (minutes).
_COURSE_QUOTE = re.compile(r"(?<![^\s|\"（）])[^\s|\"（]+（课程 [^）]*）")


def _run_for_file(kernel, source: Path, scenario_file: Path):
    """`source`'s stored notebook executed in `kernel` with `scenario_file` injected as its
    parameter (as papermill injects it); a failing cell raises."""
    from costmodel.publish import runner

    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    runner.inject_parameters(nb, {"scenario_file": str(scenario_file)})
    kernel.execute(nb)
    return nb


def test_notebooks_rerun_for_another_scenario(tmp_path, notebook_kernel, course_account):
    """Every notebook runs for a different model and cluster (a scenario file), without error
    or warning, and its body (after the scenario line) shows the number it computes for that
    scenario, its headline (tests/headlines.py), and not the course's MFU or HFU: nothing is
    hard-coded. The notebooks run one after the other in one kernel, reset between them."""
    import yaml

    from costmodel.inputs import scenario
    from costmodel.present import display as d

    scenario_file = tmp_path / "team.yaml"
    scenario_file.write_text(yaml.safe_dump(TEAM))
    team, course = account(scenario.resolve(scenario_file)), course_account
    team_headlines, course_headlines = section_headlines(team), section_headlines(course)
    if team["tokens_per_expert"] is None:  # dense: 06 shows the dense FFN GEMM's rows, b x S
        team_headlines["06"] = d.num(TEAM["micro_batch"] * TEAM["seq_len"])
    course_only = [
        d.pct(course[key]) for key in ("mfu", "hfu") if d.pct(course[key]) != d.pct(team[key])
    ]
    assert len(course_only) == 2, "the team scenario must differ from the course in MFU and HFU"
    for source in SOURCES:
        nb = _run_for_file(notebook_kernel, source, scenario_file)
        outputs = [c["outputs"] for c in nb.cells if c.get("outputs")]
        text = json.dumps(outputs, ensure_ascii=False)
        assert '"stderr"' not in text, f"{source.stem}: warning or stderr output"
        # what each cell shows (a Markdown cell its filled text), after the scenario line
        cells = [
            c.source if c.cell_type == "markdown" else json.dumps(c["outputs"], ensure_ascii=False)
            for c in nb.cells
            if c.cell_type == "markdown" or c.get("outputs")
        ]
        start = next(i for i, t in enumerate(cells) if TEAM["name"] in t)
        body = "\n".join(cells[start + 1 :])
        headline = team_headlines[source.name[:2]]
        assert headline != course_headlines[source.name[:2]], f"{source.stem}: pick another team"
        assert headline in body, f"{source.stem}: the team's {headline} is not in the body"
        # the course's own figures may be quoted as such: "5.85%（课程 06.3）" in a claims table
        unquoted = _COURSE_QUOTE.sub("", body)
        for figure in course_only:  # as a figure of its own: 7.80% is not in 17.80%
            shown = re.search(rf"(?<![\d.]){re.escape(figure)}", unquoted)
            assert not shown, f"{source.stem} still shows the course's {figure}"


def test_a_course_quote_is_removed_in_one_pass_over_a_long_run():
    """The course's figures quoted as such are left out of what the re-run test reads, as the
    unanchored pattern left them out, and a run of 200,000 characters without a space (an
    image's base64 data) is scanned in milliseconds (the unanchored pattern rescanned it from
    each of its characters: about two minutes, past the hang limit)."""
    import time

    tail = ' 5.85%（课程 06.3）| 1.2×（课程 06.4）a）b（课程 1）"6.1%'
    assert _COURSE_QUOTE.sub("", tail) == ' | "6.1%'
    start = time.perf_counter()
    assert _COURSE_QUOTE.sub("", "x" * 200_000 + tail) == "x" * 200_000 + ' | "6.1%'
    assert time.perf_counter() - start < hang_limit(0.01)


def test_the_modules_handed_out_first_exist():
    """tests/conftest.py's LONGEST_FIRST names test modules that exist: a renamed one would
    silently be handed out in collection order again."""
    from conftest import LONGEST_FIRST

    missing_modules = [m for m in LONGEST_FIRST if not (ROOT / m).is_file()]
    assert not missing_modules, f"rename them in tests/conftest.py: {missing_modules}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_the_stored_notebooks_are_spread_among_the_rest():
    """conftest.handed_out: every module once, LONGEST_FIRST first, and no two stored notebooks
    handed out one after the other while other modules are left to put between them."""
    from conftest import LONGEST_FIRST, handed_out

    stored = [f"notebooks/{i:02d}.ipynb" for i in range(10)]
    rest = [f"tests/test_{i}.py" for i in range(25)]
    modules = rest[:3] + list(reversed(LONGEST_FIRST)) + stored + rest[3:]
    order = handed_out(modules)
    assert sorted(order) == sorted(modules)
    assert order[: len(LONGEST_FIRST)] == list(LONGEST_FIRST)
    assert [m for m in order if m in stored] == stored
    assert [m for m in order if m in rest] == rest
    positions = [order.index(m) for m in stored]
    assert min(b - a for a, b in zip(positions, positions[1:])) >= 2
    assert handed_out(stored[:2]) == stored[:2]


def test_nbval_fails_when_the_library_changes(tmp_path, course_account):
    """Mutation check: change one figure in the library (H20 peak 148 -> 150 TFLOP/s) in a copy
    of the package; nbval on the stored notebook must then fail, and for that change: every
    failing cell fails on its outputs (no error of the environment), the MFU shown going from
    the stored value to the one the 150 TFLOP/s peak gives. (The same notebook passes nbval
    unchanged: the suite's own run of notebooks/03_course_numbers.ipynb.)"""
    mutated = tmp_path / "costmodel"
    shutil.copytree(ROOT / "costmodel", mutated)
    hardware = mutated / "inputs" / "hardware.py"
    text = hardware.read_text()
    assert 'GPU("H20", 148 * _T' in text
    hardware.write_text(text.replace('GPU("H20", 148 * _T', 'GPU("H20", 150 * _T'))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    notebook = ROOT / "notebooks" / "03_course_numbers.ipynb"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--nbval",
        "--nbval-current-env",
        str(notebook),
        "-o",
        "testpaths=",
        "-o",
        "addopts=",
    ]
    mutated_run = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    out = mutated_run.stdout
    assert mutated_run.returncode == 1, out[-2000:]
    failed = int(re.search(r"(\d+) failed", out)[1])
    # Each failing cell, by number: pytest repeats a failure's message in its summary where the
    # CI variable is set, so the same cell can be named twice.
    differ = set(re.findall(r"Cell (\d+): Cell outputs differ", out))
    assert failed and len(differ) == failed, out[-2000:]
    stored, changed = (f"{100 * course_account['mfu'] * k:.2f}" for k in (1, 148 / 150))
    assert stored != changed
    assert f"= {stored}\\\\%$$' == '$$" in out and f"= {changed}\\\\%$$'" in out, out[:2000]


def test_consecutive_prints_are_one_output():
    """Two prints arrive as one stream message or two, by timing: clean() merges them."""
    outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="a\n"),
        nbformat.v4.new_output("stream", name="stdout", text="b\n"),
        nbformat.v4.new_output("stream", name="stderr", text="c\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "d"}),
        nbformat.v4.new_output("stream", name="stdout", text="e\n"),
    ]
    merged = suite.merged_streams(outputs)
    assert [o.get("text") for o in merged] == ["a\nb\n", "c\n", None, "e\n"]


# ------------------------------------------------------------------ issue 20: the step-time model


@pytest.fixture(scope="module")
def step_runs(notebook_kernel):
    """Notebooks 08 and 10 run for a null step_time and for a step shorter than the model's
    prediction (the course's 120 s is the stored run): {(label, stem): notebook}."""
    from costmodel.publish import runner

    runs = {}
    for label, overrides in (("null", {"step_time": None}), ("fast", {"step_time": 30})):
        for stem in ("08_optimization_path", "10_exercises"):
            nb, error = runner.run_notebook(stem, overrides, notebook_kernel)
            assert error is None, error
            runs[(label, stem)] = nb
    return runs


def _stored(stem: str):
    return nbformat.read(suite.NOTEBOOKS / f"{stem}.ipynb", as_version=4)


def test_08_waterfall_runs_from_the_predicted_parts_to_the_measured_step(course_account):
    """Issue 20 (5): 08 draws the step-time model's parts up to the measured 120 s, names the gap
    unexplained, and sets the course's order beside the model's ranking."""
    nb = _stored("08_optimization_path")
    plots = [c for c in nb.cells if c.cell_type == "code" and "Where the step goes" in c.source]
    assert plots and any("image/png" in o.get("data", {}) for o in plots[0].outputs)
    acc = course_account
    t = acc["time"]
    text = _shown(nb)
    unexplained = f"{t['unexplained_seconds']:.4g} s"
    assert re.search(rf"未解释（实测 − 预测）(?: \| |</td><td>){re.escape(unexplained)}", text)
    assert f"**没有解释的 {t['unexplained_seconds']:.3g} 秒" in text
    assert f"这一步应当要 **{t['predicted_seconds']:.3g} 秒**" in text
    assert "课程的顺序是" in text and "模型的排名" in text
    top = next(a for a in acc["advice"] if a["feasible"] and a["speedup"] >= 1.0005)
    assert f"`{top['lever']}`" in text.split("课程的顺序是")[1]


def test_08_and_10_say_predicted_when_step_time_is_null(step_runs):
    """Issue 20 (2): with step_time null the pages call the step the model's prediction and
    show no measured step or unexplained part."""
    for stem in ("08_optimization_path", "10_exercises"):
        text = _shown(step_runs[("null", stem)])
        assert "单步耗时模型的预测：场景的 `step_time` 为 null" in text, stem
        assert "unexplained (measured - predicted)" not in text, stem
        assert "未解释（实测 − 预测）" not in text, stem
    page = _shown(step_runs[("null", "08_optimization_path")])
    assert "**预测值**" in page and "实测的一步是" not in page
    assert "本场景的一步本来就是预测的" in _shown(step_runs[("null", "10_exercises")])


def test_a_step_faster_than_the_model_is_said_plainly(step_runs):
    """Issue 20 (2): a negative unexplained part (30 s against a prediction of about 35 s)."""
    page = _shown(step_runs[("fast", "08_optimization_path")])
    assert "模型预测的一步比实测的长" in page and "不可能这么快" not in page
    exercise = _shown(step_runs[("fast", "10_exercises")])
    assert "模型预测的一步比实测的长（第 08 节）" in exercise and "不可能" not in exercise


def test_10_exercise_re_predicts_the_step_after_packing(course_account):
    """Issue 20 (5): notebook 10 has an exercise on the step-time model: the step re-predicted
    with packed rows, against the slots rule of exercise 1."""
    from costmodel.inputs import scenario
    from costmodel.present import display as d

    nb = _stored("10_exercises")
    tagged = [c for c in nb.cells if "exercise" in c.metadata.get("tags", [])]
    assert any("单步耗时模型" in c.source for c in tagged)
    now = course_account["time"]["predicted_seconds"]
    packed = account(scenario.resolve(overrides={"batching": "packed"}))["time"]
    g_model = now / packed["predicted_seconds"]
    assert f"提速 **{d.times(g_model, 3)}**" in _shown(nb)


def _is_plot(cell) -> bool:
    return cell.cell_type == "code" and any(
        {"image/svg+xml", "image/png"} & set(o.get("data", {})) for o in cell.get("outputs", [])
    )


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_plot_has_a_chinese_caption_for_its_axes(source):
    """Issue 36 (5): plot labels are English (the project's guide); the Markdown next to each plot
    (the cell just before or just after it) says in Chinese what each axis shows."""
    cells = nbformat.read(source.with_suffix(".ipynb"), as_version=4).cells
    for i, cell in enumerate(cells):
        if not _is_plot(cell):
            continue
        near = [
            cells[j].source
            for j in (i - 1, i + 1)
            if 0 <= j < len(cells) and cells[j].cell_type == "markdown"
        ]
        assert any("横轴" in text and "纵轴" in text for text in near), (source.name, i)
