"""Every bad input found so far (issue 8, parts 4 and 5): one line on stderr, exit 2, quickly.

Each case runs the real command line in a subprocess with a timeout, so that a hang, a
MemoryError or a traceback fails the test; and impossible accounts (a utilization above 100%)
are refused rather than printed. JSON output is parsed with a strict parser (no Infinity/NaN).
"""

import json
import math
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from commands import cli
from hang import hang_limit

from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account as evaluate_account
from costmodel.evaluate.account.account import check_finite
from costmodel.inputs import models, scenario, scenario_yaml
from costmodel.present import report

PRESET = Path(models.__file__).parent / "presets" / "qwen3-8b.json"
MIB = 1 << 20


def billion_laughs(under: str) -> str:
    """9 levels of 9 aliases each (9**9 leaves when expanded), nested under one key."""
    lines = [f"{under}:", "  a: &a [" + ", ".join(["lol"] * 9) + "]"]
    for level in range(1, 9):
        prev, cur = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"  {cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def config(tmp_path: Path, name: str, text: str) -> Path:
    """A copy of a published config.json with `text` (raw JSON fields) appended."""
    path = tmp_path / name
    path.write_text(PRESET.read_text().rstrip().rstrip("}") + ", " + text + "}")
    return path


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def scenario_with_model(tmp_path: Path, fields: str) -> Path:
    return write(tmp_path, "s.yaml", f"model: {config(tmp_path, 'c.json', fields)}\n")


def flow_bomb() -> str:
    """billion_laughs as one flow mapping, the value of a single --set."""
    parts = ["a: &a [" + ", ".join(["lol"] * 9) + "]"]
    for level in range(1, 9):
        prev, cur = chr(ord("a") + level - 1), chr(ord("a") + level)
        parts.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "{" + ", ".join(parts) + "}"


# (id, function of tmp_path giving the command line's arguments, expected part of the line)
CASES = [
    (
        "set-overflow",
        lambda t: ["report", "--set", "seq_len=1e308"],
        "seq_len: 1e+308 is not allowed; expected a positive integer up to 100,000,000",
    ),
    (
        "yaml-400-digit-int",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "seq_len: 1" + "0" * 399 + "\n")],
        "seq_len: 1000000000000000000000000000000000000000… (400 digits) is not allowed; "
        "expected a positive integer up to 100,000,000",
    ),
    (
        "yaml-5000-digit-int",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "seq_len: 1" + "0" * 4999 + "\n")],
        "s.yaml': an integer of 5,000 digits (line 1) is not allowed; expected at most 1,000 digits",
    ),
    (
        "yaml-1e400",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "step_time: 1e400\n")],
        "step_time: '1e400' is not allowed; expected a positive number from 1e-6 to 1e9 or null",
    ),
    (
        "yaml-denormal",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "step_time: 5e-324\n")],
        "step_time: 5e-324 is not allowed; expected a positive number from 1e-6 to 1e9 or null",
    ),
    (
        "yaml-huge-params",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "activated_params: 1e308\n")],
        "activated_params: 1e+308 is not allowed; expected a positive integer up to 1e15",
    ),
    (
        "yaml-list-for-a-number",
        lambda t: ["report", "--scenario", write(t, "s.yaml", f"seq_len: {list(range(500))}\n")],
        "seq_len: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1… is not allowed; expected a positive "
        "integer up to 100,000,000",
    ),
    (
        "config-infinity",
        lambda t: ["params", config(t, "c.json", '"rope_scaling_factor": Infinity')],
        "c.json': field 'rope_scaling_factor': Infinity is not allowed; expected a finite number",
    ),
    (
        "config-nan",
        lambda t: ["params", config(t, "c.json", '"initializer_range": NaN')],
        "c.json': field 'initializer_range': NaN is not allowed; expected a finite number",
    ),
    (
        "config-1e400",
        lambda t: ["params", config(t, "c.json", '"text_config": {"x": [1e400]}')],
        "c.json': field 'text_config.x[0]': 1e400 is not allowed; expected a finite number",
    ),
    (
        "config-1e9-layers",
        lambda t: ["params", config(t, "c.json", '"num_hidden_layers": 1e9')],
        "config field 'num_hidden_layers': 1000000000.0 is not allowed; expected an integer from "
        "1 to 100,000",
    ),
    (
        "scenario-model-1e9-layers",
        lambda t: ["report", "--scenario", scenario_with_model(t, '"num_hidden_layers": 1e9')],
        "c.json': config field 'num_hidden_layers': 1000000000.0 is not allowed; expected an "
        "integer from 1 to 100,000",
    ),
    (
        "alias-bomb-known-key",
        lambda t: ["report", "--scenario", write(t, "s.yaml", billion_laughs("seq_len"))],
        "s.yaml': more than 10,000 YAML nodes with aliases expanded is not allowed; expected at "
        "most 10,000",
    ),
    (
        "alias-bomb-unknown-key",
        lambda t: ["report", "--scenario", write(t, "s.yaml", billion_laughs("lol"))],
        "s.yaml': more than 10,000 YAML nodes with aliases expanded is not allowed; expected at "
        "most 10,000",
    ),
    (
        "alias-bomb-in-set",
        lambda t: ["report", "--set", "seq_len=" + flow_bomb()],
        "--set seq_len: more than 10,000 YAML nodes with aliases expanded is not allowed",
    ),
    (
        "recursive-alias",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "seq_len: &a [*a]\n")],
        "s.yaml': an alias inside its own anchor (line 1) is not allowed",
    ),
    (
        "deep-nesting",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "a: " + "[" * 9999 + "]" * 9999)],
        "s.yaml': nesting deeper than 50 levels (line 1) is not allowed; expected at most 50",
    ),
    (
        "too-many-nodes",
        lambda t: ["report", "--scenario", write(t, "s.yaml", f"seq_len: {[1] * 20000}\n")],
        "s.yaml': more than 10,000 YAML nodes (line 1) is not allowed; expected at most 10,000",
    ),
    (
        "yaml-over-size-cap",
        lambda t: ["report", "--scenario", write(t, "s.yaml", "# " + "x" * MIB + "\n")],
        "s.yaml': 1,048,579 bytes is not allowed; expected at most 1,048,576 bytes (1 MiB)",
    ),
    (
        "config-over-size-cap",
        lambda t: ["params", config(t, "c.json", '"pad": "' + "x" * MIB + '"')],
        "bytes is not allowed; expected at most 1,048,576 bytes (1 MiB)",
    ),
    (
        "endless-device",
        lambda t: ["report", "--scenario", "/dev/zero"],
        "scenario file '/dev/zero': is not a regular file; expected a file",
    ),
    (
        "duplicate-keys",
        lambda t: [
            "report",
            "--scenario",
            write(t, "s.yaml", "seq_len: 4096\nstep_time: 10\nseq_len: 8192\n"),
        ],
        "s.yaml': key 'seq_len' twice (lines 1 and 3) is not allowed; expected each key once",
    ),
    (
        "params-directory",
        lambda t: ["params", str(t)],
        "': is a directory; expected a config.json file or a preset name",
    ),
    (
        "scenario-model-directory",
        lambda t: ["report", "--scenario", write(t, "s.yaml", f"model: {t}\n")],
        "': is a directory; expected a config.json file or a preset name",
    ),
    (
        "params-empty",
        lambda t: ["params", ""],
        "config: '' is not allowed; expected a config.json path or a preset name",
    ),
    (
        "name-too-long",
        lambda t: ["report", "--set", "name=" + "x" * 1000],
        "name: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… is not allowed; expected a string of at "
        "most 200 characters",
    ),
    (
        "name-300-kb-in-a-file",
        lambda t: ["report", "--scenario", write(t, "s.yaml", f"name: {'x' * 300_000}\n")],
        "name: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… is not allowed; expected a string of at "
        "most 200 characters",
    ),
    (
        "name-201-characters",
        lambda t: ["gemms", "--scenario", write(t, "s.yaml", f"name: {'名' * 201}\n")],
        "is not allowed; expected a string of at most 200 characters",
    ),
    (
        "name-lone-surrogate",
        lambda t: ["report", "--scenario", write(t, "s.yaml", 'name: "\\ud800"\n')],
        "name: '\\ud800' is not allowed; expected a string of at most 200 characters, in valid "
        "Unicode (no lone surrogate)",
    ),
    (
        "model-lone-surrogate",
        lambda t: ["report", "--scenario", write(t, "s.yaml", 'model: "a\\udcffb.json"\n')],
        "model: 'a\\udcffb.json' is not allowed; expected a config.json path or a preset name "
        "or null, in valid Unicode (no lone surrogate)",
    ),
    (
        "lengths-lone-surrogate",
        lambda t: ["report", "--set", "sequence_lengths=l\udcff.txt"],
        "sequence_lengths: 'l\\udcff.txt' is not allowed; expected a path to a lengths file or "
        "null, in valid Unicode (no lone surrogate)",
    ),
    (
        "jobs-superscript",
        lambda t: ["handouts", "--jobs", "²"],
        "argument --jobs: '²' is not allowed; expected a positive integer up to 1,024",
    ),
    (
        "jobs-zero",
        lambda t: ["handouts", "--jobs", "0"],
        "argument --jobs: '0' is not allowed; expected a positive integer",
    ),
    # issue 32 (2), (4): contradictions the report evaluated (half a micro batch per pipeline
    # halved the predicted step), refused as the plan refuses them; (11) a search too large
    (
        "fewer-samples-than-pipelines",
        lambda t: ["report", "--set", "num_gpus=160"],
        "num_gpus: 160 is not allowed; expected at least one micro batch per pipeline and step",
    ),
    (
        "ulysses-cp-beyond-the-heads",
        lambda t: ["report", "--set", "cp_comm_type=a2a", "--set", "context_parallel=8"],
        "context_parallel: 8 is not allowed; expected a divisor of the query heads (16) and the "
        "K/V heads (2) of a TP rank with cp_comm_type a2a",
    ),
    (
        "virtual-stages-that-do-not-split-a-stage",
        lambda t: [
            "report", "--set", "pipeline_parallel=2", "--set", "pipeline_schedule=interleaved",
            "--set", "virtual_pipeline=3",
        ],
        "virtual_pipeline: 3 is not allowed; expected a divisor of the layers of a pipeline "
        "stage (20",
    ),
    (
        "dualpipe-on-an-odd-pipeline",
        lambda t: ["gemms", "--set", "pipeline_parallel=5", "--set", "pipeline_schedule=dualpipe"],
        "pipeline_parallel: 5 is not allowed; expected an even number (or 1) with "
        "pipeline_schedule dualpipe",
    ),
    (
        "ce-chunks-beyond-a-micro-batch",
        lambda t: ["report", "--set", "ce_chunks=1000000"],
        "ce_chunks: 1000000 is not allowed; expected at most the tokens of a micro batch on one "
        "GPU (micro_batch x seq_len / context_parallel = 49,152)",
    ),
    (
        "fp8-moe-inputs-on-a-dense-model",
        lambda t: [
            "report", "--set", "num_experts=0", "--set", "experts_per_token=0", "--set",
            "fp8=hybrid", "--set", "fp8_activations=moe_inputs",
        ],
        "fp8_activations: 'moe_inputs' is not allowed; expected none or linear_inputs for a "
        "dense model",
    ),
    (
        "plan-top-beyond-its-bound",
        lambda t: ["plan", "--top", "10000000"],
        "--top: 10000000 is not allowed; expected a positive integer up to 1,000",
    ),
]  # fmt: skip


@pytest.mark.parametrize("make_args,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(tmp_path, make_args, message):
    result = cli(*map(str, make_args(tmp_path)), cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr[-500:]
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-500:]
    assert lines[0].startswith("costmodel: error: ")
    assert message in lines[0]
    assert len(lines[0]) < 400


def test_model_directory_is_named(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    result = cli("report", "--set", f"model={folder}")
    assert result.returncode == 2
    assert result.stderr == (
        f"costmodel: error: model config '{folder}': is a directory; "
        "expected a config.json file or a preset name\n"
    )


# ------------------------------------------------------------------ impossible results

COURSE_MFU_AT_1_S = 6 * 3e9 * 80 * 28_875 / (1 * 40 * 148e12)


@pytest.mark.parametrize(
    "overrides,message",
    [
        (
            ["step_time=1"],
            f"impossible result: MFU = {100 * COURSE_MFU_AT_1_S:.2f}% is not allowed; expected at most "
            "100% (the inputs contradict each other; check step_time = 1, num_gpus = 40, "
            "peak_flops = 1.48e+14, samples_per_step x mean_tokens_per_sample = 80 x 28,875, "
            "activated_params = 3,000,000,000)",
        ),
        (
            ["step_time=7.5"],  # MFU 93.6%, and x 4/3 for full recompute: HFU 124.9%
            f"impossible result: HFU = {100 * COURSE_MFU_AT_1_S / 7.5 * 4 / 3:.2f}% is not allowed; "
            "expected at most 100% (the inputs contradict each other; check step_time = 7.5, "
            "num_gpus = 40, peak_flops = 1.48e+14, samples_per_step x mean_tokens_per_sample = "
            "80 x 28,875, activated_params = 3,000,000,000, recompute = full)",
        ),
        (
            ["measured_tokens_per_s=1e6"],
            f"impossible result: MFU from measured_tokens_per_s = "
            f"{100 * 6 * 3e9 * 1e6 / (40 * 148e12):.2f}% is not allowed; expected at most 100% (the "
            "inputs contradict each other; check measured_tokens_per_s = 1,000,000, num_gpus = 40, "
            "peak_flops = 1.48e+14, activated_params = 3,000,000,000)",
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_impossible_utilization_is_refused(overrides, message, fmt):
    args = [arg for o in overrides for arg in ("--set", o)]
    result = cli("report", *args, "--format", fmt)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == f"costmodel: error: {message}\n"


def test_hfu_at_exactly_100_percent_is_allowed():
    # packed: no padding slots, so the real tokens are all the step computes
    step_time = COURSE_MFU_AT_1_S * 4 / 3  # HFU = 1 exactly (within float rounding)
    for exactly in (step_time, step_time * (1 - 1e-12)):  # float rounding is not refused
        packed = {"step_time": exactly, "batching": "packed"}
        assert evaluate_account(scenario.resolve(overrides=packed))["hfu"] == pytest.approx(1)
    with pytest.raises(CostModelError, match="HFU = 100.00% is not allowed"):
        evaluate_account(
            scenario.resolve(overrides={"step_time": step_time * (1 - 1e-6), "batching": "packed"})
        )
    # padded: every slot is computed, so the edge is at slots / D times that step time
    slots_step = step_time * 49152 / 28875
    assert evaluate_account(scenario.resolve(overrides={"step_time": slots_step}))["padding"][
        "hfu_of_slots"
    ] == pytest.approx(1)
    with pytest.raises(CostModelError, match="HFU counting the padded slots = 100.00%"):
        evaluate_account(scenario.resolve(overrides={"step_time": slots_step * (1 - 1e-6)}))


def strict_loads(text: str):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def all_numbers(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from all_numbers(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


@pytest.mark.parametrize(
    "args", [[], ["--scenario", "scenarios/example-team.yaml"]], ids=["course", "example-team"]
)
def test_json_output_is_strict(args):
    root = Path(__file__).resolve().parents[2]
    result = cli("report", *args, "--format", "json", cwd=root)
    assert result.returncode == 0, result.stderr
    data = strict_loads(result.stdout)
    assert all(math.isfinite(x) for x in all_numbers(data))
    assert 0 < data["mfu"] <= data["hfu"] <= 1


def test_total_params_mistake_above_100_percent_is_still_reported():
    # MFU 70% is possible; with N = total params (35e9 instead of 3e9) it would be 819%: that
    # figure is the demonstration of a mistake, printed as it is.
    result = cli(
        "report",
        "--format",
        "json",
        "--set",
        "step_time=10",
        "--set",
        "recompute=selective",
        "--set",
        "batching=packed",  # padded, the slots' HFU would be 132%: refused
    )
    assert result.returncode == 0, result.stderr
    data = strict_loads(result.stdout)
    assert data["mfu"] == pytest.approx(COURSE_MFU_AT_1_S / 10)
    assert data["mfu_if_total_params"] == pytest.approx(COURSE_MFU_AT_1_S / 10 * 35 / 3)
    assert data["mfu_if_total_params"] > 1


def test_render_refuses_non_finite_json():
    account = evaluate_account(scenario.resolve())
    account["padding"]["slots"] = math.inf
    with pytest.raises(
        CostModelError,
        match=r"^impossible result: padding\.slots = inf is not "
        r"allowed; expected a finite number",
    ):
        report.render(account, "json")
    account["padding"]["slots"] = math.nan
    with pytest.raises(CostModelError, match=r"padding\.slots = nan is not allowed"):
        check_finite(account)


# ------------------------------------------------------------------ the same checks in Python


@pytest.mark.parametrize(
    "key,value,shown",
    [
        ("seq_len", 10**400, "1000000000000000000000000000000000000000… (401 digits)"),
        ("seq_len", -(10**6000), "-an integer of about 6,001 digits"),
        ("seq_len", 1e308, "1e+308"),
        ("step_time", 5e-324, "5e-324"),
        ("step_time", math.inf, "inf"),
        ("num_layers", 100_001, "100001"),
        ("peak_flops", 1e18 * 1.01, "1.01e+18"),
        ("measured_tokens_per_s", "1e400", "'1e400'"),
        ("experts_per_token", -1, "-1"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_check_value_refuses_out_of_range(key, value, shown):
    with pytest.raises(CostModelError) as error:
        scenario.check_value(key, value)
    assert str(error.value) == (
        f"{key}: {shown} is not allowed; expected {scenario.allowed_text(key)}"
    )


@pytest.mark.parametrize(
    "key,value",
    [
        ("seq_len", 10**8),
        ("num_layers", 100_000),
        ("step_time", 1e-6),
        ("step_time", 1e9),
        ("peak_flops", 1e18),
        ("mean_tokens_per_sample", 1),
        ("experts_per_token", 0),
        ("activated_params", "1e15"),
        ("measured_tokens_per_s", None),
    ],
)
def test_check_value_bounds_are_inclusive(key, value):
    assert scenario.check_value(key, value) == (None if value is None else float(value))


def test_allowed_text_states_the_range():
    assert scenario.allowed_text("seq_len") == "a positive integer up to 100,000,000"
    assert scenario.allowed_text("step_time") == "a positive number from 1e-6 to 1e9 or null"
    assert scenario.allowed_text("num_experts") == "a non-negative integer up to 1,000,000"
    assert (
        scenario.allowed_text("measured_tokens_per_s")
        == "a positive number from 1e-6 to 1e15 or null"
    )


def test_the_docs_state_every_bound_and_limit():
    docs = Path(__file__).resolve().parents[2] / "docs"
    keys = (docs / "scenario-keys.md").read_text()
    for key, spec in scenario.FIELDS.items():
        if spec.minimum is not None or spec.maximum is not None:
            assert re.search(
                rf"^\| `{key}` \| \w+ \| {re.escape(scenario.allowed_text(key))} \|", keys, re.M
            ), key
    text = (docs / "bad-input.md").read_text()
    assert models.MAX_INPUT_BYTES == MIB and "at most 1 MiB (1,048,576 bytes" in text
    assert f"at most {scenario_yaml.MAX_YAML_NODES:,} YAML nodes" in text
    assert f"at most {scenario_yaml.MAX_YAML_DEPTH} levels deep" in text
    assert f"longer than {scenario_yaml.MAX_YAML_INT_DIGITS:,}\n  digits" in text


def test_model_shape_beyond_the_scenario_bounds(tmp_path):
    # Each field is within the config's bounds, but N = vocab x hidden (lm_head) alone is 1e16.
    path = config(tmp_path, "c.json", '"vocab_size": 1000000000, "hidden_size": 10000000')
    n = models.load_shape(str(path)).activated_params
    assert n > 10**16
    with pytest.raises(CostModelError) as error:
        scenario.resolve(data={"model": str(path)})
    assert str(error.value) == (
        f"model '{path}': activated_params: {n} is not allowed; "
        "expected a positive integer up to 1e15"
    )


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e9, 2.5, "40"])
def test_config_fields_refuse_non_finite_and_out_of_range(value):
    cfg = json.loads(PRESET.read_text())
    cfg["num_hidden_layers"] = value
    with pytest.raises(
        CostModelError,
        match="config field 'num_hidden_layers': .* is not "
        "allowed; expected an integer from 1 to 100,000",
    ):
        models.shape_from_config(cfg)


def test_many_layers_are_quick():
    # 100,000 layers with one full-attention layer every 50,000: layout found in linear time.
    cfg = json.loads((PRESET.parent / "qwen3-next-80b-a3b.json").read_text())
    cfg.update(num_hidden_layers=100_000, full_attention_interval=50_000)
    shape = models.shape_from_config(cfg)
    assert shape.full_attention_every == 50_000 and shape.num_full_attention_layers == 2


# ------------------------------------------------------------------ inputs that are not files
# (issue 18, item 8): a FIFO, a socket or a device is refused before it is opened, so nothing
# waits on it; the subprocess timeout turns a hang back into a failure.


def quick(args, tmp_path, stdin=subprocess.DEVNULL, env=None):
    """The command line with a time limit (a hang fails the test, not the suite)."""
    return subprocess.run(
        [sys.executable, "-m", "costmodel", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=hang_limit(1),
        cwd=tmp_path,
        stdin=stdin,
        env=env,
    )


def one_line(result, message: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr[-800:]
    assert result.returncode == 2, result.stderr[-500:]
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("costmodel: error: ")
    assert message in result.stderr, result.stderr


NOT_A_FILE = "is not a regular file; expected a file"


@pytest.mark.parametrize(
    "make_args",
    [
        lambda f, t: ["report", "--scenario", f],
        lambda f, t: ["gemms", "--scenario", f],
        lambda f, t: ["params", f],
        lambda f, t: ["report", "--set", f"model={f}"],
        lambda f, t: ["report", "--scenario", write(t, "s.yaml", f"model: {f}\n")],
        lambda f, t: ["report", "--scenario", write(t, "s.yaml", f"sequence_lengths: {f}\n")],
        lambda f, t: ["gemms", "--set", f"sequence_lengths={f}"],
    ],
    ids=["scenario", "gemms", "params", "set-model", "model", "lengths", "set-lengths"],
)
def test_a_fifo_is_refused_at_once(tmp_path, make_args):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    one_line(quick(make_args(fifo, tmp_path), tmp_path), f"'{fifo}': {NOT_A_FILE}")


def test_a_socket_and_devices_are_refused(tmp_path):
    path = tmp_path / "socket"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        one_line(quick(["params", path], tmp_path), f"'{path}': {NOT_A_FILE}")
    for device in ("/dev/zero", "/dev/null"):
        one_line(
            quick(["report", "--set", f"sequence_lengths={device}"], tmp_path),
            f"sequence_lengths '{device}': {NOT_A_FILE}",
        )
    read_end, write_end = os.pipe()  # an open pipe that never ends: stdin of a shell pipeline
    try:
        for args in (["params", "/dev/stdin"], ["gemms", "--scenario", "/dev/stdin"]):
            one_line(quick(args, tmp_path, stdin=read_end), f"'/dev/stdin': {NOT_A_FILE}")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_symlink_to_a_file_is_read(tmp_path):
    (tmp_path / "real.yaml").write_text("step_time: 240\n")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "real.yaml")
    result = quick(["report", "--scenario", tmp_path / "link.yaml", "--format", "json"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["scenario"]["step_time"] == 240


# ------------------------------------------------------------------ text that cannot be printed
# (issue 18, item 11): a lone surrogate is refused when the scenario is read, not met later as a
# UnicodeEncodeError when the report is printed


def test_a_name_that_is_not_utf8_is_refused(tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # strict, as under a UTF-8 locale
    result = quick(["report", "--set", "name=Team \udcff"], tmp_path, env=env)
    one_line(result, "name: 'Team \\udcff' is not allowed; expected a string of at most 200")


def test_a_lengths_path_that_is_not_utf8_is_refused(tmp_path):
    (tmp_path / "l\udcff.txt").write_text("100\n200\n")  # the file exists: Linux allows the name
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    result = quick(["report", "--set", "sequence_lengths=l\udcff.txt"], tmp_path, env=env)
    one_line(result, "sequence_lengths: 'l\\udcff.txt' is not allowed")


def test_name_bound_and_the_shipped_scenarios():
    limit = scenario.MAX_NAME_CHARACTERS
    assert scenario.FIELDS["name"].maximum == limit == 200
    assert scenario.check_value("name", "名" * limit) == "名" * limit
    with pytest.raises(CostModelError, match="expected a string of at most 200 characters"):
        scenario.check_value("name", "名" * (limit + 1))
    root = Path(__file__).resolve().parents[2]
    shipped = [*sorted((root / "scenarios").glob("*.yaml")), None]  # None: the course
    for path in shipped:
        name = scenario.resolve(path)["name"]
        assert 0 < len(name) <= limit, path
