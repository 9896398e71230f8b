"""NCCL's latency per collective call (derive.communication.LATENCY, the constants of
inputs.hardware.NCCL_LATENCY: NVIDIA/nccl src/graph/tuning.cc), worked out by hand: a base of
8.4 us, 3.4 us a ring step inside a node, 14 us a step between nodes, 4.0 and 14 us a tree
level inside and between nodes."""

from __future__ import annotations

import pytest
import sympy as sp
from test_communication import BASE as SMALL

from costmodel import cli
from costmodel.derive import communication as comm
from costmodel.derive import symbols as sym
from costmodel.evaluate.communication.comm_rows import call_latency
from costmodel.evaluate.communication.communication import communication
from costmodel.inputs.hardware import NCCL_LATENCY

US = 1e-6
NCCL = {getattr(sym, name): value for name, value in NCCL_LATENCY.items()}


def latency(kind: str, ranks: int, per_node: int, log_nodes: int = 0, spans: int = 0) -> float:
    values = {sym.n_r: ranks, sym.g_node: per_node, sym.log_nodes: log_nodes, sym.x_node: spans}
    return float(comm.LATENCY[kind].subs({**NCCL, **values}))


def test_a_ring_counts_its_steps_inside_and_between_nodes():
    # all-gather over 16 ranks on 2 nodes: 15 steps, 1 of them between the nodes
    assert latency("all-gather", 16, 8) == pytest.approx((8.4 + 14 * 3.4 + 14) * US)
    assert latency("reduce-scatter", 16, 8) == latency("all-gather", 16, 8)
    # in one node (g_n = n_r): 7 steps inside it
    assert latency("all-gather", 8, 8) == pytest.approx((8.4 + 7 * 3.4) * US)
    # NCCL's ring formula: base + (nsteps - nInterSteps) intraLat + nInterSteps interLat
    steps, inter = comm.RING_STEPS["all-reduce"]
    assert sp.simplify(steps - 2 * (sym.n_r - 1)) == 0
    assert sp.simplify(inter - 2 * (sym.n_r / sym.g_node - 1)) == 0


def test_an_all_reduce_takes_the_faster_of_ring_and_tree():
    # one node of 8: the ring's 14 steps (56 us) beat the tree's 2 x 7 levels (64.4 us)
    assert latency("all-reduce", 8, 8) == pytest.approx((8.4 + 14 * 3.4) * US)
    # 1,024 nodes of 8: the ring's 16,382 steps (77 ms) lose to the tree's 2 x (7 + 10) levels
    ring = 8.4 + 2 * (8191 - 1023) * 3.4 + 2 * 1023 * 14
    tree = 8.4 + 2 * (7 * 4.0 + 10 * 14)
    assert tree < ring
    assert latency("all-reduce", 8192, 8, log_nodes=10) == pytest.approx(tree * US)
    # what the rows evaluate: the generated form, the group's nodes and their log2
    assert call_latency("all-reduce", 8192, 8, True) == pytest.approx(tree * US)
    assert call_latency("all-gather", 8192, 8, True) == pytest.approx(
        (8.4 + (8191 - 1023) * 3.4 + 1023 * 14) * US
    )


def test_a_transfer_is_one_step():
    assert call_latency("point-to-point", 2, 2, False) == pytest.approx((8.4 + 3.4) * US)
    assert call_latency("point-to-point", 2, 1, True) == pytest.approx((8.4 + 14) * US)
    assert call_latency("all-to-all", 64, 8, True) == pytest.approx((8.4 + 14) * US)


#: test_communication's small layout (its links: 100 GB/s in a node, 10 GB/s between), with
#: four layers of 1e9 parameters, two micro batches and NCCL's latency.
BASE = {
    **SMALL,
    "num_layers": 4,
    "dense_params": 4e9,
    "micro_batches": 2,
    "collective_latency": "nccl",
}


def test_zero3_gathers_one_layer_at_a_time():
    """ZeRO 3 over 16 ranks on 2 nodes, 4 layers, 2 micro batches: a gather per layer for
    each micro batch's forward and backward (16 calls), a reduce-scatter per layer and micro
    batch (8), each one layer's buffer; the bytes are those of whole-model calls."""
    got = communication(**{**BASE, "zero_stage": 3}, dp=16)
    gather = next(r for r in got.collectives if r.kind == "all-gather")
    reduce = next(r for r in got.collectives if r.kind == "reduce-scatter")
    assert (gather.calls_per_step, reduce.calls_per_step) == (16, 8)
    assert gather.buffer_bytes == pytest.approx(4e9 / 4 * 2)  # a layer's BF16 weights
    assert gather.bytes_per_gpu == pytest.approx(2 * 2 * 15 / 16 * 4e9 * 2)
    one = (8.4 + 14 * 3.4 + 14) * US
    assert gather.latency_seconds == pytest.approx(16 * one)
    assert reduce.latency_seconds == pytest.approx(8 * one)
    # the links alone: what the rows took before the latency, the same bytes
    bare = communication(**{**BASE, "zero_stage": 3, "collective_latency": "none"}, dp=16)
    bare_gather = next(r for r in bare.collectives if r.kind == "all-gather")
    assert bare_gather.latency_seconds == 0
    assert gather.seconds == pytest.approx(bare_gather.seconds + 16 * one)


def test_a_ring_over_thousands_of_ranks_waits_milliseconds_a_call():
    """ZeRO 3 over 8,192 ranks (1,024 nodes of 8): each all-gather waits 38.7 ms, whatever
    its size, so a layer-by-layer gather costs what the search took for free."""
    got = communication(**{**BASE, "zero_stage": 3}, dp=8192)
    gather = next(r for r in got.collectives if r.kind == "all-gather")
    per_call = (8.4 + (8191 - 1023) * 3.4 + 1023 * 14) * US
    assert per_call == pytest.approx(0.03870, abs=1e-5)
    assert gather.latency_seconds == pytest.approx(gather.calls_per_step * per_call)


def test_the_report_states_the_key(capsys):
    assert cli.main(["report", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"collective_latency": "nccl"' in out and '"latency_seconds"' in out
