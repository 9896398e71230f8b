"""The step-time and memory formulas the report and the plan share, each written once in plain
arithmetic (evaluate.simulate.stage, compute_time, gpu_memory): a value checked by hand, a property, and
the same floats on one layout's numbers and on NumPy's arrays over layouts."""

from types import SimpleNamespace

import numpy as np
import pytest

from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import compute_time, optimizer_step, stage


def test_the_dispatch_keeps_numbers_numbers_and_arrays_arrays():
    assert stage.maximum(1, 2.5) == 2.5 and type(stage.maximum(1, 2.5)) is float
    assert stage.minimum(3, 2) == 2 and stage.where(False, 1, 2) == 2
    got = stage.where(np.array([True, False]), np.array([1.0, 2.0]), 0.0)
    assert got.tolist() == [1.0, 0.0]
    assert stage.maximum(np.array([1, 4]), 3).tolist() == [3, 4]


def test_the_most_loaded_stage_takes_the_heaviest_kinds_first():
    """ceil(L / PP) layers, from the heaviest kind down; equal kinds in their order."""
    assert stage.heaviest_stage([1.0, 3.0], [6, 2], 4) == [(1, 2)]
    assert stage.heaviest_stage([1.0, 3.0], [6, 2], 2) == [(1, 2), (0, 2)]
    assert stage.heaviest_stage([1.0, 3.0], [6, 2], 1) == [(1, 2), (0, 6)]
    assert stage.heaviest_stage([2.0, 2.0], [3, 3], 2) == [(0, 3)]
    assert stage.heaviest_stage([1.0, 3.0], [3, 58], 16) == [(1, 4)]  # ceil(61 / 16)


def test_a_stages_layers_are_added_one_after_another(monkeypatch):
    """Ten layers of 0.1 s add to 0.9999999999999999 s (ten additions), not 10 x 0.1 = 1.0: the
    same floats for a number and for arrays, in blocks of any size."""
    assert stage.stage_sum([{"a": 0.1, "b": 1.0}], [(0, 10)]) == {
        "a": 0.9999999999999999,
        "b": 10.0,
    }
    rows = np.array([[[0.1, 0.1]], [[0.5, 0.5]]])  # [kind, figure, layout]
    assert stage.stage_sum(rows, [(0, 10)]).tolist() == [[0.9999999999999999] * 2]
    monkeypatch.setattr(stage, "CHUNK_BYTES", 16)  # a block of one layer and the sum so far
    added = 0.0
    for x in [0.1] * 10 + [0.5]:
        added += x
    assert stage.stage_sum(rows, [(0, 10), (1, 1)]).tolist() == [[added] * 2]


def test_the_recompute_policy_adds_to_the_backward_and_the_attention_phase():
    computed = {
        "parts": {"gemms": 3.0, "attention": 2.0, "linear_attention": 0.0, "memory_bound": 1.0},
        "forward": 2.0,
        "optimizer_seconds": 0.5,
    }
    got = compute_time.with_recompute(computed, 1.5, 0.5, 0.8)
    assert got["parts"]["recompute"] == 1.5
    assert got["phases"] == {"forward": 2.0, "backward": 7.5 - 0.5 - 2.0, "attention": 2.4}
    none = compute_time.with_recompute(computed, 0.0, 0.0, 0.8)
    assert none["phases"]["backward"] < got["phases"]["backward"]


def _shape(experts=0.0, hidden=4, tie=False):
    return SimpleNamespace(
        breakdown={"routed_experts_total": experts}, hidden_size=hidden, tie_word_embeddings=tie
    )


def test_the_optimizer_reads_its_shard_of_the_stage():
    """Adam's 30 bytes a parameter: the dense share over TP x PP (and DP x CP from ZeRO 1), the
    experts' over TP x PP x EP (and their data-parallel group DP x CP / EP)."""
    sizes = dict(tensor_parallel=2, pipeline_parallel=2, expert_parallel=4, context_parallel=1)
    shape = _shape(experts=1600.0)
    sc = SimpleNamespace(**sizes, data_parallel=8, total_params=2000.0, zero_stage=0)
    sc.optimizer_dtype, sc.main_params_dtype = "fp32", "fp32"  # Adam in FP32: 30 bytes a step
    sc.num_mtp_layers = 0
    assert optimizer_step.optimizer_bytes(sc, shape) == 30 * (400 / 4 + 1600 / 16)
    sc.zero_stage = 1
    assert optimizer_step.optimizer_bytes(sc, shape) == 30 * (400 / 4 / 8 + 1600 / 16 / 2)
    sc.data_parallel = np.array([8, 16])  # the plan's layouts
    assert optimizer_step.optimizer_bytes(sc, shape).tolist() == [
        30 * (400 / 4 / 8 + 1600 / 16 / 2),
        30 * (400 / 4 / 16 + 1600 / 16 / 4),
    ]


def test_model_states_by_hand_shrink_with_the_zero_stage():
    """1,000 parameters over 4 ranks, fp32 gradients: 2 + 4 + 12 bytes each at ZeRO 0, the
    optimizer sharded from ZeRO 1, the gradients from 2, the weights at 3."""
    totals = [sum(gpu_memory.model_states(1000.0, 0.0, z, 4, 1, 4).values()) for z in range(4)]
    assert totals == [18000.0, 9000.0, 6000.0, 4500.0]
    experts = gpu_memory.model_states(0.0, 1000.0, 1, 4, 2, 4)
    assert experts == {"weights": 2000.0, "gradients": 4000.0, "optimizer": 6000.0}
    arrays = gpu_memory.model_states(np.array([1000.0, 3.0]), np.array([0.0, 7.0]), 2, 4, 1, 4)
    for i, (dense, expert) in enumerate([(1000.0, 0.0), (3.0, 7.0)]):
        one = gpu_memory.model_states(dense, expert, 2, 4, 1, 4)
        assert {key: value[i] for key, value in arrays.items()} == one


def test_a_stages_parameters_by_hand():
    """The first stage holds the embedding, the last the lm_head; one stage holds both, or one
    of them when they are tied."""
    params = {"experts": 800.0, "embedding": 100.0, "lm_head": 100.0, "layers": 1000.0}
    shape = _shape(hidden=4)
    gradients, experts, first, last = gpu_memory.stage_params(params, shape, 8, 2, 2, 1, 4, 1, True)
    assert (gradients, experts, first, last) == (2 * 2 * 4 * 4, 50.0, 350.0, 350.0)
    _, _, first, _ = gpu_memory.stage_params(params, shape, 8, 2, 1, 1, 4, 1, False)
    assert first == 1000 / 2 + 800 / 8 + 100 / 2 + 100 / 2
    _, _, tied, _ = gpu_memory.stage_params(params, _shape(tie=True), 8, 2, 1, 1, 4, 1, False)
    assert tied == first - 100 / 2
    pp = np.array([1, 2])
    _, _, firsts, _ = gpu_memory.stage_params(params, shape, 8, 2, pp, 1, 4, 1, False)
    assert firsts.tolist() == [first, 350.0]


def test_the_peak_is_the_largest_phase_never_a_sum():
    """States 10, saved 2 a micro batch, working set 3, outside 1, logits 5, gradients 1, two
    micro batches in flight: forward end 16, loss 21, backward 20, optimizer 10."""
    pieces = (2.0, 3.0, 1.0, 5.0, 1.0)
    phase = gpu_memory.stage_phases(10.0, pieces, 2, True)
    assert {name: p["bytes"] for name, p in phase.items()} == {
        "forward_end": 16.0,
        "loss": 21.0,
        "backward": 20.0,
        "optimizer_step": 10.0,
    }
    assert gpu_memory.peak_bytes(phase) == 21.0
    headless = gpu_memory.stage_phases(10.0, pieces, 2, False)
    assert "loss" not in headless and gpu_memory.peak_bytes(headless) == 18.0
    heads = np.array([True, False])
    assert gpu_memory.peak_bytes(gpu_memory.stage_phases(10.0, pieces, 2, heads)).tolist() == [
        21.0,
        18.0,
    ]
    flights = [
        gpu_memory.peak_bytes(gpu_memory.stage_phases(10.0, pieces, f, True)) for f in (1, 2, 4)
    ]
    assert flights == sorted(flights) and len(set(flights)) == 3


@pytest.mark.parametrize("dropout", [False, True])
@pytest.mark.parametrize("sp", [False, True])
def test_a_layers_seconds_are_the_same_floats_on_numbers_and_arrays(sp, dropout):
    """compute_time.layer_seconds of the course at two tensor-parallel sizes, one by one and as an
    array over both (the plan's search): the same floats (with dropout, under eager attention:
    its passes over the scores too)."""
    from costmodel.inputs import efficiency, scenario

    keys = {"dropout": True, "attention_kernel": "eager"} if dropout else None
    base = scenario.resolve(overrides=keys)
    eff = efficiency.efficiencies(base.values)
    one = []
    for tp in (1, 2):
        sc = base.relaid(tensor_parallel=tp, sequence_parallel=sp)
        gemm = compute_time.gemm_rows(sc, eff, sc.shape)
        sums, _, core, linear = compute_time.stage_sums(sc, sc.shape, eff, gemm)
        one.append((sc, gemm, core, linear))
    sc = SimpleNamespace(
        **{
            k: getattr(one[0][0], k)
            for k in (
                "hbm_bandwidth",
                "peak_flops",
                "attention_kernel",
                "seq_len",
                "micro_batch",
                "context_parallel",
                "micro_batches_per_step",
                "expert_parallel",
                "kernel_launch_overhead",
                "dropout",
                "framework",
            )
        }
    )
    sc.tensor_parallel, sc.sequence_parallel = np.array([1, 2]), sp
    gemm = {key: np.array([one[0][1].get(key, 0.0), one[1][1].get(key, 0.0)]) for key in one[1][1]}
    core = np.array([one[0][2], one[1][2]])
    linear = np.array([one[0][3], one[1][3]])
    for mixer, mlp, _ in compute_time.layer_kinds(base.shape, base):
        arrays = compute_time.layer_seconds(sc, base.shape, eff, gemm, core, linear, mixer, mlp)
        for i, (sc_i, gemm_i, core_i, linear_i) in enumerate(one):
            layer = compute_time.layer_seconds(
                sc_i, base.shape, eff, gemm_i, core_i, linear_i, mixer, mlp
            )
            assert {key: float(np.broadcast_to(v, 2)[i]) for key, v in arrays.items()} == layer
