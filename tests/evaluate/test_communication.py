"""Communication per step (derive.communication, evaluate.communication.communication) and the GPU links
(inputs.hardware), checked against figures worked out by hand on small numbers."""

import dataclasses
from pathlib import Path

import pytest
import sympy as sp

from costmodel.derive import communication as comm
from costmodel.derive import symbols as sym
from costmodel.errors import CostModelError
from costmodel.evaluate.communication.communication import Compute, communication, links, placement
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
    # ZeRO 1 and 2 move what DP moves, at one micro batch
    for stage in (comm.dp_zero1, comm.dp_zero2):
        assert sp.simplify(stage.subs(same) - comm.dp_zero0.subs(same)) == 0


def test_zero2_reduce_scatters_every_micro_batch():
    """ZeRO 2 keeps only its shard of the gradients, so each micro batch's gradients are
    reduce-scattered as its backward produces them: n_mb reduce-scatters a step (ZeRO 1 and
    Megatron-LM's distributed optimizer accumulate, then reduce once)."""
    grads = comm.dp_grad_reduce_scatter
    assert sp.simplify(comm.dp_zero2 - comm.dp_zero1 - (sym.n_mb - 1) * grads) == 0
    # 8 ranks, 1e9 params, fp32 gradients (4 GB buffer, 7/8 sent), 4 micro batches
    zero2 = run(dp=8, dense_params=1e9, zero_stage=2, grad_bytes=4, micro_batches=4)
    rs = only(zero2, "reduce-scatter")
    assert (rs.calls_per_step, rs.bytes_per_gpu) == (4, pytest.approx(4 * 3.5 * GB))
    assert only(zero2, "all-gather").calls_per_step == 1
    zero1 = run(dp=8, dense_params=1e9, zero_stage=1, grad_bytes=4, micro_batches=4)
    assert only(zero1, "reduce-scatter").calls_per_step == 1


def test_sequence_parallel_gathers_the_inputs_again_in_the_backward():
    """Korthikanti et al. (arXiv:2205.05198, 4.2.2): with sequence parallelism the backward
    all-gathers each column-parallel layer's input again (only its TP shard was kept): 6
    all-gathers and 4 reduce-scatters a layer, 10 halves of an all-reduce for plain TP's 8."""
    assert sp.simplify(comm.tp_step_sequence_parallel / comm.tp_step) == sp.Rational(5, 4)
    # 4 all-reduces per layer of the most loaded stage of b S h / c_p activations
    half = (sym.t_p - 1) / sym.t_p * sym.b_micro * sym.S / sym.c_p * sym.h * sym.bytes_per_element
    layers = sp.ceiling(sym.L / sym.p_p) * sym.n_mb
    assert sp.simplify(comm.tp_step - layers * 4 * 2 * half) == 0
    assert sp.simplify(comm.tp_step_sequence_parallel - layers * 10 * half) == 0


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
    num_heads=1,
    num_kv_heads=1,
    head_dim=8,
    dense_params=1,
    expert_params=0,
    micro_batches=1,
    step_time=1.0,
    zero_stage=0,
    grad_bytes=2,
    # the links' bandwidth alone: the figures below are worked out by hand without NCCL's
    # latency per call (its own tests: test_collective_latency.py)
    collective_latency="none",
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
    # sequence parallel: 6 all-gathers (2 forward, 2 backward, the 2 inputs again) and 4
    # reduce-scatters of half an all-reduce each, per layer: 2 x 10 x 1/2 x 2000 = 20000 bytes
    sp_rows = run(dp=1, tp=2, num_layers=2, sp=True).collectives
    assert [(c.kind, c.calls_per_step) for c in sp_rows] == [
        ("all-gather", 12),
        ("reduce-scatter", 8),
    ]
    assert sum(c.bytes_per_gpu for c in sp_rows) == pytest.approx(20000)
    # full recompute repeats the forward's two: 12 calls
    (again,) = run(dp=1, tp=2, num_layers=2, full_recompute=True).collectives
    assert (again.calls_per_step, again.bytes_per_gpu) == (12, pytest.approx(24000))


def test_context_parallel_ring():
    # cp 2: K and V of one rank = 1 x 50 tokens x (8 + 8) x 2 bytes = 1600; forward K/V once,
    # backward K/V and dK/dV once each: 3 transfers = 4800 bytes per layer and micro batch
    r = run(dp=1, cp=2, num_full_attention_layers=1)
    row = only(r, "CP")
    # CP ranks hold the same weights: the gradients are reduced over DP x CP = 2 ranks
    assert only(r, "DP gradient").group_size == 2
    assert (row.kind, row.buffer_bytes, row.calls_per_step) == ("point-to-point", 1600, 3)
    assert row.bytes_per_gpu == pytest.approx(4800)
    assert row.seconds == pytest.approx(4800 / (100 * GB))


def test_expert_parallel_all_to_all():
    # ep 4: 100 tokens x k 2 x h 10 x 2 bytes = 4000-byte buffer, 3/4 leaves the rank;
    # per MoE layer and micro batch a dispatch and a combine forward, the same backward;
    # 2 micro batches: 4 x 3000 = 12000 bytes each way
    r = run(dp=4, ep=4, num_moe_layers=1, experts_per_token=2, micro_batches=2, expert_params=4)
    for row in (only(r, "dispatch"), only(r, "combine")):
        assert (row.buffer_bytes, row.calls_per_step) == (4000, 4)
        assert row.bytes_per_gpu == pytest.approx(12000)
        assert row.placement == "intra-node"


def test_expert_parallel_across_nodes():
    # ep 16 on two 8-GPU nodes, k 2: a token reaches at most min(k, 2 nodes) = 2 nodes, the
    # other one in 1/2: 1 copy over the network (100 x 10 x 2 = 2000 bytes a transfer); each
    # of the k copies lands on its GPU over NVLink unless it is the GPU it arrived on (1 in 8):
    # 2 x 7/8 copies = 3500 bytes; 2 transfers a step each way
    r = run(dp=16, ep=16, num_moe_layers=1, experts_per_token=2, expert_params=16)
    row = only(r, "dispatch")
    assert (row.placement, row.ranks_per_node) == ("inter-node", 8)
    assert row.inter_node_bytes == pytest.approx(2 * 2000)
    assert row.intra_node_bytes == pytest.approx(2 * 3500)
    assert row.seconds == pytest.approx(2 * max(2000 / (10 * GB), 3500 / (100 * GB)))


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
        assert c.intra_node_bytes + c.inter_node_bytes == pytest.approx(c.bytes_per_gpu)
        if c.parallelism == "EP":  # de-duplicated per node: its own split (tests above)
            continue
        one = comm.COLLECTIVES[c.kind].subs({sym.n_r: c.group_size, sym.buffer_bytes: 1})
        assert c.bytes_per_gpu == pytest.approx(c.calls_per_step * float(one) * c.buffer_bytes)
    assert r.seconds == pytest.approx(sum(c.seconds for c in r.collectives))
    assert r.as_dict()["collectives"][0]["name"] == r.collectives[0].name


def cp_row_bytes(result) -> float:
    return sum(c.bytes_per_gpu for c in result.collectives if c.parallelism == "CP")


def test_context_parallel_moves_each_tp_ranks_share_of_the_kv_heads():
    """K/V are split by TP: each TP rank passes its own heads around the CP ring, so the
    traffic per GPU falls as 1/TP, down to one K/V head a rank (a copy, beyond n_kv)."""
    layout = dict(dp=1, cp=2, num_heads=16, num_kv_heads=8, head_dim=8, num_full_attention_layers=1)
    # TP 1: 50 tokens x 8 heads x (8 + 8) x 2 bytes = 12,800 per K/V pair, 3 passes
    assert cp_row_bytes(run(tp=1, **layout)) == pytest.approx(3 * 12800)
    for tp in (2, 4, 8):
        assert cp_row_bytes(run(tp=tp, **layout)) == pytest.approx(3 * 12800 / tp)
    assert cp_row_bytes(run(tp=16, **layout)) == cp_row_bytes(run(tp=8, **layout))
    assert comm.kv_heads_per_rank.subs({sym.n_kv: 8, sym.t_p: 16}) == 1


def test_cp_comm_types():
    """p2p and all_gather move the same bytes (a ring of K/V forward; K/V and dK/dV backward),
    as point-to-point or as ring collectives; a2a moves Q, K, V and O by all-to-all."""
    layout = dict(dp=1, cp=4, num_heads=8, num_kv_heads=2, head_dim=8, num_layers=2)
    layout["num_full_attention_layers"] = 2
    p2p = run(cp_comm_type="p2p", **layout)
    gather = run(cp_comm_type="all_gather", **layout)
    # 25 tokens x 2 heads x 16 x 2 bytes = 1600 per K/V block; 3 passes of 3 blocks, 2 layers
    assert cp_row_bytes(p2p) == cp_row_bytes(gather) == pytest.approx(2 * 3 * 3 * 1600)
    rows = [
        (c.kind, c.calls_per_step, c.buffer_bytes)
        for c in gather.collectives
        if c.parallelism == "CP"
    ]
    # all-gather of the whole sequence's K/V forward and again backward; reduce-scatter of dK/dV
    assert rows == [("all-gather", 4, 4 * 1600), ("reduce-scatter", 2, 4 * 1600)]
    # a2a: Q, K, V, O of 25 tokens: (8 + 2) heads x (8 + 8) x 2 bytes = 8000 bytes; 3/4 leaves
    # the rank; once forward, once backward per layer
    (a2a,) = [c for c in run(cp_comm_type="a2a", **layout).collectives if c.parallelism == "CP"]
    assert (a2a.kind, a2a.buffer_bytes, a2a.calls_per_step) == ("all-to-all", 8000, 4)
    assert a2a.bytes_per_gpu == pytest.approx(4 * 3 / 4 * 8000)


EP_64 = dict(
    dp=64,
    ep=64,
    num_moe_layers=1,
    experts_per_token=8,
    expert_params=64,
    seq_len=1000,
    hidden_size=100,
    inter_node_bandwidth=50 * GB,
    intra_node_bandwidth=160 * GB,
)


def test_expert_all_to_all_crosses_the_network_once_per_node():
    """EP 64 on 8 nodes, k 8 (per token and transfer): without node-limited routing a token
    reaches at most min(8, 8) = 8 nodes, 7 of 8 of them another node: 7 network copies; at
    most 4 nodes (DeepSeek-V3): 4 x 7/8 = 3.5; NVLink carries each of the 8 copies to its GPU
    unless it lands there: 8 x 7/8 = 7. 1000 tokens x 100 x 2 bytes = 200,000 a copy."""
    free, limited = run(**EP_64), run(**EP_64, moe_router_max_nodes=4)
    for result, network in ((free, 7), (limited, 3.5)):
        row = only(result, "dispatch")
        assert row.inter_node_bytes == pytest.approx(2 * network * 200_000)
        assert row.intra_node_bytes == pytest.approx(2 * 7 * 200_000)
        assert row.seconds == pytest.approx(2 * network * 200_000 / (50 * GB))
    # more nodes allowed than the group spans: the group's 8 nodes
    assert run(**EP_64, moe_router_max_nodes=100).seconds == pytest.approx(free.seconds)
    # before: every token sent once per chosen expert, k (n - 8) / n = 7 network copies at
    # best; with de-duplication and 4 nodes, half of it
    assert limited.seconds == pytest.approx(free.seconds / 2)


def test_fp8_dispatch_sends_one_byte_and_a_scale_per_128():
    bf16, fp8 = run(**EP_64), run(**EP_64, fp8_dispatch=True)
    ratio = (1 + 4 / 128) / 2
    assert only(fp8, "dispatch (FP8)").bytes_per_gpu == pytest.approx(
        ratio * only(bf16, "dispatch").bytes_per_gpu
    )
    # the combine (and the dispatch's gradient, the combine's way) stays BF16
    assert only(fp8, "combine").bytes_per_gpu == only(bf16, "combine").bytes_per_gpu
    assert comm.FP8_DISPATCH_BYTES == sp.Rational(33, 32)


def test_the_most_loaded_pipeline_stage_counts():
    """62 layers (59 MoE) on 16 stages: the heaviest holds ceil(62 / 16) = 4 layers, all MoE
    if it can, not the mean 59 / 16 = 3.69."""
    r = run(
        dp=2,
        ep=2,
        pp=16,
        gpus_per_node=1,
        num_layers=62,
        num_moe_layers=59,
        num_full_attention_layers=62,
        experts_per_token=2,
        expert_params=2,
    )
    assert only(r, "dispatch").calls_per_step == 4 * 2  # 4 layers, forward and backward
    assert comm.stage_moe_layers.subs({sym.L: 62, sym.L_moe: 2, sym.p_p: 16}) == 2


def test_pipeline_sends_the_whole_activation_without_sequence_parallel():
    """Megatron-Core's p2p tensor is (S / CP, b, h), split over TP only with sequence
    parallelism: 100 x 10 x 2 = 2000 bytes a micro batch either way, 1000 with SP at TP 2."""
    plain = only(run(dp=1, tp=2, pp=2, gpus_per_node=2), "PP")
    assert (plain.buffer_bytes, plain.bytes_per_gpu) == (2000, 4000)
    split = only(run(dp=1, tp=2, pp=2, gpus_per_node=2, sp=True), "PP")
    assert (split.buffer_bytes, split.bytes_per_gpu) == (1000, 2000)


# ------------------------------------------------------------------ overlap: exposed time
COMPUTE = Compute(forward=0.4, backward=1.2, attention=0.1)
BIG_DP = dict(dp=16, dense_params=1e10, zero_stage=1, grad_bytes=4, micro_batches=4)


def test_nothing_hides_without_the_overlap_flags():
    r = run(**BIG_DP, compute=COMPUTE)
    assert all(c.exposed_seconds == c.seconds and c.hidden_behind is None for c in r.collectives)
    assert r.exposed_seconds == pytest.approx(r.seconds)
    assert r.exposed_share == pytest.approx(r.share)


def test_dp_reduce_and_gather_hide_behind_the_last_backward_and_the_first_forward():
    """16 ranks on 2 nodes, 1e10 parameters: the fp32 gradients' reduce-scatter sends
    15/16 x 40 GB, 1/8 of it over the 10 GB/s network: 0.46875 s; the BF16 weights' all-gather
    half: 0.234375 s. Megatron-LM reduces behind the last of 4 micro batches' backward
    (1.2 / 4 = 0.3 s) and gathers behind the first forward (0.4 / 4 = 0.1 s)."""
    r = run(**BIG_DP, overlap_grad_reduce=True, overlap_param_gather=True, compute=COMPUTE)
    rs, ag = only(r, "reduce-scatter"), only(r, "all-gather")
    assert (rs.seconds, ag.seconds) == (pytest.approx(0.46875), pytest.approx(0.234375))
    assert rs.exposed_seconds == pytest.approx(0.46875 - 0.3)
    assert ag.exposed_seconds == pytest.approx(0.234375 - 0.1)
    assert "last micro batch's backward" in rs.hidden_behind
    assert "first micro batch's forward" in ag.hidden_behind
    assert r.exposed_seconds == pytest.approx(rs.exposed_seconds + ag.exposed_seconds)
    # ZeRO 2: each micro batch's reduce-scatter behind its own backward (all 1.2 s of it)
    zero2 = run(**{**BIG_DP, "zero_stage": 2}, overlap_grad_reduce=True, compute=COMPUTE)
    rs2 = only(zero2, "reduce-scatter")
    assert rs2.seconds == pytest.approx(4 * 0.46875)
    assert rs2.exposed_seconds == pytest.approx(4 * 0.46875 - 1.2)


def test_collectives_behind_the_same_compute_share_it():
    # dense and expert gradients, both behind the last backward's 0.3 s: 0.3 s hidden in all
    r = run(
        dp=16,
        ep=2,
        dense_params=1e10,
        expert_params=2e10,
        zero_stage=0,
        grad_bytes=4,
        micro_batches=4,
        overlap_grad_reduce=True,
        compute=COMPUTE,
    )
    assert len(r.collectives) == 2
    assert r.seconds - r.exposed_seconds == pytest.approx(0.3)


def test_the_cp_ring_hides_behind_the_attention_core_only():
    layout = dict(dp=1, cp=2, num_kv_heads=8, head_dim=8, num_full_attention_layers=1)
    layout.update(seq_len=10**8, intra_node_bandwidth=1e11)  # a ring of 38.4 GB: 0.384 s
    ring = only(run(**layout, compute=COMPUTE), "CP")
    assert ring.seconds == pytest.approx(3 * 5e7 * 8 * 16 * 2 / 1e11)
    assert ring.exposed_seconds == pytest.approx(ring.seconds - 0.1)  # the core's 0.1 s
    assert "attention" in ring.hidden_behind
    gathered = run(**layout, cp_comm_type="all_gather", compute=COMPUTE)
    assert gathered.exposed_seconds == pytest.approx(gathered.seconds)


def test_tp_overlap_needs_sequence_parallelism():
    layout = dict(dp=1, tp=2, num_layers=2, seq_len=10**7, intra_node_bandwidth=1e9)
    with_sp = run(**layout, sp=True, tp_comm_overlap=True, compute=COMPUTE)
    # 2 layers x 10 halves of 1e7 x 10 x 2 bytes: 2 GB at 1 GB/s, more than the 1.6 s of compute
    assert with_sp.seconds == pytest.approx(2.0)
    assert with_sp.exposed_seconds == pytest.approx(with_sp.seconds - 1.6)
    assert all("tp_comm_overlap" in c.hidden_behind for c in with_sp.collectives)
    without = run(**layout, tp_comm_overlap=True, compute=COMPUTE)  # Megatron-LM needs SP
    assert without.exposed_seconds == without.seconds


def test_tp_overlap_stays_inside_a_node():
    """Userbuffers overlap TP inside one NVLink domain (TransformerEngine issue #1071): TP 16 on
    nodes of 8 spans two nodes, so its collectives are exposed whatever tp_comm_overlap says;
    TP 8 on the same nodes hides. By hand: 2 layers x 10 halves of 1e7 x 10 x 2 bytes x 15/16
    each at the network's 1 GB/s (TP 16's ring), 1.875 s, all exposed; the same at TP 8 over
    NVLink's 1 GB/s (7/8 of it: 1.75 s) less the 1.6 s of compute."""
    layout = dict(dp=1, num_layers=2, seq_len=10**7, sp=True, tp_comm_overlap=True)
    layout.update(intra_node_bandwidth=1e9, inter_node_bandwidth=1e9, compute=COMPUTE)
    across = run(**layout, tp=16)
    assert across.exposed_seconds == pytest.approx(across.seconds)
    assert all(c.hidden_behind is None for c in across.collectives)
    inside = run(**layout, tp=8)
    assert inside.exposed_seconds == pytest.approx(inside.seconds - 1.6)
    assert all("tp_comm_overlap" in c.hidden_behind for c in inside.collectives)


def test_dualpipe_hides_the_all_to_all_and_the_pipeline_behind_the_other_micro_batch():
    layout = dict(EP_64, pp=2, micro_batches=2)
    exposed = run(**layout, compute=COMPUTE)
    dual = run(**layout, ep_overlap="dualpipe", compute=COMPUTE)
    hidden = exposed.exposed_seconds - dual.exposed_seconds
    # the all-to-all and the pipeline's transfers are far shorter than the 1.6 s of compute
    moved = sum(c.seconds for c in dual.collectives if c.parallelism in ("EP", "PP"))
    assert hidden == pytest.approx(moved) and moved < 1.6
    assert all(
        "DualPipe" in c.hidden_behind for c in dual.collectives if c.parallelism in ("EP", "PP")
    )


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"dp": 6, "ep": 4}, "ep"),
        ({"dp": 8, "zero_stage": 4}, "zero_stage"),
        ({"dp": 0}, "dp"),
        ({"dp": 8, "num_moe_layers": 2}, "num_moe_layers"),
        ({"dp": 8, "step_time": 0}, "step_time"),
        ({"dp": 8, "inter_node_bandwidth": -1}, "inter_node_bandwidth"),
        ({"dp": 8, "cp_comm_type": "ring"}, "cp_comm_type"),
        ({"dp": 8, "ep_overlap": "always"}, "ep_overlap"),
        ({"dp": 8, "moe_router_max_nodes": 0}, "moe_router_max_nodes"),
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
        num_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        dense_params=shape.total_params - experts,
        expert_params=experts,
        micro_batches=2,
        step_time=120,
    )


def test_course_case():
    shape, r = course()
    # 40 MoE layers x 2 micro batches x 2 all-to-alls each way (forward and backward), 7/8 of
    # 49,152 x 8 x 2048 x 2 bytes
    for ep in (only(r, "dispatch"), only(r, "combine")):
        assert ep.placement == "intra-node" and ep.calls_per_step == 160
        assert ep.bytes_per_gpu == pytest.approx(160 * 7 / 8 * 49152 * 8 * 2048 * 2)
        # and NCCL's latency per call: base 8.4 us and one step inside the node, 3.4 us
        assert ep.latency_seconds == pytest.approx(160 * (8.4e-6 + 3.4e-6))
        assert ep.seconds == pytest.approx(ep.bytes_per_gpu / 450e9 + ep.latency_seconds)
    # the experts: 1/8 on each rank, synced over 40 / 8 = 5 ranks, one per node
    rs = only(r, "reduce-scatter (experts)")
    assert (rs.group_size, rs.ranks_per_node, rs.placement) == (5, 1, "inter-node")
    experts = shape.breakdown["routed_experts_total"]
    assert rs.bytes_per_gpu == pytest.approx(4 / 5 * experts / 8 * 4)
    # one call: a ring of 5 ranks on 5 nodes, its 4 steps all between nodes (14 us each)
    assert rs.latency_seconds == pytest.approx(8.4e-6 + 4 * 14e-6)
    assert rs.bytes_per_gpu / (rs.seconds - rs.latency_seconds) == pytest.approx(50e9)
    # the dense weights: over all 40 ranks, 8 per node
    assert only(r, "reduce-scatter (dense)").ranks_per_node == 8
    # the course: communication is under 3% of the step; even with nothing overlapped
    assert r.share < assumptions.assumed("communication_share")
    assert r.bubble_fraction == 0


@pytest.mark.parametrize(
    "file",
    [None, *sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))],
    ids=lambda f: "course" if f is None else f.stem,
)
def test_as_dict_is_dataclasses_asdict(file, monkeypatch):
    """Communication.as_dict, written out for speed, is `dataclasses.asdict`: equal, the same
    types all the way down (tuples stay tuples), and nothing shared with the result."""
    from costmodel.evaluate.simulate import run
    from costmodel.inputs.scenario import resolve

    results = []

    def kept(**given):
        results.append(communication(**given))
        return results[-1]

    monkeypatch.setattr(run, "communication", kept)
    sc = resolve(file)
    run.comm(sc if sc.step_time is not None else sc.replace(step_time=1.0))
    result = results[0]
    fast, slow = result.as_dict(), dataclasses.asdict(result)

    def typed(x):
        if isinstance(x, dict):
            return {k: typed(v) for k, v in x.items()}, dict
        if isinstance(x, (list, tuple)):
            return [typed(v) for v in x], type(x)
        return x, type(x)

    assert typed(fast) == typed(slow)
    assert fast["compute"] is not result.compute and fast["settings"] is not result.settings
