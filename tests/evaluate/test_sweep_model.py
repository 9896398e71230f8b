"""`costmodel sweep` over any numeric key: each point is the report's scenario with the point's
values given as --set (the model's shape, the layout, an efficiency), with the predicted step,
its parts, MFU on the predicted step and the memory beside the closed forms; a point the
validator refuses is a row with its one-line reason; integer ranges are rounded; lists."""

import csv
import io
import math
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from sweep_report import report_figure, scenario_path

from costmodel.cli import main
from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account
from costmodel.evaluate.sweep import sweep, sweep_points
from costmodel.inputs import models
from costmodel.inputs.scenario import resolve

ROOT = Path(__file__).resolve().parents[2]

#: (scenario file, --set, --vary): a shape, a layout (some points refused), a predicted step.
CASES = [
    (None, {}, ["hidden_size=1024,4096", "step_time=30:120:2"]),
    (None, {}, ["tensor_parallel=1,2,3", "micro_batch=1,2"]),
    (None, {"step_time": None}, ["num_layers=20,40", "zero_stage=1,3"]),
    ("llama-3.1-70b-512xH100.yaml", {}, ["pipeline_parallel=4,5,8", "num_gpus=512,768"]),
    ("deepseek-v3-2048xH800.yaml", {"step_time": None}, ["expert_parallel=8,64,96"]),
    # shape grids, evaluated many points at once on lanes (sweep_lanes), split where they differ
    (None, {}, ["hidden_size=1024,1536,2048,3072,4096", "seq_len=4096,65536"]),
    ("deepseek-v3-2048xH800.yaml", {}, ["hidden_size=4096,6144,7168", "num_experts=64,256"]),
    ("llama-3.1-70b-512xH100.yaml", {"step_time": None}, ["ffn_hidden_size=8192:32768:4"]),
    ("qwen3-next-80b-256xB200.yaml", {}, ["hidden_size=1024,2048,3072", "num_layers=24,48"]),
]


def _expected(file, base, point):
    """The report's scenario of a point: its values as --set, and where its model shape is not
    the scenario's, activated_params and total_params that shape's (as a config fills them)."""
    scenario = resolve(scenario_path(file), base)
    sc = resolve(scenario_path(file), {**base, **point})
    now = models.scenario_keys(sc.shape, sc.num_mtp_layers > 0)
    before = models.scenario_keys(scenario.shape, scenario.num_mtp_layers > 0)
    follow = {
        key: now[key]
        for key in ("activated_params", "total_params")
        if now[key] != before[key] and scenario.sources[key] not in ("file", "--set")
    }
    return resolve(scenario_path(file), {**base, **point, **follow}) if follow else sc


@pytest.mark.parametrize("file, base, vary", CASES)
def test_each_point_is_the_report_of_its_scenario(file, base, vary):
    """Every figure of a point equals `costmodel report`'s for the point's scenario: the closed
    forms, the predicted step and its parts, the memory peak, its phase, whether it fits, DP
    and N; a point is refused exactly where the report refuses it, with the validator's line
    where the validator refuses it."""
    scenario = resolve(scenario_path(file), base)
    axes = [sweep.parse_axis(text) for text in vary]
    sweep.check_axes(scenario, axes, base)
    grid = sweep.evaluate_grid(scenario, axes)
    kept = 0
    for i in range(len(grid)):
        point = {axis.key: grid.columns[axis.key][i].item() for axis in axes}
        try:
            sc = _expected(file, base, point)
            acc = account(sc, kept=False)
        except CostModelError as error:
            assert grid.refused[i] == str(error), point
            assert all(np.isnan(grid.columns[c][i]) for c in sweep.FIGURES)
            assert grid.extra["memory.fits"][i] == ""
            continue
        assert grid.refused[i] == "", (point, grid.refused[i])
        kept += 1
        for column in sweep.FIGURES:
            expected, got = report_figure(acc, column), grid.columns[column][i]
            assert np.isnan(got) if expected is None else got == pytest.approx(expected)
        extra = {column: values[i] for column, values in grid.extra.items()}
        assert extra["time.predicted_seconds"] == pytest.approx(acc["time"]["predicted_seconds"])
        for part, value in acc["time"]["parts"].items():
            assert extra[f"time.parts.{part}.seconds"] == pytest.approx(value["seconds"])
        assert extra["memory.total"] == pytest.approx(acc["memory"]["total"])
        assert extra["memory.peak_phase"] == acc["memory"]["peak_phase"]
        assert extra["memory.fits"] == ("true" if acc["memory"]["fits"] else "false")
        assert extra["scenario.data_parallel"] == acc["scenario"]["data_parallel"]
        assert extra["scenario.activated_params"] == acc["scenario"]["activated_params"]
        cluster = sc.num_gpus * sc.peak_flops * acc["time"]["predicted_seconds"]
        on_predicted = acc["model_flops_per_step"] / cluster
        assert extra["mfu_on_predicted_step"] == pytest.approx(on_predicted)
        if sc.step_time_from == "predicted":
            assert grid.columns["mfu"][i] == pytest.approx(on_predicted)
    assert kept, "every point refused: the case checks no figure"


def test_a_shape_point_takes_its_shape_parameters():
    """A hidden_size the course's model does not have: N (and the total) are that shape's, so
    6ND and the predicted step time one model; the course's own N elsewhere."""
    scenario = resolve()
    grid = sweep.evaluate_grid(scenario, [sweep.parse_axis("hidden_size=1024,4096")])
    n = grid.extra["scenario.activated_params"]
    assert n[0] < scenario.activated_params < n[1]
    shape = resolve(None, {"hidden_size": 4096}).shape
    assert n[1] == models.scenario_keys(shape)["activated_params"]


def test_points_differing_only_in_a_closed_form_key_share_one_evaluation(monkeypatch):
    """Every point is made by sweep_points.point, once per distinct value of the keys the
    models read (step_time and measured_tokens_per_s are not among them)."""
    calls = []
    real = sweep_points.point

    def point(base, changes, before=None):
        calls.append(dict(changes))
        return real(base, changes, before)

    monkeypatch.setattr(sweep_points, "point", point)
    axes = [sweep.parse_axis(t) for t in ("step_time=60:240:7", "tensor_parallel=1,2,4")]
    grid = sweep.evaluate_grid(resolve(), axes)
    assert len(grid) == 21
    assert calls == [{"tensor_parallel": 1}, {"tensor_parallel": 2}, {"tensor_parallel": 4}]


def _csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    return rows[1], rows[2:]


def test_an_integer_range_is_rounded_and_said_once(capsys):
    """seq_len=32768:131072:100 (not whole-number steps) runs: the points rounded to whole
    numbers, a repeated one dropped, said in one line on stderr for each such axis."""
    vary = ["--vary", "seq_len=32768:131072:100", "--vary", "micro_batch=1:3:5"]
    assert main(["sweep", *vary, "--vary", "step_time=60:120:2"]) == 0
    out = capsys.readouterr()
    notes = out.err.splitlines()
    assert len(notes) == 2, out.err
    assert "seq_len takes whole numbers: the 100 points rounded, 100 distinct kept" in notes[0]
    assert "micro_batch takes whole numbers: the 5 points rounded, 3 distinct kept" in notes[1]
    header, rows = _csv(out.out)
    seq = sorted({int(row[0]) for row in rows})
    assert len(seq) == 100 and seq[0] == 32768 and seq[-1] == 131072
    assert {int(row[1]) for row in rows} == {1, 2, 3} and len(rows) == 600


def test_a_list_keeps_its_order_and_drops_a_repeat(capsys):
    assert main(["sweep", "--vary", "hidden_size=4096,2048,4096"]) == 0
    out = capsys.readouterr()
    assert out.err.count("\n") == 1 and "1 repeated value(s) dropped" in out.err
    header, rows = _csv(out.out)
    assert [row[0] for row in rows] == ["4096", "2048"]


def test_a_layout_that_does_not_divide_is_a_row_with_the_validators_line(capsys):
    assert main(["sweep", "--vary", "tensor_parallel=1:3:3"]) == 0
    header, rows = _csv(capsys.readouterr().out)
    refused = [row[header.index("refused")] for row in rows]
    assert refused[0] == refused[1] == ""
    assert refused[2] == (
        "num_gpus: 40 is not allowed; expected a multiple of tensor_parallel x "
        "pipeline_parallel x context_parallel (3 x 1 x 1 = 3)"
    )
    assert all(cell == "" for cell in rows[2][1 : header.index("refused")])
    assert float(rows[1][header.index("time.predicted_seconds")]) > 0


def test_closed_forms_keep_todays_columns_and_rows(capsys):
    """--closed-forms is today's sweep; without it, the same rows with the models' columns
    after `refused`."""
    vary = ["--vary", "step_time=1:241:5", "--vary", "num_gpus=40:120:3"]
    assert main(["sweep", *vary, "--closed-forms"]) == 0
    today = capsys.readouterr().out.splitlines()
    assert main(["sweep", *vary]) == 0
    now = capsys.readouterr().out.splitlines()
    assert now[0] == today[0] and len(now) == len(today)
    assert today[1].endswith(",refused")
    assert now[1] == today[1] + "," + ",".join(sweep_points.MODEL_COLUMNS)
    for old, new in zip(today[2:], now[2:]):
        assert new.startswith(old + ",")


@pytest.mark.parametrize("y, label", [("mfu", "MFU"), ("predicted_step", "predicted step")])
def test_plot_svg_by_default_and_its_y(y, label, tmp_path, capsys):
    """--plot with no suffix is an SVG; --plot-y chooses what it draws against the first key
    (a list drawn in increasing order)."""
    plot = tmp_path / "grid"
    vary = ["--vary", "tensor_parallel=4,1,2", "--vary", "micro_batch=1,2"]
    assert main(["sweep", *vary, "--plot", str(plot), "--plot-y", y]) == 0
    assert "wrote the plot (SVG)" in capsys.readouterr().err
    text = plot.read_text()
    assert ElementTree.fromstring(text).tag.endswith("svg")
    assert f"costmodel sweep: {label} against tensor_parallel" in text


BAD = [
    (["--vary", "hidden_size=1024:8192:100", "--vary", "num_layers=1:2000:2000"], "200,000 points"),
    (["--vary", "hidden_size=1024,2048", "--closed-forms"], "not allowed with --closed-forms"),
    (["--vary", "step_time=1:2:2", "--closed-forms", "--plot-y", "predicted_step"], "--plot-y"),
    (["--vary", "step_time=60,null"], "expected values that are numbers (null is no value"),
    (["--vary", "hidden_size=1024,null"], "hidden_size: None is not allowed"),
    (["--vary", "tensor_parallel=1,0"], "tensor_parallel: 0 is not allowed"),
    (["--vary", "recompute=none,full"], "expected a key among activated_params"),
    (["--vary", "step_time=1:2:2", "--plot", "x.pdf"], "expected a .svg or .png file"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_input_is_one_line(args, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1, out.err
    assert out.err.startswith("costmodel: error: ") and message in out.err, out.err
    assert list(tmp_path.iterdir()) == []


def test_a_predicted_step_point_is_refused_as_the_report_refuses_it():
    """With step_time null the closed forms take each point's predicted step; an N that is not
    the shape's is refused with the report's line (account.fill_step_time)."""
    base = {"step_time": None, "activated_params": 6 * 10**9}
    scenario = resolve(None, base)
    grid = sweep.evaluate_grid(scenario, [sweep.parse_axis("tensor_parallel=1,2")])
    with pytest.raises(CostModelError) as error:
        account(resolve(None, {**base, "tensor_parallel": 2}))
    assert list(grid.refused) == [str(error.value)] * 2
    assert math.isnan(grid.extra["mfu_on_predicted_step"][0])


def test_the_sweep_page_names_the_models_columns_and_options():
    section = (ROOT / "docs" / "howto-sweep.md").read_text(encoding="utf-8")
    names = (*sweep_points.MODEL_COLUMNS, "--closed-forms", "--plot-y", "predicted_step")
    for name in names:
        assert f"`{name}`" in section or f"{name} " in section, name
