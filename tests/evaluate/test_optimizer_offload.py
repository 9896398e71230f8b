"""Adam's precision (`optimizer_dtype`, `main_params_dtype`) and activation offloading
(`cpu_offload_layers`): the bytes computed by hand, what the course's run and the DeepSeek-V3
example become, and the refusals (one line, exit status 2)."""

import json
from types import SimpleNamespace

import pytest

from costmodel.cli import main
from costmodel.derive import plain
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import compute_time
from costmodel.inputs import hardware, scenario

DEEPSEEK = "scenarios/deepseek-v3-2048xH800.yaml"


def report(capsys, *sets: str, file: str | None = None) -> dict:
    args = ["report", "--format", "json"] + (["--scenario", file] if file else [])
    for setting in sets:
        args += ["--set", setting]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


# ------------------------------------------------------------------ optimizer precision
@pytest.mark.parametrize(
    "moments, master, state, step",
    [
        ("fp32", "fp32", 12, 30),  # the ZeRO paper's K; 16 bytes read + 14 written
        ("bf16", "fp32", 8, 22),  # DeepSeek-V3: 4 + 2 x 2; 8 + 4 + 8 + 2
        ("bf16", "none", 4, 16),  # no master copy: the BF16 weights read and written
        ("fp16", "fp16", 6, 18),  # 2 + 2 x 2; 4 + 2 + 4 + 8
    ],
)
def test_adam_bytes_per_parameter(moments, master, state, step):
    assert plain.optimizer_state_bytes(moments, master) == state
    assert plain.optimizer_step_bytes(moments, master) == step


def test_a_1b_model_with_bf16_moments_by_hand():
    """1e9 parameters on one GPU (ZeRO 0): 2 GB of BF16 weights, 4 GB of fp32 gradients and
    Adam's 8 GB with BF16 moments and an fp32 master (4 GB without the master copy)."""
    with_master = gpu_memory.model_states(1e9, 0, 0, 1, 1, 4, plain.optimizer_state_bytes("bf16"))
    assert with_master == {"weights": 2e9, "gradients": 4e9, "optimizer": 8e9}
    bare = gpu_memory.model_states(1e9, 0, 0, 1, 1, 4, plain.optimizer_state_bytes("bf16", "none"))
    assert bare["optimizer"] == 4e9
    # ZeRO 1 over 8 ranks shards it: 1 GB
    assert gpu_memory.model_states(1e9, 0, 1, 8, 1, 4, 8)["optimizer"] == 1e9


def test_the_course_memory_and_optimizer_step_follow_the_key(capsys):
    base = report(capsys)
    bf16 = report(capsys, "optimizer_dtype=bf16")
    bare = report(capsys, "optimizer_dtype=bf16", "main_params_dtype=none")
    assert bf16["memory"]["optimizer"] == pytest.approx(base["memory"]["optimizer"] * 8 / 12)
    assert bare["memory"]["optimizer"] == pytest.approx(base["memory"]["optimizer"] * 4 / 12)
    saved = base["memory"]["optimizer"] - bf16["memory"]["optimizer"]
    assert bf16["memory"]["total"] == pytest.approx(base["memory"]["total"] - saved)
    seconds = [r["time"]["detail"]["optimizer_seconds"] for r in (base, bf16, bare)]
    assert seconds[1] == pytest.approx(seconds[0] * 22 / 30)
    assert seconds[2] == pytest.approx(seconds[0] * 16 / 30)


def test_deepseek_v3_states_bf16_moments(capsys):
    """The example's optimizer states are 8 of the 12 bytes a parameter they were in fp32."""
    got = report(capsys, file=DEEPSEEK)
    assert (got["scenario"]["optimizer_dtype"], got["scenario"]["main_params_dtype"]) == (
        "bf16",
        "fp32",
    )
    fp32 = report(capsys, "optimizer_dtype=fp32", file=DEEPSEEK)
    assert got["memory"]["optimizer"] == pytest.approx(fp32["memory"]["optimizer"] * 8 / 12)


# ------------------------------------------------------------------ activation offloading
def test_offloading_2_of_4_layers_by_hand():
    """Four layers of 4 bytes saved each, 2 offloaded: 8 bytes stay; one offloaded layer (4)
    comes back for its backward."""
    kinds = [({"x": 4.0}, {"x": 10.0}, 4)]
    stage = SimpleNamespace(
        pipeline_parallel=1,
        recompute="none",
        recompute_num_layers=None,
        recompute_method="uniform",
        cpu_offload_layers=2,
    )
    assert gpu_memory.stage_activations(kinds, stage) == (8.0, 4.0)
    stage.cpu_offload_layers = 0
    assert gpu_memory.stage_activations(kinds, stage) == (16.0, 0.0)
    stage.cpu_offload_layers = 9  # never the last layer
    assert gpu_memory.stage_activations(kinds, stage) == (4.0, 4.0)


def test_the_host_link_by_generation():
    """PCIe Gen5 x16 on Hopper (64 GB/s a direction), Gen4 on Ampere (32), the table's own
    figure where it has one (L40S: 32)."""
    got = [hardware.host_bandwidth(gpu) for gpu in ("H100-SXM", "A100-80GB", "L40S", "B200")]
    assert got == [64e9, 32e9, 32e9, 64e9]


def test_the_exposed_copies_by_hand(monkeypatch):
    """Two offloaded layers of 128 GB at H20's 64 GB/s host link: 2 s a copy; a layer's forward
    0.5 s and backward 1 s per micro batch: 1.5 + 1 s exposed per layer and micro batch, x 2
    layers x 2 micro batches = 10 s."""
    sc = scenario.resolve(overrides={"recompute": "none", "cpu_offload_layers": 2})
    assert (hardware.host_bandwidth(sc.gpu), sc.micro_batches_per_step) == (64e9, 2)
    monkeypatch.setattr(gpu_memory, "offload_bytes", lambda shape, sc: [128e9, 128e9])
    sums = {"gemm_forward": 40 * 2 * 0.5}  # backward: 2 x the GEMMs' forward
    assert compute_time.offload_seconds(sc, sc.shape, sums, 40) == pytest.approx(10.0)
    hidden = {"gemm_forward": 40 * 2 * 2.0}  # each copy shorter than a layer: nothing exposed
    assert compute_time.offload_seconds(sc, sc.shape, hidden, 40) == 0.0


def test_the_course_without_recompute_offloads_10_layers(capsys):
    base = report(capsys, "recompute=none")
    off = report(capsys, "recompute=none", "cpu_offload_layers=10")
    sc = scenario.resolve(overrides={"recompute": "none", "cpu_offload_layers": 10})
    moved = gpu_memory.offload_bytes(sc.shape, sc)
    assert len(moved) == 10 and min(moved) > 0
    drop = base["memory"]["total"] - off["memory"]["total"]
    assert drop == pytest.approx(sum(moved))  # the loss phase: no layer brought back yet
    assert "offloaded layers" in off["memory"]["convention"]
    # a lever that turns recompute on keeps every layer on the GPU (Megatron runs not both)
    assert gpu_memory.offload_layers(sc.what_if(recompute="full")) == 0


@pytest.mark.parametrize(
    "sets, line",
    [
        (
            ["optimizer_dtype=int8"],
            "optimizer_dtype: 'int8' is not allowed; expected one of fp32, bf16, fp16",
        ),
        (
            ["main_params_dtype=bf16"],
            "main_params_dtype: 'bf16' is not allowed; expected one of fp32, fp16, none",
        ),
        (
            ["cpu_offload_layers=3"],
            "cpu_offload_layers: 3 is not allowed; expected 0 with recompute full (Megatron-LM "
            "offloads only with recompute none)",
        ),
        (
            ["recompute=none", "cpu_offload_layers=40"],
            "cpu_offload_layers: 40 is not allowed; expected fewer than the model's 40 layers "
            "(the last stays on the GPU)",
        ),
        (
            ["recompute=none", "pipeline_parallel=2", "cpu_offload_layers=3"],
            "cpu_offload_layers: 3 is not allowed; expected 0 with pipeline_parallel 2 "
            "(Megatron-LM offloads only with pipeline_parallel 1)",
        ),
        (["cpu_offload_layers=-1"], "cpu_offload_layers: -1 is not allowed"),
    ],
)
def test_bad_values_are_one_line_exit_2(capsys, sets, line):
    args = ["report"]
    for setting in sets:
        args += ["--set", setting]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costmodel: error: {line}") and err.count("\n") == 1
