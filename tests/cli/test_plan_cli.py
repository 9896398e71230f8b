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
    "headroom_bytes", "parts", "limit", "shares",
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
        (["--gpus", "8", "--set", "samples_per_step=8"], "costmodel: error: num_gpus: 8 is not"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, start):
    done = cli("plan", "--scenario", LLAMA, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(start) and done.stderr.count("\n") == 1


def _readme_section() -> str:
    text = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    start = text.index("## The layouts that fit, ranked: `costmodel plan`")
    return text[start : text.index("\n## ", start + 1)]


def test_readme_documents_every_json_field_and_csv_column(data):
    section = _readme_section()
    item = data["layouts"][0]
    names = [*data, *item, *item["layout"], *item["parts"], *item["shares"]]
    names += [*data["findings"][0], *(f["name"] for f in data["findings"]), *CSV_COLUMNS]
    missing = sorted({name for name in names if f"`{name}`" not in section})
    assert not missing, f"README's costmodel plan section does not name: {missing}"
