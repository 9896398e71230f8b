"""`costmodel plan` on the command line: JSON and CSV shapes, and bad input as one line with
exit status 2."""

import csv
import io
import json
from pathlib import Path

import pytest
from commands import cli

from costmodel.present.plan import CSV_COLUMNS

LLAMA = str(Path(__file__).parents[2] / "scenarios" / "llama-3.1-70b-512xH100.yaml")
SMALL = ["--scenario", LLAMA, "--set", "num_gpus=32", "--set", "samples_per_step=64"]
LAYOUT_FIELDS = {
    "rank", "own", "layout", "step_seconds", "tokens_per_s", "mfu", "peak_bytes",
    "headroom_bytes", "parts", "limit", "shares", "versus_own",
}  # fmt: skip


@pytest.fixture(scope="module")
def data():
    done = cli("plan", *SMALL, "--top", "3", "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_json_shape(data):
    assert set(data) >= {"searched", "fitting", "timed", "own", "own_rank", "layouts", "findings"}
    assert [item["rank"] for item in data["layouts"]] == [1, 2, 3]
    for item in [*data["layouts"], data["own"]]:
        assert set(item) == LAYOUT_FIELDS
        assert item["limit"].split("+")[0] in ("compute", "communication", "bubble")
    assert data["own"]["own"] is True and data["own_rank"] == data["own"]["rank"]
    assert all(set(f) == {"name", "holds", "count", "of", "statement"} for f in data["findings"])


def test_csv_shape():
    done = cli("plan", *SMALL, "--top", "3", "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 1 + 3 + 1  # the top 3, then the scenario's own (not among them)
    assert rows[-1][1] == "True"


@pytest.mark.parametrize(
    "args, start",
    [
        (["--gpus", "0"], "costmodel: error: argument --gpus: '0' is not allowed"),
        (["--gpu", "Foo"], "costmodel: error: --gpu: 'Foo' is not allowed"),
        (["--gpus", "8", "--set", "samples_per_step=16"], "costmodel: error: num_gpus: 8 is not"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, start):
    done = cli("plan", "--scenario", LLAMA, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(start) and done.stderr.count("\n") == 1


def _readme_section() -> str:
    """docs/howto-plan.md, the plan's page (it was README's section)."""
    return (Path(__file__).parents[2] / "docs" / "howto-plan.md").read_text(encoding="utf-8")


def test_readme_documents_every_json_field_and_csv_column(data):
    section = _readme_section()
    item = data["layouts"][0]
    names = [*data, *item, *item["layout"], *item["parts"], *item["shares"]]
    names += [*data["findings"][0], *(f["name"] for f in data["findings"]), *CSV_COLUMNS]
    missing = sorted({name for name in names if f"`{name}`" not in section})
    assert not missing, f"docs/howto-plan.md does not name: {missing}"


def _main(capsys, *args) -> tuple[int, str, str]:
    from costmodel.cli import main

    code = main(["plan", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_top_beyond_the_bound_is_one_line(capsys):
    """Issue 32 (11): `--top 10000000` ranked every layout (1 min 53 s, 2.1 GB on 720,720 GPUs):
    refused above MAX_TOP, before any search."""
    code, out, err = _main(capsys, "--top", "1001")
    assert (code, out) == (2, "")
    assert err == (
        "costmodel: error: --top: 1001 is not allowed; expected a positive integer up to 1,000 "
        "(the layouts ranked)\n"
    )


def test_a_memory_error_is_one_line(capsys, monkeypatch):
    """Issue 32 (11): a search that runs out of memory (here the batch's arrays) ends in one
    line and status 2, not NumPy's _ArrayMemoryError traceback."""
    from costmodel.evaluate.plan import plan

    def exhausted(*args):
        raise MemoryError("Unable to allocate 40.0 GiB")

    monkeypatch.setattr(plan, "Batch", exhausted)
    code, out, err = _main(capsys, *SMALL)
    assert (code, out) == (2, "")
    assert err == (
        "costmodel: error: num_gpus: 32 is not allowed; expected a layout space the search holds "
        "in this machine's memory: the search of 32 GPUs ran out of memory\n"
    )


def test_more_gpus_than_samples_is_the_reports_line(capsys):
    """Issue 32 (2): the scenario with fewer samples than pipelines is refused by plan as by
    report (one rule); `--gpus` of the same count searches the layouts that divide them."""
    code, out, err = _main(capsys, "--set", "num_gpus=160")
    assert (code, out) == (2, "")
    assert err.startswith("costmodel: error: num_gpus: 160 is not allowed; expected at least one")
    code, out, err = _main(capsys, "--gpus", "160", "--top", "2", "--format", "json")
    assert code == 0, err
    layouts = json.loads(out)["layouts"]
    assert [item["rank"] for item in layouts] == [1, 2]
    for item in layouts:
        layout = item["layout"]
        assert layout["data_parallel"] * layout["micro_batch"] <= 80


def test_each_top_layout_says_why_in_every_format(capsys):
    """Issue 35 (4): each top layout's parts against the own layout's, in the JSON (`versus_own`,
    the visible parts, `rests_on` once), the CSV (a column: the text's line) and the text (a
    line under the layout); none for the own layout itself. The course's search (0.1 s)."""
    from costmodel.evaluate.plan import plan_why
    from costmodel.present.plan import why

    code, out, err = _main(capsys, "--top", "5", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    own = data["own"]["step_seconds"]
    assert data["own_rank"] == 5 and data["own"]["versus_own"] is None
    assert data["versus_own_note"] is None
    for item in data["layouts"]:
        if item["own"]:
            assert item["versus_own"] is None
            continue
        listed = {d["part"]: d["seconds"] for d in item["versus_own"]}
        for part, seconds in item["parts"].items():
            difference = seconds - data["own"]["parts"][part]
            if plan_why.visible(difference, own):
                assert listed[part] == pytest.approx(difference, abs=1e-12)
            else:
                assert part not in listed
    assert data["rests_on"]["of"] == 4 and "against" not in data["rests_on"]
    code, out, _ = _main(capsys, "--top", "5", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [row["versus_own"] for row in rows] == [
        why(item["versus_own"]) if item["versus_own"] is not None else ""
        for item in data["layouts"]
    ]
    code, out, _ = _main(capsys, "--top", "5")
    first = why(data["layouts"][0]["versus_own"])
    assert f"       vs own: {first}\n" in out
    assert out.count("vs own: ") == 4  # the own layout, 5th, has none
    assert "The ranking rests most on the model's " in out


def test_no_why_line_where_the_own_layout_is_the_fastest(capsys):
    """Llama-3.1-8B packed on 64 H100: its own layout is the fastest, no line compares; the
    course on 8 GPUs: its own layout is faster than any but does not fit, each row is compared
    (what fitting costs: every difference positive)."""
    packed = str(Path(LLAMA).with_name("llama-3.1-8b-packed-64xH100.yaml"))
    code, out, err = _main(capsys, "--scenario", packed, "--top", "3", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["own_rank"] == 1 and data["layouts"][0]["own"]
    assert [item["versus_own"] for item in data["layouts"]] == [None] * 3
    assert data["versus_own_note"] == "the scenario's own layout is the fastest"
    code, out, _ = _main(capsys, "--scenario", packed, "--top", "3")
    assert "vs own:" not in out
    assert "No vs-own lines: the scenario's own layout is the fastest." in out
    code, out, _ = _main(capsys, "--gpus", "8", "--top", "3", "--format", "json")
    data = json.loads(out)
    assert data["own_note"] == "the scenario's own layout does not fit (memory model)"
    assert data["versus_own_note"] is None
    for item in data["layouts"]:
        assert item["versus_own"] and all(d["seconds"] > 0 for d in item["versus_own"])
