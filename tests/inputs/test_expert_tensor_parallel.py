"""expert_tensor_parallel: Megatron-Core's MoE parallel folding (the expert layers' ranks ETP x
EP x EDP per stage, ETP x EP dividing TP x CP x DP), hand-computed on Mixtral 8x7B
(tests/configs/mixtral-8x7b.json: 32 layers, 8 experts of width 14,336, hidden 4,096, top-2;
its routed experts 32 x 8 x 3 x 4,096 x 14,336 = 45,097,156,608 parameters) on 16 H100s, 8 a
node, TP 2 with sequence parallelism, EP 8."""

import pytest

from costmodel.cli import main
from costmodel.errors import CostModelError
from costmodel.evaluate.communication.comm_placement import expert_sizes, placement
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import gemms, run
from costmodel.inputs import layout, scenario

MIXTRAL = {
    "model": "tests/configs/mixtral-8x7b.json",
    "num_gpus": 16,
    "gpu": "H100",
    "tensor_parallel": 2,
    "sequence_parallel": True,
    "expert_parallel": 8,
    "samples_per_step": 64,
    "seq_len": 4096,
    "mean_tokens_per_sample": 4096,
    "step_time": None,
}
EXPERTS = 32 * 8 * 3 * 4096 * 14336


def resolve(**changes):
    return scenario.resolve(overrides={**MIXTRAL, **changes})


def collectives(sc):
    return {c.name: c for c in run.communication_of(sc).collectives}


def test_the_experts_parameters_are_as_hand_computed():
    assert resolve().shape.breakdown["routed_experts_total"] == EXPERTS == 45_097_156_608


def test_folding_allows_ep_beyond_dp():
    """TP 2 x CP 2 leaves DP 4: EP 8 inside DP is refused (today's rule); folded with ETP 1,
    ETP x EP = 8 divides TP x CP x DP = 16, and the experts' data parallel is 16 / 8 = 2."""
    with pytest.raises(CostModelError) as refused:
        resolve(context_parallel=2)
    assert str(refused.value) == (
        "expert_parallel: 8 is not allowed; expected a divisor of num_experts (8) and of "
        "data_parallel (4)"
    )
    sc = resolve(context_parallel=2, expert_tensor_parallel=1)
    assert (sc.data_parallel, sc.expert_parallel, sc.expert_tensor_parallel) == (4, 8, 1)
    assert layout.expert_split(2, 2, 4, 8, 1) == (1, 2)
    assert layout.expert_split(2, 1, 8, 8, None) == (2, 1)  # null: ETP = TP, DP / EP


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"expert_tensor_parallel": 3},
            "expert_tensor_parallel: 3 is not allowed; expected a divisor of TP x CP x DP "
            "(2 x 1 x 8 = 16) and of the routed expert width (14,336)",
        ),
        (
            {"expert_tensor_parallel": 1, "expert_parallel": 16},
            "expert_parallel: 16 is not allowed; expected a divisor of num_experts (8) and of "
            "TP x CP x DP (2 x 1 x 8 = 16) / expert_tensor_parallel 1",
        ),
        (
            {"expert_tensor_parallel": 4, "expert_parallel": 8},
            "expert_parallel: 8 is not allowed; expected a divisor of num_experts (8) and of "
            "TP x CP x DP (2 x 1 x 8 = 16) / expert_tensor_parallel 4",
        ),
    ],
)
def test_refusals_name_the_key(changes, message):
    with pytest.raises(CostModelError) as refused:
        resolve(**changes)
    assert str(refused.value) == message


def test_a_dense_model_takes_no_expert_tensor_parallel():
    with pytest.raises(CostModelError) as refused:
        scenario.resolve(
            overrides={"num_experts": 0, "experts_per_token": 0, "expert_tensor_parallel": 1}
        )
    assert str(refused.value) == (
        "expert_tensor_parallel: 1 is not allowed; expected null for a dense model"
    )


def test_the_cli_refuses_in_one_line(capsys):
    assert main(["report", "--set", "expert_tensor_parallel=5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("costmodel: error: expert_tensor_parallel: 5")


def test_expert_bytes_per_gpu():
    """ETP 1: a GPU holds E / (ETP x EP x PP) = 45,097,156,608 / 8 of the experts' parameters,
    not / (TP x EP) = / 16; the dense rest (802,818,048 a GPU) is unchanged. The optimizer's
    bytes are the same: the experts' states shard over EDP = 16 / 8 = 2 instead of 1, so the 16
    GPUs hold 1/16 of them either way (12 bytes a parameter, ZeRO 1)."""
    plain, folded = resolve(), resolve(expert_tensor_parallel=1)
    before = gpu_memory.most_loaded(plain, plain.shape, plain.micro_batches_per_step)
    after = gpu_memory.most_loaded(folded, folded.shape, folded.micro_batches_per_step)
    dense = 802_818_048
    assert before["params_on_gpu"] == dense + EXPERTS / 16 == 3_621_390_336
    assert after["params_on_gpu"] == dense + EXPERTS / 8 == 6_439_962_624
    assert after["weights"] == 2 * 6_439_962_624
    assert after["optimizer"] == before["optimizer"] == 12 * (dense / 8 + EXPERTS / 16)


def test_etp_equal_to_tp_keeps_the_bytes_and_gemms():
    plain, same = resolve(), resolve(expert_tensor_parallel=2)
    one = gpu_memory.most_loaded(plain, plain.shape, plain.micro_batches_per_step)
    two = gpu_memory.most_loaded(same, same.shape, same.micro_batches_per_step)
    assert one["total"] == two["total"]
    assert gemms.weight_shapes(plain) == gemms.weight_shapes(same)


def test_expert_gemms_split_by_etp():
    """ETP 1: a routed expert's gate + up is whole (n = 2 x 14,336), its rows the tokens of the
    EP group over TP: 8 x 4,096 x 2 / 8 x 1 / 2 = 4,096 (TP 2, ETP = TP: 8,192 rows, n /
    2); each GPU still runs 1/TP of its tokens' expert FLOPs."""
    rows = {r.key: r for r in gemms.model_gemms(resolve(expert_tensor_parallel=1))}
    up, down = rows["expert_gate_up"], rows["expert_down"]
    assert (up.m, up.k, up.n) == (4096, 4096, 28672)
    assert (down.m, down.k, down.n) == (4096, 14336, 4096)
    assert up.per_gpu_fraction == down.per_gpu_fraction == 0.5
    plain = {r.key: r for r in gemms.model_gemms(resolve())}["expert_gate_up"]
    assert (plain.m, plain.n) == (8192, 14336)
    assert up.m * up.n == plain.m * plain.n  # the same FLOPs a GPU


def test_the_ep_group_follows_the_expert_rank_order():
    """TP 2, EP 8 on nodes of 8: ranks TP fastest put an EP group on every other rank, 16
    ranks over 2 nodes (4 a node); folded (ETP 1, EP next) its 8 ranks are one node. ETP 1 and
    no shared expert: the MoE layers' MLP half of the TP collectives goes (all 32 layers MoE:
    half of them); EDP 2 adds the experts' DP rows."""
    before = collectives(resolve(step_time=10))
    after = collectives(resolve(step_time=10, expert_tensor_parallel=1))
    ep = "EP all-to-all, dispatch"
    assert (before[ep].placement, before[ep].ranks_per_node) == ("inter-node", 4)
    assert (after[ep].placement, after[ep].ranks_per_node) == ("intra-node", 8)
    tp = [name for name in before if name.startswith("TP ")]
    for name in tp:
        assert after[name].bytes_per_gpu == pytest.approx(before[name].bytes_per_gpu / 2)
    assert "DP gradient reduce-scatter (experts)" not in before  # EDP = DP / EP = 1
    assert after["DP gradient reduce-scatter (experts)"].group_size == 2


def test_expert_placement_sizes():
    """Qwen3-Next's layout (TP 1, CP 4, EP 8, DP 64 on 256 GPUs, 8 a node): TP, CP, EP puts an
    EP group on every fourth rank (2 a node, 4 nodes); the expert order ETP, EP, EDP on one."""
    assert placement((1, 4, 8, 8, 1), ("ep",), 8) == (True, 2)
    assert expert_sizes(1, 8, 32, 1) == (1, 1, 8, 32, 1)
    assert placement(expert_sizes(1, 8, 32, 1), ("ep",), 8) == (False, 8)
