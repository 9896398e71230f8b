"""Communication of one training step for a parallel layout, in numbers (plain numbers in, not a
scenario): every collective with its group, where it runs, the bytes each GPU sends, the
bandwidth it gets, its seconds and its share of the step; the totals; the pipeline bubble.

The closed forms are in `costmodel.derive.communication` (sources there); this module puts the
ranks on nodes and evaluates them.

Where a group runs. Ranks are numbered TP fastest, then CP, then EP, then the rest of DP, then
PP outermost (Megatron-LM's order; the EP ranks are DP ranks, the innermost e_p of them); rank
r sits on node r // gpus_per_node. A kind of group runs intra-node when every group of that
kind lies on one node, at the intra-node bandwidth; else it spans nodes, with g_n of its ranks
on each node (the fewest, when uneven), and uses NVLink and the network at once (the split of
`derive.communication.across_nodes`).

The total is an upper bound: it assumes that nothing overlaps, neither collectives with each
other nor with compute, and that each transfer runs at the links' peak. Real frameworks hide
much of it (DP reduce-scatter during the backward, EP all-to-all and the CP ring behind
compute), and real transfers reach less than the peak.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass

import sympy as sp

from costmodel.derive import communication as comm
from costmodel.derive import symbols as sym
from costmodel.errors import CostModelError
from costmodel.inputs import hardware

#: The placement rule, as the result states it.
PLACEMENT_RULE = (
    "ranks numbered TP fastest, then CP, EP, the rest of DP, PP outermost; node = rank // "
    "gpus_per_node; a group runs intra-node when every group of its kind lies on one node, "
    "else it uses NVLink and the network at once, g_n of its ranks on each node"
)
OVERLAP = (
    "upper bound: no collective overlaps another or compute, every transfer at the links' peak "
    "(no latency term: large messages)"
)
ASSUMPTIONS = (
    "one network card per GPU; its bandwidth and NVLink's are one-direction peaks",
    "ring collectives across nodes: each GPU's NIC carries 1/g_n of what the GPU sends "
    "(NCCL's rings leave each node through different NICs)",
    "DP: gradients reduced once per step (ZeRO 0-2, as Megatron-LM accumulates them); "
    "ZeRO 3 gathers the weights for each micro batch's forward and backward",
    "dense weights reduced over DP x CP ranks, routed experts over DP x CP / EP ranks; "
    "experts split by TP as well (expert TP = TP); embedding and lm_head spread evenly over PP",
    "EP: each rank dispatches its b S / (CP TP) tokens, every one to k experts, routed evenly; "
    "no node-limited routing, no de-duplication, BF16 dispatch",
    "layers spread evenly over pipeline stages; a middle stage's point-to-point traffic",
    "full recompute repeats the forward's TP, CP and EP collectives in the backward",
)


@dataclass(frozen=True)
class Collective:
    """One collective of the step, as one GPU sees it."""

    name: str
    parallelism: str  # DP, TP, CP, EP or PP
    kind: str  # all-reduce, reduce-scatter, all-gather, all-to-all, point-to-point
    group_size: int
    ranks_per_node: int  # of its group, on each node it spans (g_n)
    placement: str  # "intra-node" or "inter-node"
    calls_per_step: float
    buffer_bytes: float  # one call's buffer (nccl-tests' S)
    bytes_per_gpu: float  # sent by one GPU per step
    intra_node_bytes: float
    inter_node_bytes: float
    bandwidth: float  # what it gets: bytes_per_gpu / seconds, byte/s
    seconds: float  # per step
    share: float  # of the step time


@dataclass(frozen=True)
class Communication:
    collectives: tuple[Collective, ...]
    bytes_per_gpu: float
    seconds: float
    share: float
    #: The estimate is longer than the measured step: it contradicts the step time (a slower link
    #: or a bigger layout than the run has), so no conclusion may rest on it.
    exceeds_step: bool
    bubble_fraction: float  # 1F1B: (p - 1) / (m + p - 1) of the step
    bubble_seconds: float
    upper_bound: bool
    overlap: str
    placement_rule: str
    assumptions: tuple[str, ...]

    def as_dict(self) -> dict:
        return asdict(self)


def _num(expr, values: dict) -> float:
    """The expression's value for numbers given for its symbols (one evaluation per call: a
    direct substitution costs less than compiling each form with lambdify)."""
    expr = sp.sympify(expr)
    return float(expr.xreplace({a: sp.Float(values[a]) for a in expr.free_symbols}))


def _whole(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CostModelError(f"{name}: {value!r}; expected a whole number >= {minimum}")
    return value


def _positive(name: str, value, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or value != value or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise CostModelError(f"{name}: {value!r}; expected a number {bound}")
    return float(value)


#: The parallel dimensions, innermost first, and the ones each group varies.
_DIMS = ("tp", "cp", "ep", "edp", "pp")
_GROUPS = {
    "TP": ("tp",),
    "CP": ("cp",),
    "EP": ("ep",),
    "DP": ("cp", "ep", "edp"),  # dense weights: every DP and CP rank holds them
    "DP experts": ("cp", "edp"),  # an expert shard: the same EP rank of every EP group
    "PP": ("pp",),
}


@functools.lru_cache(maxsize=256)
def placement(sizes: tuple[int, ...], varies: tuple[str, ...], gpus_per_node: int):
    """(spans nodes, g_n) for the groups that vary the dimensions `varies`, with `sizes` the
    sizes of _DIMS (innermost first): whether any such group spans nodes, and the fewest of its
    ranks that a group has on one node.

    Computed from the layout's strides, not rank by rank (a job of 10 million GPUs is as quick
    as one of 8): `_fewest_on_a_node` finds the fewest ranks any group has on any node it
    touches; a group spans nodes exactly when that is fewer than the group's size (a group with
    all of its ranks on one node has them all there)."""
    varying = tuple(dim in varies for dim in _DIMS)
    group = math.prod(size for size, var in zip(sizes, varying) if var)
    fewest = _fewest_on_a_node(tuple(sizes), varying, gpus_per_node)
    return fewest < group, fewest


def _fewest_on_a_node(sizes: tuple[int, ...], varying: tuple[bool, ...], per_node: int) -> int:
    """The fewest ranks of one group on one node, over every group and node, without visiting
    every rank.

    Rank r sits on node r // G (G = per_node) and belongs to the group of its fixed (not
    varying) coordinates. A node holds G consecutive ranks; what it holds of each group depends
    only on where those ranks fall in the layout's strides, and few positions differ. Let `low`
    be the largest stride below G and `block` >= G the next one (a block of ranks shares every
    coordinate above it). A node inside one block looks like any other node whose first rank
    has the same remainder modulo `low` (moving by `low` changes one coordinate of every rank
    in step, keeping which ranks share a group). A node across the border of blocks m - 1 and m looks like any other
    with the same offset of the border modulo G and the same answer to "is every coordinate the
    border changes a varying one" (then the ranks on both sides can share groups). So one node
    of each kind is counted, rank by rank, with the world's last node when it is partial: at
    most about 3 G nodes of G ranks, whatever the number of GPUs."""
    world = math.prod(sizes)
    if per_node == 1:
        return 1
    strides = [math.prod(sizes[:i]) for i in range(len(sizes) + 1)]
    k = next((i for i, stride in enumerate(strides) if stride >= per_node), None)
    starts = {("last", 0): world - world % per_node} if world % per_node else {}
    if k is None:  # the whole world is on one (partial) node
        return _fewest_in([0], sizes, varying, strides, per_node, world)
    low, block = strides[k - 1], strides[k]
    blocks = world // block
    # nodes inside one block: one per remainder of their first rank modulo `low`
    kinds = low // math.gcd(per_node, low)
    inside: dict[int, int] = {}
    for b in range(min(blocks, per_node // math.gcd(per_node, block))):
        first = -(-b * block // per_node) * per_node
        count = (b * block + block - per_node - first) // per_node + 1
        for x in range(first, first + per_node * min(count, kinds), per_node):
            inside.setdefault(x % low, x)
        if len(inside) == kinds:
            break
    starts.update((("inside", kind), x) for kind, x in inside.items())
    # nodes across the border between blocks m - 1 and m (m < blocks), by the lowest coordinate
    # above the block that the border changes (c) and the border's offset on its node
    place = 1
    for c in range(k, len(sizes)):
        if sizes[c] > 1:
            all_varying = all(varying[i] for i in range(k, c + 1) if sizes[i] > 1)
            # borders m = place x n with n not a multiple of sizes[c]; n up to 2 G meets every
            # offset a border can have (of two n with the same remainder modulo G, one is not
            # a multiple of sizes[c], unless every such n is)
            for n in range(1, min((blocks - 1) // place, 2 * per_node) + 1):
                border = place * n * block
                offset = border % per_node
                if n % sizes[c] and offset and border - offset + per_node <= world:
                    starts.setdefault(("across", offset, all_varying), border - offset)
        place *= sizes[c]
    return _fewest_in(list(starts.values()), sizes, varying, strides, per_node, world)


def _fewest_in(starts, sizes, varying, strides, per_node: int, world: int) -> int:
    """The fewest ranks of one group on the nodes that begin at `starts`, rank by rank (in
    NumPy, a few hundred nodes at a time)."""
    import numpy as np

    fewest = per_node
    for chunk in range(0, len(starts), 256):
        first = np.asarray(starts[chunk : chunk + 256], dtype=np.int64)
        ranks = first[:, None] + np.arange(per_node, dtype=np.int64)
        # the group's first rank: the rank with its varying coordinates set to 0
        bases = ranks.copy()
        for size, stride, var in zip(sizes, strides, varying):
            if var:
                bases -= ranks // stride % size * stride
        inside = ranks < world  # the world's last node may be partial
        rows = np.broadcast_to(np.arange(len(first))[:, None], ranks.shape)
        _, counts = np.unique(rows[inside] * world + bases[inside], return_counts=True)
        fewest = min(fewest, int(counts.min()))
    return fewest


def links(gpu: str, gpus_per_node: int = 8) -> tuple[float, float]:
    """(intra-node, network) one-direction bandwidth per GPU from the GPU table
    (`costmodel.inputs.hardware`; the network figure is a default, an assumption)."""
    found = hardware.lookup(gpu)
    if found is None:
        raise CostModelError(f"gpu: {gpu!r}; expected one of {', '.join(hardware.GPUS)}")
    return found.intra_node_bandwidth(gpus_per_node), found.network_bandwidth


def communication(
    *,
    dp: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    ep: int = 1,
    sp: bool = False,
    zero_stage: int = 1,
    grad_bytes: float = 4,
    gpus_per_node: int = 8,
    intra_node_bandwidth: float,
    inter_node_bandwidth: float,
    micro_batch: int,
    seq_len: int,
    hidden_size: int,
    num_layers: int,
    num_full_attention_layers: int,
    num_moe_layers: int,
    experts_per_token: int,
    kv_width: int,
    dense_params: float,
    expert_params: float,
    micro_batches: int,
    step_time: float,
    bytes_per_element: float = 2,
    full_recompute: bool = False,
) -> Communication:
    """Every collective of one step, per GPU, for a layout of tp x cp x dp x pp GPUs (EP inside
    DP). `dense_params` are the parameters outside the routed experts (attention, mixers, shared
    experts, router, embedding, lm_head, norms), `expert_params` every routed expert;
    `kv_width` = key-value heads x head width; `micro_batches` per step on one pipeline;
    bandwidths per GPU, one direction, byte/s; `grad_bytes` per gradient element in the DP
    reduction (4: Megatron-LM's fp32 main gradients, 2: BF16)."""
    tp, pp, cp, ep, dp = (
        _whole("tp", tp),
        _whole("pp", pp),
        _whole("cp", cp),
        _whole("ep", ep),
        _whole("dp", dp),
    )
    if dp % ep:
        raise CostModelError(f"ep: {ep}; the EP ranks are DP ranks: ep must divide dp ({dp})")
    if zero_stage not in (0, 1, 2, 3) or isinstance(zero_stage, bool):
        raise CostModelError(f"zero_stage: {zero_stage!r}; expected 0, 1, 2 or 3")
    gpus_per_node = _whole("gpus_per_node", gpus_per_node)
    num_layers = _whole("num_layers", num_layers)
    for name, value in (
        ("num_full_attention_layers", num_full_attention_layers),
        ("num_moe_layers", num_moe_layers),
    ):
        if _whole(name, value, minimum=0) > num_layers:
            raise CostModelError(f"{name}: {value}; expected at most num_layers ({num_layers})")
    moe_k = _whole("experts_per_token", experts_per_token, minimum=1 if num_moe_layers else 0)
    values = {
        sym.t_p: tp,
        sym.p_p: pp,
        sym.c_p: cp,
        sym.ep: ep,
        sym.d_p: dp,
        sym.b_micro: _whole("micro_batch", micro_batch),
        sym.S: _whole("seq_len", seq_len),
        sym.h: _whole("hidden_size", hidden_size),
        sym.L: num_layers,
        sym.L_full: num_full_attention_layers,
        sym.L_moe: num_moe_layers,
        sym.k_top: max(moe_k, 1),  # unused without MoE layers
        sym.d_kv: _whole("kv_width", kv_width),
        sym.N_exp: _positive("expert_params", expert_params, allow_zero=True),
        sym.N_total: _positive("dense_params", dense_params) + float(expert_params),
        sym.n_mb: _whole("micro_batches", micro_batches),
        sym.beta_g: _positive("grad_bytes", grad_bytes),
        sym.bytes_per_element: _positive("bytes_per_element", bytes_per_element),
    }
    intra = _positive("intra_node_bandwidth", intra_node_bandwidth)
    inter = _positive("inter_node_bandwidth", inter_node_bandwidth)
    step_time = _positive("step_time", step_time)
    recompute = 1 if full_recompute else 0
    sizes = (tp, cp, ep, dp // ep, pp)  # in _DIMS order

    rows: list[Collective] = []

    group_sizes = {
        "TP": tp,
        "CP": cp,
        "EP": ep,
        "DP": dp * cp,
        "DP experts": dp * cp // ep,
        "PP": pp,
    }

    def add(name, parallelism, group, kind, buffer, calls, step_bytes):
        size, calls, step_bytes = group_sizes[group], _num(calls, values), _num(step_bytes, values)
        if size < 2 or step_bytes <= 0:
            return
        call = {sym.n_r: size, sym.buffer_bytes: _num(buffer, values)}
        spans, g = placement(sizes, _GROUPS[group], gpus_per_node)
        if spans:
            intra_part, inter_part = (
                _num(part, {**call, sym.g_node: g}) for part in comm.across_nodes(kind)
            )
            seconds = calls * max(intra_part / intra, inter_part / inter)
        else:
            intra_part, inter_part = _num(comm.COLLECTIVES[kind], call), 0.0
            seconds = calls * intra_part / intra
        rows.append(
            Collective(
                name=name,
                parallelism=parallelism,
                kind=kind,
                group_size=size,
                ranks_per_node=g,
                placement="inter-node" if spans else "intra-node",
                calls_per_step=calls,
                buffer_bytes=call[sym.buffer_bytes],
                bytes_per_gpu=step_bytes,
                intra_node_bytes=calls * intra_part,
                inter_node_bytes=calls * inter_part,
                bandwidth=step_bytes / seconds,
                seconds=seconds,
                share=seconds / step_time,
            )
        )

    # Data parallel: the dense weights, then the routed experts.
    for group, label, held in (
        ("DP", "dense", comm.dense_params_per_rank),
        ("DP experts", "experts", comm.expert_params_per_rank),
    ):
        group_size = comm.dense_dp_group if group == "DP" else comm.expert_dp_group
        on = {sym.N_rank: held, sym.n_r: group_size}
        grads, weights = held * sym.beta_g, held * sym.bytes_per_element
        if zero_stage == 0:
            add(
                f"DP gradient all-reduce ({label})",
                "DP",
                group,
                "all-reduce",
                grads,
                1,
                comm.dp_zero0.subs(on),
            )
        elif zero_stage in (1, 2):
            add(
                f"DP gradient reduce-scatter ({label})",
                "DP",
                group,
                "reduce-scatter",
                grads,
                1,
                comm.dp_grad_reduce_scatter.subs(on),
            )
            add(
                f"DP weight all-gather ({label})",
                "DP",
                group,
                "all-gather",
                weights,
                1,
                comm.dp_param_all_gather.subs(on),
            )
        else:
            add(
                f"ZeRO-3 gradient reduce-scatter ({label})",
                "DP",
                group,
                "reduce-scatter",
                grads,
                sym.n_mb,
                sym.n_mb * comm.dp_grad_reduce_scatter.subs(on),
            )
            add(
                f"ZeRO-3 weight all-gathers, forward and backward ({label})",
                "DP",
                group,
                "all-gather",
                weights,
                2 * sym.n_mb,
                2 * sym.n_mb * comm.dp_param_all_gather.subs(on),
            )

    # Tensor parallel: 2 collectives per layer forward (again under full recompute), 2 backward.
    tp_calls = (sym.L / sym.p_p * sym.n_mb) * (2 * (1 + recompute) + 2)
    tp_bytes = comm.tp_forward * (1 + recompute) + comm.tp_backward
    if sp:
        half = tp_bytes / 2  # an all-reduce = an all-gather + a reduce-scatter, equal halves
        add(
            "TP all-gather (sequence parallel)",
            "TP",
            "TP",
            "all-gather",
            comm.tp_buffer,
            tp_calls,
            half,
        )
        add(
            "TP reduce-scatter (sequence parallel)",
            "TP",
            "TP",
            "reduce-scatter",
            comm.tp_buffer,
            tp_calls,
            half,
        )
    else:
        add("TP all-reduce", "TP", "TP", "all-reduce", comm.tp_buffer, tp_calls, tp_bytes)

    # Context parallel: K/V blocks around the ring (forward 2 blocks per pass, backward 4).
    add(
        "CP ring, K/V blocks (and their gradients)",
        "CP",
        "CP",
        "point-to-point",
        comm.cp_block,
        (sym.L_full / sym.p_p * sym.n_mb) * (sym.c_p - 1) * (2 * (1 + recompute) + 4),
        comm.cp_forward * (1 + recompute) + comm.cp_backward,
    )

    # Expert parallel: dispatch + combine forward (again under full recompute), and backward.
    add(
        "EP all-to-all, dispatch and combine",
        "EP",
        "EP",
        "all-to-all",
        comm.ep_buffer,
        (sym.L_moe / sym.p_p * sym.n_mb) * (2 * (1 + recompute) + 2),
        comm.ep_forward * (1 + recompute) + comm.ep_backward,
    )

    # Pipeline parallel: activations forward, gradients backward, per micro batch.
    add(
        "PP activations and gradients",
        "PP",
        "PP",
        "point-to-point",
        comm.pp_buffer,
        2 * sym.n_mb,
        comm.pp_step,
    )

    total_bytes = sum(row.bytes_per_gpu for row in rows)
    total_seconds = sum(row.seconds for row in rows)
    bubble = _num(comm.bubble_fraction, values)
    return Communication(
        collectives=tuple(rows),
        bytes_per_gpu=total_bytes,
        seconds=total_seconds,
        share=total_seconds / step_time,
        exceeds_step=total_seconds > step_time,
        bubble_fraction=bubble,
        bubble_seconds=bubble * step_time,
        upper_bound=True,
        overlap=OVERLAP,
        placement_rule=PLACEMENT_RULE,
        assumptions=ASSUMPTIONS,
    )
