"""The fixed cost per kernel launch (`kernel_launch_overhead`, evaluate.simulate.kernels): the
kernels of a layer counted by hand for a small dense and an MoE model, the `kernel_overhead`
part of the step, and the refusal of a bad value."""

from pathlib import Path

import pytest

from costmodel.cli import main
from costmodel.evaluate.simulate import compute_time, kernels, step_time
from costmodel.inputs import efficiency, scenario

SCENARIOS = Path(__file__).parents[2] / "scenarios"
LLAMA_8B = SCENARIOS / "llama-3.1-8b-packed-64xH100.yaml"


def test_a_dense_layers_kernels_by_hand():
    """Llama: qkv, the output projection, gate-up and down (4 GEMMs: 4 forward, 8 backward),
    one flash kernel each way, 2 norms, 2 residual adds, 1 activation: 10 and 14."""
    assert kernels.layer_kernels(4, 2, "attention", "dense", "flash", False) == (10, 14)
    # eager attention: Q K^T, softmax, P V forward; five kernels backward
    assert kernels.layer_kernels(4, 2, "attention", "dense", "eager", False) == (12, 18)


def test_an_moe_layers_kernels_by_hand():
    """qkv and output (2), the router (1), 8 experts x gate-up and down (16), a shared expert's
    gate-up and down (2): 21 GEMMs; flash 1 and 1; 2 norms; 2 residual adds; the experts' and
    the shared expert's activations (2); routing and permutation 12 each way: 40 and 61."""
    assert kernels.layer_kernels(21, 2, "attention", "moe", "flash", True) == (40, 61)
    # gated DeltaNet's chunked core instead of flash: 6 forward, 9 backward
    assert kernels.layer_kernels(21, 2, "gated_deltanet", "moe", "flash", True) == (45, 69)
    # outside the layers: the lm_head (1 and 2) and the loss (1 and 1)
    assert kernels.outside_kernels(1) == (2, 3)


def layer_counts(sc) -> dict[tuple[str, str], tuple[float, float]]:
    """The kernels per micro batch of each layer kind of a scenario, read back from its
    layer_seconds (the overhead over the seconds per kernel and the micro batches)."""
    eff = efficiency.efficiencies(sc.values)
    gemm = compute_time.gemm_rows(sc, eff, sc.shape)
    per = sc.kernel_launch_overhead * sc.micro_batches_per_step
    out = {}
    for mixer, mlp, _ in compute_time.layer_kinds(sc.shape, sc):
        layer = compute_time.layer_seconds(sc, sc.shape, eff, gemm, 1.0, 1.0, mixer, mlp)
        out[mixer, mlp] = (layer["overhead_forward"] / per, layer["overhead_backward"] / per)
    return out


def test_the_dense_scenarios_layer_counts_and_part():
    """Llama 3.1 8B (32 layers, PP 1): 10 and 14 kernels a layer as counted by hand, and the
    part: 4 us x the micro batches x (32 x 24 + the lm_head's 3 and the loss's 2)."""
    sc = scenario.resolve(LLAMA_8B)
    assert sc.kernel_launch_overhead == 4e-6 and sc.pipeline_parallel == 1
    assert {k: pytest.approx(v) for k, v in layer_counts(sc).items()} == {
        ("attention", "dense"): (10, 14)
    }
    part = step_time.predict(sc)["parts"]["kernel_overhead"]
    assert part == pytest.approx(4e-6 * sc.micro_batches_per_step * (32 * 24 + 5))


def test_the_course_moe_layers_counts_and_part():
    """The course (Qwen3.6-35B-A3B, EP 8: 32 of the 256 experts per GPU; 2 micro batches):
    a full-attention layer has qkv, the output, the router, 32 x 2 expert GEMMs and the shared
    expert's gate-up, down and gate: 70 GEMMs, so 70 + 1 + 2 + 2 + 2 + 12 = 89 forward and
    140 + 1 + 2 + 2 + 2 + 12 = 159 backward; a gated-DeltaNet layer has linear_in and
    linear_out for qkv and the output and the chunked core (6, 9): 94 and 167. The part:
    4 us x 2 x (30 x 261 + 10 x 248 + 5) = 82.52 ms; full recompute launches the forward
    again (in the recompute part)."""
    sc = scenario.resolve()
    assert {k: pytest.approx(v) for k, v in layer_counts(sc).items()} == {
        ("gated_deltanet", "moe"): (94, 167),
        ("attention", "moe"): (89, 159),
    }
    got = step_time.predict(sc)
    assert got["parts"]["kernel_overhead"] == pytest.approx(0.08252)
    without = step_time.predict(sc.what_if(kernel_launch_overhead=0))
    assert without["parts"]["kernel_overhead"] == 0.0
    redone = got["parts"]["recompute"] - without["parts"]["recompute"]
    assert redone == pytest.approx(4e-6 * 2 * (30 * 94 + 10 * 89))  # r = 1: every layer
    # the forward phase (what collectives hide behind) holds the forward's launches
    forward = got["detail"]["phases"]["forward"] - without["detail"]["phases"]["forward"]
    assert forward == pytest.approx(4e-6 * 2 * (30 * 94 + 10 * 89 + 2))


@pytest.mark.parametrize("value, shown", [("-1e-6", "-1e-06"), ("2", "2")])
def test_a_bad_value_is_one_line_exit_2(capsys, value, shown):
    assert main(["report", "--set", f"kernel_launch_overhead={value}"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"costmodel: error: kernel_launch_overhead: {shown} is not allowed; expected a "
        "positive number from 0 to 1\n"
    )
