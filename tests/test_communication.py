"""Communication per step (derive.communication, evaluate.communication) and the GPU links
(inputs.hardware), checked against figures worked out by hand on small numbers."""

import pytest
import sympy as sp

from costmodel.derive import communication as comm
from costmodel.derive import symbols as sym
from costmodel.errors import CostModelError
from costmodel.evaluate.communication import communication, links, placement
from costmodel.inputs import assumptions, hardware
from costmodel.inputs.models import load_shape

GB = 1e9


# ------------------------------------------------------------------ links (inputs.hardware)
def test_nvlink_is_half_the_datasheets_both_ways_figure():
    for name, both_ways in [
        ("H20", 900),
        ("H100-SXM", 900),
        ("H200", 900),
        ("H800", 400),
        ("A100-80GB", 600),
        ("A800", 400),
        ("B200", 1800),
    ]:
        gpu = hardware.GPUS[name]
        assert gpu.nvlink_bandwidth == both_ways / 2 * GB, name
        assert gpu.intra_node_bandwidth(8) == gpu.nvlink_bandwidth
        assert gpu.link_source


def test_network_default_per_generation():
    for name in ("H20", "H100-SXM", "H200", "H800", "B200"):
        assert hardware.GPUS[name].network_bandwidth == 50 * GB  # 400 Gb/s
    for name in ("A100-40GB", "A100-80GB", "A800"):
        assert hardware.GPUS[name].network_bandwidth == 25 * GB  # 200 Gb/s
    assert all(
        gpu.network_bandwidth and "assumed" in gpu.link_source for gpu in hardware.GPUS.values()
    )


def test_pcie_fallback_where_nvlink_does_not_join_the_node():
    l40s = hardware.GPUS["L40S"]
    assert l40s.nvlink_bandwidth is None
    assert l40s.intra_node_bandwidth(8) == 32 * GB  # PCIe Gen4 x16, 64 GB/s both ways
    pcie = hardware.GPUS["H100-PCIe"]  # the NVLink bridge pairs two cards
    assert pcie.intra_node_bandwidth(2) == 300 * GB
    assert pcie.intra_node_bandwidth(8) == 64 * GB  # PCIe Gen5 x16
    assert links("h20") == (450 * GB, 50 * GB)
    with pytest.raises(CostModelError, match="gpu"):
        links("no-such-gpu")


def test_existing_columns_unchanged():
    h20 = hardware.GPUS["H20"]
    assert (h20.bf16_flops, h20.hbm_bandwidth, h20.memory_bytes) == (148e12, 4.0e12, 96e9)
    assert hardware.lookup("h100") is hardware.GPUS["H100-SXM"]


# ------------------------------------------------------------------ closed forms
def test_all_reduce_of_1_gb_over_8_ranks_at_100_gb_per_s():
    # 2 x 7/8 GB / 100 GB/s = 17.5 ms
    values = {sym.n_r: 8, sym.buffer_bytes: 1 * GB, sym.W: 100 * GB}
    assert float(comm.all_reduce_time.subs(values)) == pytest.approx(0.0175, rel=1e-12)
    assert float(comm.collective_time("all-reduce").subs(values)) == pytest.approx(0.0175)
    assert float(comm.collective_time("reduce-scatter").subs(values)) == pytest.approx(0.00875)
    assert float(comm.collective_time("all-to-all").subs(values)) == pytest.approx(0.00875)
    assert float(comm.collective_time("point-to-point").subs(values)) == pytest.approx(0.01)


def test_all_reduce_is_a_reduce_scatter_and_an_all_gather():
    assert sp.simplify(comm.reduce_scatter + comm.all_gather - comm.all_reduce) == 0
    # one rank alone sends nothing
    for kind in ("all-reduce", "reduce-scatter", "all-gather", "all-to-all"):
        assert comm.COLLECTIVES[kind].subs(sym.n_r, 1) == 0


def test_across_nodes_split():
    # 16 ranks, 8 per node, buffer 1 GB
    call = {sym.n_r: 16, sym.g_node: 8, sym.buffer_bytes: 1 * GB}
    intra, inter = (float(part.subs(call)) for part in comm.across_nodes("all-reduce"))
    assert inter == pytest.approx(2 * 15 / 16 / 8 * GB)  # one hop in 8 leaves the node
    assert intra + inter == pytest.approx(2 * 15 / 16 * GB)
    intra, inter = (float(part.subs(call)) for part in comm.across_nodes("all-to-all"))
    assert (intra, inter) == (pytest.approx(7 / 16 * GB), pytest.approx(8 / 16 * GB))
    # an all-to-all within one node sends nothing over the network
    assert comm.across_nodes("all-to-all")[1].subs({sym.g_node: sym.n_r}) == 0
    assert comm.across_nodes("point-to-point") == (0, sym.buffer_bytes)
    # both links at once: 16 ranks, 8 per node, NVLink 100 GB/s, network 10 GB/s
    t = comm.time_across_nodes("all-reduce").subs(
        {**call, sym.W_intra: 100 * GB, sym.W_inter: 10 * GB}
    )
    assert float(t) == pytest.approx(2 * 15 / 16 / 8 / 10)  # network-bound: 23.4375 ms


def test_zero3_moves_one_and_a_half_times_plain_data_parallel():
    # the ZeRO paper: stage 3 moves 1.5x the bytes of DP (one micro batch, BF16 gradients)
    same = {sym.n_mb: 1, sym.beta_g: sym.bytes_per_element}
    assert sp.simplify(comm.dp_zero3.subs(same) / comm.dp_zero0.subs(same)) == sp.Rational(3, 2)
    # ZeRO 1/2 move what DP moves
    assert sp.simplify(comm.dp_zero12.subs(same) - comm.dp_zero0.subs(same)) == 0


def test_sequence_parallel_moves_what_tensor_parallel_moves():
    assert sp.simplify(comm.tp_step_sequence_parallel - comm.tp_step) == 0
    # 4 all-reduces per layer of b S h / c_p activations
    expected = 4 * sym.L / sym.p_p * sym.n_mb * 2 * (sym.t_p - 1) / sym.t_p
    expected *= sym.b_micro * sym.S / sym.c_p * sym.h * sym.bytes_per_element
    assert sp.simplify(comm.tp_step - expected) == 0


def test_bubble():
    values = {sym.p_p: 4, sym.n_mb: 12}
    assert comm.bubble_fraction.subs(values) == sp.Rational(3, 15)
    assert comm.bubble_over_ideal.subs(values) == sp.Rational(3, 12)
    assert comm.bubble_fraction.subs(sym.p_p, 1) == 0
    # share of the step = over-ideal / (1 + over-ideal)
    ratio = comm.bubble_over_ideal
    assert sp.simplify(ratio / (1 + ratio) - comm.bubble_fraction) == 0


# ------------------------------------------------------------------ numbers for a layout
BASE = dict(
    intra_node_bandwidth=100 * GB,
    inter_node_bandwidth=10 * GB,
    gpus_per_node=8,
    micro_batch=1,
    seq_len=100,
    hidden_size=10,
    num_layers=1,
    num_full_attention_layers=0,
    num_moe_layers=0,
    experts_per_token=0,
    kv_width=8,
    dense_params=1,
    expert_params=0,
    micro_batches=1,
    step_time=1.0,
    zero_stage=0,
    grad_bytes=2,
)


def run(**changes):
    return communication(**{**BASE, **changes})


def only(result, name_part):
    (row,) = [c for c in result.collectives if name_part in c.name]
    return row


def test_dp_all_reduce_in_one_node():
    # 8 GPUs, one node; 0.5e9 params x 2 bytes = 1 GB of gradients: 17.5 ms at 100 GB/s
    r = run(dp=8, dense_params=0.5e9)
    (row,) = r.collectives
    assert (row.kind, row.group_size, row.placement) == ("all-reduce", 8, "intra-node")
    assert row.buffer_bytes == pytest.approx(1 * GB)
    assert row.bytes_per_gpu == pytest.approx(1.75 * GB)
    assert row.seconds == pytest.approx(0.0175)
    assert row.bandwidth == pytest.approx(100 * GB)
    assert row.share == pytest.approx(0.0175)
    assert (r.seconds, r.share, r.bytes_per_gpu) == (row.seconds, row.share, row.bytes_per_gpu)
    assert r.upper_bound is True and "upper bound" in r.overlap
    assert r.bubble_fraction == 0


def test_dp_all_reduce_across_two_nodes():
    # 16 GPUs on 2 nodes of 8: 2 x 15/16 GB sent, 1/8 of it over the network at 10 GB/s
    (row,) = run(dp=16, dense_params=0.5e9).collectives
    assert (row.placement, row.ranks_per_node) == ("inter-node", 8)
    assert row.bytes_per_gpu == pytest.approx(1.875 * GB)
    assert row.inter_node_bytes == pytest.approx(1.875 / 8 * GB)
    assert row.intra_node_bytes == pytest.approx(1.875 * 7 / 8 * GB)
    assert row.seconds == pytest.approx(0.0234375)  # network-bound
    assert row.bandwidth == pytest.approx(80 * GB)  # 8 NICs of 10 GB/s feed the ring


def test_zero1_reduce_scatter_and_all_gather():
    # 8 ranks, 1e9 params: grads 4 bytes -> 4 GB buffer, 7/8 sent; weights 2 bytes -> 1.75 GB
    r = run(dp=8, dense_params=1e9, zero_stage=1, grad_bytes=4)
    rs, ag = only(r, "reduce-scatter"), only(r, "all-gather")
    assert rs.bytes_per_gpu == pytest.approx(3.5 * GB)
    assert ag.bytes_per_gpu == pytest.approx(1.75 * GB)
    assert r.seconds == pytest.approx(5.25 / 100)


def test_zero3_per_micro_batch():
    # 8 ranks, 1e9 params, BF16 gradients, 2 micro batches: per micro batch 2 all-gathers and a
    # reduce-scatter of 2 GB each, 7/8 sent
    r = run(dp=8, dense_params=1e9, zero_stage=3, grad_bytes=2, micro_batches=2)
    assert only(r, "all-gathers").calls_per_step == 4
    assert only(r, "reduce-scatter").calls_per_step == 2
    assert r.bytes_per_gpu == pytest.approx(6 * 1.75 * GB)


def test_expert_weights_sync_over_dp_over_ep():
    # dp 8, ep 4: each rank holds 4e9 / 4 = 1e9 expert params, synced over 8 / 4 = 2 ranks
    r = run(dp=8, ep=4, dense_params=1, expert_params=4e9, zero_stage=1, grad_bytes=4)
    rs = only(r, "reduce-scatter (experts)")
    assert (rs.group_size, rs.buffer_bytes) == (2, pytest.approx(4 * GB))
    assert rs.bytes_per_gpu == pytest.approx(2 * GB)
    assert only(r, "all-gather (experts)").bytes_per_gpu == pytest.approx(1 * GB)
    assert only(r, "reduce-scatter (dense)").group_size == 8


def test_tensor_parallel():
    # tp 2: buffer b S h beta = 100 x 10 x 2 = 2000 bytes, 4 all-reduces per layer, 2 layers:
    # 8 x 2 x 1/2 x 2000 = 16000 bytes
    r = run(dp=1, tp=2, num_layers=2)
    (row,) = r.collectives
    assert (row.kind, row.calls_per_step, row.buffer_bytes) == ("all-reduce", 8, 2000)
    assert row.bytes_per_gpu == pytest.approx(16000)
    sp_rows = run(dp=1, tp=2, num_layers=2, sp=True).collectives
    assert [c.kind for c in sp_rows] == ["all-gather", "reduce-scatter"]
    assert sum(c.bytes_per_gpu for c in sp_rows) == pytest.approx(16000)
    # full recompute repeats the forward's two: 12 calls
    (again,) = run(dp=1, tp=2, num_layers=2, full_recompute=True).collectives
    assert (again.calls_per_step, again.bytes_per_gpu) == (12, pytest.approx(24000))


def test_context_parallel_ring():
    # cp 2: one K block = 1 x 50 tokens x 8 x 2 bytes = 800; forward K, V once, backward
    # K, V, dK, dV: 6 blocks = 4800 bytes per full-attention layer and micro batch
    r = run(dp=1, cp=2, num_full_attention_layers=1)
    row = only(r, "CP")
    # CP ranks hold the same weights: the gradients are reduced over DP x CP = 2 ranks
    assert only(r, "DP gradient").group_size == 2
    assert (row.kind, row.buffer_bytes, row.calls_per_step) == ("point-to-point", 800, 6)
    assert row.bytes_per_gpu == pytest.approx(4800)
    assert row.seconds == pytest.approx(4800 / (100 * GB))


def test_expert_parallel_all_to_all():
    # ep 4: 100 tokens x k 2 x h 10 x 2 bytes = 4000-byte buffer, 3/4 leaves the rank;
    # 4 all-to-alls per MoE layer and micro batch, 2 micro batches: 8 x 3000 = 24000 bytes
    r = run(dp=4, ep=4, num_moe_layers=1, experts_per_token=2, micro_batches=2, expert_params=4)
    row = only(r, "EP")
    assert (row.buffer_bytes, row.calls_per_step) == (4000, 8)
    assert row.bytes_per_gpu == pytest.approx(24000)
    assert row.placement == "intra-node"


def test_expert_parallel_across_nodes():
    # ep 16 on 8-GPU nodes: half of each rank's buffer goes over the network, 7/16 over NVLink
    r = run(dp=16, ep=16, num_moe_layers=1, experts_per_token=2, expert_params=16)
    row = only(r, "EP")
    assert (row.placement, row.ranks_per_node) == ("inter-node", 8)
    assert row.inter_node_bytes == pytest.approx(4 * 8 / 16 * 4000)
    assert row.intra_node_bytes == pytest.approx(4 * 7 / 16 * 4000)


def test_pipeline_point_to_point_and_bubble():
    # pp 4 on 1-GPU nodes: 12 micro batches, each 100 x 10 x 2 = 2000 bytes forward and back
    r = run(dp=1, pp=4, gpus_per_node=1, micro_batches=12, step_time=10.0)
    (row,) = r.collectives
    assert (row.placement, row.calls_per_step, row.bytes_per_gpu) == ("inter-node", 24, 48000)
    assert row.seconds == pytest.approx(48000 / (10 * GB))
    assert r.bubble_fraction == pytest.approx(3 / 15)
    assert r.bubble_seconds == pytest.approx(2.0)


def test_placement_rule():
    # TP innermost: tp 2 x dp 8 on 8-GPU nodes. TP pairs stay in a node; a DP group (stride 2,
    # 8 ranks) spans 2 nodes with 4 ranks on each.
    sizes = (2, 1, 1, 8, 1)  # tp, cp, ep, the rest of dp, pp
    assert placement(sizes, ("tp",), 8) == (False, 2)
    assert placement(sizes, ("cp", "ep", "edp"), 8) == (True, 4)
    # tp 3 does not tile 8-GPU nodes: some TP group straddles two
    assert placement((3, 1, 1, 8, 1), ("tp",), 8)[0] is True


def test_every_row_is_calls_times_one_collective():
    r = run(
        dp=4,
        tp=2,
        cp=2,
        pp=2,
        ep=2,
        sp=True,
        zero_stage=1,
        num_layers=4,
        num_full_attention_layers=2,
        num_moe_layers=4,
        experts_per_token=2,
        expert_params=1e6,
        dense_params=1e6,
        micro_batches=4,
        full_recompute=True,
    )
    assert {c.parallelism for c in r.collectives} == {"DP", "TP", "CP", "EP", "PP"}
    for c in r.collectives:
        one = comm.COLLECTIVES[c.kind].subs({sym.n_r: c.group_size, sym.buffer_bytes: 1})
        assert c.bytes_per_gpu == pytest.approx(c.calls_per_step * float(one) * c.buffer_bytes)
        assert c.intra_node_bytes + c.inter_node_bytes == pytest.approx(c.bytes_per_gpu)
    assert r.seconds == pytest.approx(sum(c.seconds for c in r.collectives))
    assert r.as_dict()["collectives"][0]["name"] == r.collectives[0].name


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"dp": 6, "ep": 4}, "ep"),
        ({"dp": 8, "zero_stage": 4}, "zero_stage"),
        ({"dp": 0}, "dp"),
        ({"dp": 8, "num_moe_layers": 2}, "num_moe_layers"),
        ({"dp": 8, "step_time": 0}, "step_time"),
        ({"dp": 8, "inter_node_bandwidth": -1}, "inter_node_bandwidth"),
    ],
)
def test_bad_input(changes, field):
    with pytest.raises(CostModelError, match=field):
        run(**changes)


# ------------------------------------------------------------------ the course's run
def course():
    """Qwen3.6-35B-A3B on 40 x H20 (5 nodes of 8), EP 8, DP 40, ZeRO 1, fp32 gradients,
    80 samples of 49,152 tokens per step: 2 micro batches of 1 per rank, 120 s per step."""
    shape = load_shape("qwen3.6-35b-a3b")
    experts = shape.breakdown["routed_experts_total"]
    intra, inter = links("H20")
    return shape, communication(
        dp=40,
        ep=8,
        zero_stage=1,
        grad_bytes=4,
        gpus_per_node=8,
        intra_node_bandwidth=intra,
        inter_node_bandwidth=inter,
        micro_batch=1,
        seq_len=49152,
        hidden_size=shape.hidden_size,
        num_layers=shape.num_layers,
        num_full_attention_layers=shape.num_full_attention_layers,
        num_moe_layers=shape.num_moe_layers,
        experts_per_token=shape.experts_per_token,
        kv_width=shape.num_kv_heads * shape.head_dim,
        dense_params=shape.total_params - experts,
        expert_params=experts,
        micro_batches=2,
        step_time=120,
    )


def test_course_case():
    shape, r = course()
    ep = only(r, "EP")
    # 40 MoE layers x 2 micro batches x 4 all-to-alls, 7/8 of 49,152 x 8 x 2048 x 2 bytes
    assert ep.placement == "intra-node" and ep.calls_per_step == 320
    assert ep.bytes_per_gpu == pytest.approx(320 * 7 / 8 * 49152 * 8 * 2048 * 2)
    assert ep.seconds == pytest.approx(ep.bytes_per_gpu / 450e9)
    # the experts: 1/8 on each rank, synced over 40 / 8 = 5 ranks, one per node
    rs = only(r, "reduce-scatter (experts)")
    assert (rs.group_size, rs.ranks_per_node, rs.placement) == (5, 1, "inter-node")
    experts = shape.breakdown["routed_experts_total"]
    assert rs.bytes_per_gpu == pytest.approx(4 / 5 * experts / 8 * 4)
    assert rs.bandwidth == pytest.approx(50e9)
    # the dense weights: over all 40 ranks, 8 per node
    assert only(r, "reduce-scatter (dense)").ranks_per_node == 8
    # the course: communication is under 3% of the step; even with nothing overlapped
    assert r.share < assumptions.assumed("communication_share")
    assert r.bubble_fraction == 0
