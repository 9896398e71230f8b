"""Communication of one training step for a parallel layout, in numbers (plain numbers in, not a
scenario): every collective with its group, where it runs, the bytes each GPU sends, the
bandwidth it gets, its seconds and its share of the step, and what of it compute hides; the
totals; the pipeline bubble.

The closed forms are in `costmodel.derive.communication` (sources there); this module puts the
ranks on nodes and evaluates them, through their generated numeric forms (`costmodel.derive.
numeric`, `comm_*`: the forms of `costmodel.derive.numeric_forms.communication_forms`).

Where a group runs. Ranks are numbered TP fastest, then CP, then EP, then the rest of DP, then
PP outermost (Megatron-LM's order; the EP ranks are DP ranks, the innermost e_p of them); rank
r sits on node r // gpus_per_node. A kind of group runs intra-node when every group of that
kind lies on one node, at the intra-node bandwidth; else it spans nodes, with g_n of its ranks
on each node (the fewest, when uneven), and uses NVLink and the network at once (the split of
`derive.communication.across_nodes`; the EP all-to-all's own split, de-duplicated per node).

Two totals. `seconds` and `share` are the upper bound: nothing overlaps, neither collectives
with each other nor with compute, and each transfer runs at the links' peak. `exposed_seconds`
and `exposed_share` apply the overlap rules (OVERLAP_RULES): a collective hides behind the
compute it can run beside (`hidden_behind`), that compute taken as the phase's hardware FLOPs at
the GPU's peak, a lower bound on its time (the caller's `Compute`), so the exposed time is an
upper bound too. Collectives behind the same compute share it, as if one after another.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field, replace

from costmodel.derive import numeric
from costmodel.errors import CostModelError
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import COMMUNICATION_ASSUMPTIONS

#: The placement rule, as the result states it.
PLACEMENT_RULE = (
    "ranks numbered TP fastest, then CP, EP, the rest of DP, PP outermost; node = rank // "
    "gpus_per_node; a group runs intra-node when every group of its kind lies on one node, "
    "else it uses NVLink and the network at once, g_n of its ranks on each node"
)
OVERLAP = (
    "seconds and share: the upper bound, no collective overlaps another or compute, every "
    "transfer at the links' peak (no latency term: large messages); exposed_seconds and "
    "exposed_share: what the overlap rules leave exposed, with compute at the GPU's peak (a lower "
    "bound on compute time, so an upper bound on the exposed time)"
)
#: What each collective may hide behind, and under which key (the exposed figures).
OVERLAP_RULES = (
    "DP gradient reduce-scatter (all-reduce with ZeRO 0), overlap_grad_reduce: behind the last "
    "micro batch's backward (Megatron-LM reduces the accumulated gradients bucket by bucket as "
    "the last backward produces them); ZeRO 2 and 3 reduce-scatter each micro batch's behind "
    "its own backward",
    "DP weight all-gather, overlap_param_gather: behind the next step's first forward "
    "(Megatron-LM gathers each bucket before the forward reaches it); ZeRO 3's per micro batch "
    "behind every forward and backward",
    "CP with cp_comm_type p2p: behind the attention blocks' compute (TransformerEngine sends "
    "the next K/V block while the current one computes); all_gather and a2a: exposed",
    "TP, tp_comm_overlap with sequence parallelism: behind the layers' GEMMs (Transformer "
    "Engine's userbuffers split each GEMM and its all-gather or reduce-scatter into chunks); "
    "Megatron-LM refuses tp_comm_overlap without sequence parallelism: then exposed",
    "EP all-to-all, ep_overlap dualpipe: behind the other micro batch's forward and backward "
    "(DeepSeek-V3's DualPipe, arXiv:2412.19437 section 3.2.1; Megatron-LM's "
    "overlap_moe_expert_parallel_comm); none: exposed",
    "PP point-to-point: behind the other micro batch's compute under DualPipe (the report: "
    "'both all-to-all and PP communication can be fully hidden'); else exposed (small; "
    "Megatron-LM overlaps it only in interleaved 1F1B)",
    "collectives behind the same compute share it, as if one after another; compute is the "
    "phase's hardware FLOPs at the GPU's peak, per GPU, the step's average",
)
#: The CP communication types (Megatron-LM's --cp-comm-type; its `allgather` is all_gather).
CP_COMM_TYPES = tuple(numeric.CP_COLLECTIVES)
#: How the EP all-to-all overlaps compute: none, or DeepSeek-V3's DualPipe.
EP_OVERLAPS = ("none", "dualpipe")
#: The compute windows of a step on one GPU that collectives hide behind, in order.
WINDOWS = ("first forward", "other forwards", "last backward", "other backwards")


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
    seconds: float  # per step, nothing overlapped
    share: float  # of the step time, nothing overlapped
    exposed_seconds: float  # per step, after the overlap rules
    hidden_behind: str | None  # the compute it may hide behind (None: exposed)


@dataclass(frozen=True)
class Compute:
    """Seconds of compute on one GPU per step that collectives hide behind: the forward, the
    backward (recompute included) and, within both, the attention core. Counted as hardware
    FLOPs at the GPU's peak: a lower bound on the compute time."""

    forward: float
    backward: float
    attention: float
    basis: str = "hardware FLOPs of the phase at the GPU's peak (a lower bound on compute time)"


@dataclass(frozen=True)
class Communication:
    collectives: tuple[Collective, ...]
    bytes_per_gpu: float
    seconds: float  # the upper bound: nothing overlapped
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
    exposed_seconds: float  # after the overlap rules (an upper bound on the exposed time)
    exposed_share: float
    compute: dict  # the compute hidden behind: seconds per phase, micro batches, basis
    settings: dict  # the overlap and routing settings the figures rest on
    overlap_rules: tuple[str, ...]

    def as_dict(self) -> dict:
        return asdict(self)


def _num(form, values: dict[str, float]) -> float:
    """A form's value: `form` names a generated form (`numeric.comm_<form>`), evaluated at the
    float `values` of its symbols (by name) as SymPy evaluates it with Floats; a number is
    itself."""
    if isinstance(form, str):
        return float(getattr(numeric, f"comm_{form}")(values))
    return float(form)


def _kind(kind: str) -> str:
    """A collective's kind as the generated forms name it (all-reduce: all_reduce)."""
    return kind.replace("-", "_")


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
    """The fewest ranks of one group on the nodes that begin at `starts`, rank by rank (at most
    about 3 G nodes of G ranks: plain Python, no NumPy to import)."""
    fewest = per_node
    varied = [(size, stride) for size, stride, var in zip(sizes, strides, varying) if var]
    for first in starts:
        counts: dict[int, int] = {}
        for rank in range(first, min(first + per_node, world)):  # the last node may be partial
            # the group's first rank: the rank with its varying coordinates set to 0
            base = rank - sum(rank // stride % size * stride for size, stride in varied)
            counts[base] = counts.get(base, 0) + 1
        fewest = min(fewest, min(counts.values()))
    return fewest


def links(gpu: str, gpus_per_node: int = 8) -> tuple[float, float]:
    """(intra-node, network) one-direction bandwidth per GPU from the GPU table
    (`costmodel.inputs.hardware`; the network figure is a default, an assumption)."""
    found = hardware.lookup(gpu)
    if found is None:
        raise CostModelError(f"gpu: {gpu!r}; expected one of {', '.join(hardware.GPUS)}")
    return found.intra_node_bandwidth(gpus_per_node), found.network_bandwidth


#: What a collective may hide behind: (label, compute windows, at most the attention core).
_HIDE = {
    "reduce": ("the last micro batch's backward (overlap_grad_reduce)", ("last backward",), False),
    "reduce each": (
        "each micro batch's backward (overlap_grad_reduce)",
        ("last backward", "other backwards"),
        False,
    ),
    "gather": ("the first micro batch's forward (overlap_param_gather)", ("first forward",), False),
    "gather each": (
        "each micro batch's forward and backward (overlap_param_gather)",
        WINDOWS,
        False,
    ),
    "cp": ("the attention blocks' compute (the K/V ring, cp_comm_type p2p)", WINDOWS, True),
    "tp": ("the layers' GEMMs (tp_comm_overlap)", WINDOWS, False),
    "dualpipe": (
        "the other micro batch's forward and backward (DualPipe, ep_overlap dualpipe)",
        WINDOWS,
        False,
    ),
}


def _expose(rows: list[Collective], hides: list, compute: Compute | None, micro_batches: int):
    """The rows with their exposed seconds: each collective that may hide takes what is left of
    its compute windows (the narrowest rules first, the CP ring at most the attention core's
    compute), so collectives behind the same compute share it."""
    n = micro_batches
    forward, backward, attention = (
        (compute.forward, compute.backward, compute.attention) if compute else (0.0, 0.0, 0.0)
    )
    left = {
        "first forward": forward / n,
        "other forwards": forward * (n - 1) / n,
        "last backward": backward / n,
        "other backwards": backward * (n - 1) / n,
    }
    exposed = [row.seconds for row in rows]
    order = sorted(
        (i for i, hide in enumerate(hides) if hide),
        key=lambda i: (len(hides[i][1]), not hides[i][2]),
    )
    for i in order:
        _, windows, capped = hides[i]
        limit = attention if capped else math.inf
        hidden = 0.0
        for window in windows:
            take = max(0.0, min(rows[i].seconds - hidden, left[window], limit - hidden))
            left[window] -= take
            hidden += take
        if capped:
            attention -= hidden
        exposed[i] = max(0.0, rows[i].seconds - hidden)
    return [
        replace(row, exposed_seconds=seconds, hidden_behind=hide[0] if hide else None)
        for row, seconds, hide in zip(rows, exposed, hides)
    ]


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
    num_heads: int = 1,
    num_kv_heads: int = 1,
    head_dim: float = 1,
    v_head_dim: float | None = None,
    dense_params: float,
    expert_params: float,
    micro_batches: int,
    step_time: float,
    bytes_per_element: float = 2,
    full_recompute: bool = False,
    cp_comm_type: str = "p2p",
    moe_router_max_nodes: int | None = None,
    fp8_dispatch: bool = False,
    tp_comm_overlap: bool = False,
    overlap_grad_reduce: bool = False,
    overlap_param_gather: bool = False,
    ep_overlap: str = "none",
    compute: Compute | None = None,
) -> Communication:
    """Every collective of one step, per GPU, for a layout of tp x cp x dp x pp GPUs (EP inside
    DP). `num_layers`, `num_full_attention_layers` and `num_moe_layers` are the model's (MTP
    layers included when they are trained); the most loaded pipeline stage's share is taken.
    `dense_params` are the parameters outside the routed experts (attention, mixers, shared
    experts, router, embedding, lm_head, norms), `expert_params` every routed expert; the
    attention heads give the K/V (and, for a2a, Q/O) widths; `micro_batches` per step on one
    pipeline; bandwidths per GPU, one direction, byte/s; `grad_bytes` per gradient element in
    the DP reduction (4: Megatron-LM's fp32 main gradients, 2: BF16). `compute`: the compute
    the collectives may hide behind (None: nothing hides, exposed = seconds)."""
    given = dict(locals())
    tp, pp, cp, ep, dp, gpus_per_node = _checked_layout(given)
    values = _symbol_values(given)
    table = _Table(
        values=values,
        sizes=(tp, cp, ep, dp // ep, pp),  # in _DIMS order
        group_sizes={
            "TP": tp,
            "CP": cp,
            "EP": ep,
            "DP": dp * cp,
            "DP experts": dp * cp // ep,
            "PP": pp,
        },
        gpus_per_node=gpus_per_node,
        intra=_positive("intra_node_bandwidth", intra_node_bandwidth),
        inter=_positive("inter_node_bandwidth", inter_node_bandwidth),
        step_time=_positive("step_time", step_time),
        max_nodes=moe_router_max_nodes,
    )
    recompute = 1 if full_recompute else 0
    add = table.add
    _data_parallel(add, zero_stage, overlap_grad_reduce, overlap_param_gather)
    _tensor_parallel(add, sp, recompute, tp_comm_overlap)
    _context_parallel(add, cp_comm_type, recompute)
    _expert_parallel(add, fp8_dispatch, recompute, ep_overlap)
    add(
        "PP activations and gradients",
        "PP",
        "PP",
        "point-to-point",
        "pp_buffer_sequence_parallel" if sp else "pp_buffer",
        "two_n_mb",
        "pp_step_sequence_parallel" if sp else "pp_step",
        "dualpipe" if ep_overlap == "dualpipe" else None,
    )
    n_mb = int(values["n_mb"])
    rows = _expose(table.rows, table.hides, compute, n_mb)
    settings = {key: given[key] for key in SETTINGS}
    return _result(rows, _num("bubble_fraction", values), table.step_time, n_mb, compute, settings)


#: The overlap and routing settings a result states (Communication.settings).
SETTINGS = (
    "cp_comm_type",
    "moe_router_max_nodes",
    "fp8_dispatch",
    "tp_comm_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "ep_overlap",
)


def _checked_layout(given: dict) -> tuple[int, int, int, int, int, int]:
    """(tp, pp, cp, ep, dp, gpus_per_node) of `communication`'s arguments, each checked, and the
    other settings checked (CostModelError naming the first that is not allowed)."""
    tp, pp, cp, ep, dp = (_whole(name, given[name]) for name in ("tp", "pp", "cp", "ep", "dp"))
    if dp % ep:
        raise CostModelError(f"ep: {ep}; the EP ranks are DP ranks: ep must divide dp ({dp})")
    zero_stage, cp_comm_type, ep_overlap = (
        given["zero_stage"],
        given["cp_comm_type"],
        given["ep_overlap"],
    )
    if zero_stage not in (0, 1, 2, 3) or isinstance(zero_stage, bool):
        raise CostModelError(f"zero_stage: {zero_stage!r}; expected 0, 1, 2 or 3")
    if cp_comm_type not in CP_COMM_TYPES:
        raise CostModelError(f"cp_comm_type: {cp_comm_type!r}; expected one of {CP_COMM_TYPES}")
    if ep_overlap not in EP_OVERLAPS:
        raise CostModelError(f"ep_overlap: {ep_overlap!r}; expected one of {EP_OVERLAPS}")
    if given["moe_router_max_nodes"] is not None:
        _whole("moe_router_max_nodes", given["moe_router_max_nodes"])
    return tp, pp, cp, ep, dp, _whole("gpus_per_node", given["gpus_per_node"])


def _symbol_values(given: dict) -> dict[str, float]:
    """The symbols of derive.communication, by name, as floats (SymPy's Floats: the generated
    forms evaluate as xreplace did), from `communication`'s arguments (each checked)."""
    num_layers = _whole("num_layers", given["num_layers"])
    for name in ("num_full_attention_layers", "num_moe_layers"):
        if _whole(name, given[name], minimum=0) > num_layers:
            raise CostModelError(
                f"{name}: {given[name]}; expected at most num_layers ({num_layers})"
            )
    moe_k = _whole(
        "experts_per_token", given["experts_per_token"], 1 if given["num_moe_layers"] else 0
    )
    n_mb = _whole("micro_batches", given["micro_batches"])
    beta = _positive("bytes_per_element", given["bytes_per_element"])
    head_dim, v_head_dim = given["head_dim"], given["v_head_dim"]
    expert_params = given["expert_params"]
    values = {
        "t_p": given["tp"],
        "p_p": given["pp"],
        "c_p": given["cp"],
        "ep": given["ep"],
        "d_p": given["dp"],
        "b_micro": _whole("micro_batch", given["micro_batch"]),
        "S": _whole("seq_len", given["seq_len"]),
        "h": _whole("hidden_size", given["hidden_size"]),
        "L": num_layers,
        "L_full": given["num_full_attention_layers"],
        "L_moe": given["num_moe_layers"],
        "k_top": max(moe_k, 1),  # unused without MoE layers
        "n_heads": _whole("num_heads", given["num_heads"]),
        "n_kv": _whole("num_kv_heads", given["num_kv_heads"]),
        "d_head": _positive("head_dim", head_dim),  # a shape built from keys: h / heads
        "d_hv": _positive("v_head_dim", head_dim if v_head_dim is None else v_head_dim),
        "N_exp": _positive("expert_params", expert_params, allow_zero=True),
        "N_total": _positive("dense_params", given["dense_params"]) + float(expert_params),
        "n_mb": n_mb,
        "beta_g": _positive("grad_bytes", given["grad_bytes"]),
        "bytes_per_element": beta,
        "beta_dispatch": float(numeric.FP8_DISPATCH_BYTES) if given["fp8_dispatch"] else beta,
    }
    return {name: float(value) for name, value in values.items()}


@dataclass
class _Table:
    """The rows of one step's collectives, added one kind at a time (`add`)."""

    values: dict[str, float]
    sizes: tuple[int, ...]
    group_sizes: dict[str, int]
    gpus_per_node: int
    intra: float
    inter: float
    step_time: float
    max_nodes: int | None
    rows: list[Collective] = field(default_factory=list)
    hides: list = field(default_factory=list)

    def add(self, name, parallelism, group, kind, buffer, calls, step_bytes, hide=None, parts=None):
        """One row: `calls` collectives of `buffer`, `step_bytes` in all; `parts` (EP): the
        (NVLink, network) bytes of one call, instead of the ring's or all-to-all's split."""
        size, values = self.group_sizes[group], self.values
        if size < 2:
            return
        calls = _num(calls, values)
        spans, g = placement(self.sizes, _GROUPS[group], self.gpus_per_node)
        call = {"n_r": float(size), "buffer_bytes": _num(buffer, values), "g_node": float(g)}
        if parts is not None:
            nodes = size / g
            routed = {"M_nodes": float(self.max_nodes or nodes), **values, **call}
            intra_part, inter_part = (_num(part, routed) for part in parts)
            step_bytes = calls * (intra_part + inter_part)
        elif spans:
            intra_part = _num(f"intra_{_kind(kind)}", call)
            inter_part = _num(f"inter_{_kind(kind)}", call)
            step_bytes = _num(step_bytes, values)
        else:
            intra_part, inter_part = _num(f"sent_{_kind(kind)}", call), 0.0
            step_bytes = _num(step_bytes, values)
        if step_bytes <= 0:
            return
        seconds = calls * max(intra_part / self.intra, inter_part / self.inter)
        self.rows.append(
            Collective(
                name=name,
                parallelism=parallelism,
                kind=kind,
                group_size=size,
                ranks_per_node=g,
                placement="inter-node" if spans else "intra-node",
                calls_per_step=calls,
                buffer_bytes=call["buffer_bytes"],
                bytes_per_gpu=step_bytes,
                intra_node_bytes=calls * intra_part,
                inter_node_bytes=calls * inter_part,
                bandwidth=step_bytes / seconds,
                seconds=seconds,
                share=seconds / self.step_time,
                exposed_seconds=seconds,
                hidden_behind=None,
            )
        )
        self.hides.append(_HIDE[hide] if hide else None)


def _result(rows, bubble: float, step_time: float, n_mb: int, compute, settings) -> Communication:
    """The step's communication from its rows (exposed seconds applied): the totals, the
    bubble, what the figures rest on."""
    total_bytes = sum(row.bytes_per_gpu for row in rows)
    total_seconds = sum(row.seconds for row in rows)
    exposed = sum(row.exposed_seconds for row in rows)
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
        assumptions=COMMUNICATION_ASSUMPTIONS,
        exposed_seconds=exposed,
        exposed_share=exposed / step_time,
        compute={
            "forward_seconds": compute.forward if compute else None,
            "backward_seconds": compute.backward if compute else None,
            "attention_seconds": compute.attention if compute else None,
            "micro_batches": n_mb,
            "basis": compute.basis if compute else "none given: nothing hidden",
        },
        settings=settings,
        overlap_rules=OVERLAP_RULES,
    )


def _data_parallel(add, zero_stage: int, overlap_grad_reduce: bool, overlap_param_gather: bool):
    """DP rows: the dense weights, then the routed experts (derive.communication, ZeRO)."""
    per_mb = zero_stage >= 2  # ZeRO 2 and 3 reduce-scatter every micro batch's gradients
    reduce = ("reduce each" if per_mb else "reduce") if overlap_grad_reduce else None
    gather = ("gather each" if zero_stage == 3 else "gather") if overlap_param_gather else None
    for group, label in (("DP", "dense"), ("DP experts", "experts")):
        grads, weights = f"dp_{label}_grads", f"dp_{label}_weights"
        if zero_stage == 0:
            add(
                f"DP gradient all-reduce ({label})",
                "DP",
                group,
                "all-reduce",
                grads,
                1,
                f"dp_{label}_zero0",
                reduce,
            )
            continue
        prefix = "ZeRO-3" if zero_stage == 3 else "DP"
        add(
            f"{prefix} gradient reduce-scatter ({label})"
            if not per_mb
            else f"{prefix} gradient reduce-scatter, each micro batch ({label})",
            "DP",
            group,
            "reduce-scatter",
            grads,
            "n_mb" if per_mb else 1,
            f"dp_{label}_reduce_scatter_each" if per_mb else f"dp_{label}_reduce_scatter",
            reduce,
        )
        add(
            f"ZeRO-3 weight all-gathers, forward and backward ({label})"
            if zero_stage == 3
            else f"DP weight all-gather ({label})",
            "DP",
            group,
            "all-gather",
            weights,
            "two_n_mb" if zero_stage == 3 else 1,
            f"dp_{label}_all_gathers_zero3" if zero_stage == 3 else f"dp_{label}_all_gather",
            gather,
        )


def _tensor_parallel(add, sequence_parallel: bool, recompute: int, overlap: bool):
    """TP rows: per layer of the most loaded stage and micro batch, the forward's collectives
    (again under full recompute) and the backward's."""
    hide = "tp" if overlap and sequence_parallel else None
    for kind, _, _ in numeric.TP_COLLECTIVES[sequence_parallel]:
        form = f"tp_{int(sequence_parallel)}_{recompute}_{_kind(kind)}"
        add(
            f"TP {kind}" + (" (sequence parallel)" if sequence_parallel else ""),
            "TP",
            "TP",
            kind,
            "tp_buffer",
            f"{form}_calls",
            f"{form}_bytes",
            hide,
        )


def _context_parallel(add, cp_comm_type: str, recompute: int):
    """CP rows, by cp_comm_type: per full-attention layer of the stage and micro batch."""
    names = {
        "p2p": "CP ring, K/V blocks (and their gradients)",
        "all_gather": "CP all-gather of K/V (forward, again in backward)",
        "a2a": "CP all-to-all of Q, K, V and O (Ulysses; four a layer, as one buffer)",
    }
    for i, kind in enumerate(numeric.CP_COLLECTIVES[cp_comm_type]):
        name = names[cp_comm_type] if kind != "reduce-scatter" else "CP reduce-scatter of dK/dV"
        form = f"cp_{cp_comm_type}_{recompute}_{i}"
        add(
            name,
            "CP",
            "CP",
            kind,
            f"{form}_buffer",
            f"{form}_calls",
            f"{form}_bytes",
            "cp" if kind == "point-to-point" else None,
        )


def _expert_parallel(add, fp8_dispatch: bool, recompute: int, ep_overlap: str):
    """EP rows: the dispatch direction (FP8 with fp8_dispatch) and the combine direction, each
    once forward (again under full recompute) and once backward per MoE layer of the stage and
    micro batch, split over NVLink and the network per derive.communication."""
    for direction in numeric.EP_DIRECTIONS:
        fp8 = " (FP8)" if direction == "dispatch" and fp8_dispatch else ""
        add(
            f"EP all-to-all, {direction}{fp8}",
            "EP",
            "EP",
            "all-to-all",
            f"ep_{direction}_buffer",
            f"ep_{recompute}_calls",
            None,
            "dualpipe" if ep_overlap == "dualpipe" else None,
            parts=(f"ep_{direction}_nvlink", f"ep_{direction}_network"),
        )
