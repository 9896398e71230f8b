"""The table of one step's collectives (costmodel.evaluate.communication.communication): one row per
collective (`Collective`), added one kind of parallelism at a time (DP, TP, CP, EP, PP), each
placed on nodes (costmodel.evaluate.communication.comm_placement) and timed on its links through the generated
forms (`costmodel.derive.numeric`: COMM, COLLECTIVES, DP, TP, CP and EP, each named by its key).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from costmodel.derive import numeric
from costmodel.derive.lanes import as_float, maximum
from costmodel.evaluate.communication.comm_overlap import HIDE, ep_hide
from costmodel.evaluate.communication.comm_placement import GROUPS, placement
from costmodel.inputs.hardware import NCCL_LATENCY
from costmodel.records import frozen_dataclass


@frozen_dataclass
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
    latency_seconds: float  # of `seconds`: calls x one call's latency (NCCL's model)
    share: float  # of the step time, nothing overlapped
    exposed_seconds: float  # per step, after the overlap rules
    hidden_behind: str | None  # the compute it may hide behind (None: exposed)


@functools.lru_cache(maxsize=4096)
def call_latency(kind: str, size: int, per_node: int, spans: bool) -> float:
    """Seconds of one call's latency (derive.communication.LATENCY, NCCL's constants:
    inputs.hardware.NCCL_LATENCY) of a group of `size` ranks, `per_node` on each node it spans
    (`spans`), or all on one node; cached (the plan's search asks for the same groups many
    times)."""
    nodes = size / per_node if spans else 1
    values = {
        **NCCL_LATENCY,
        "n_r": float(size),
        "g_node": float(per_node if spans else size),
        "log_nodes": float(math.floor(math.log2(nodes))) if nodes >= 1 else 0.0,
        "x_node": 1.0 if spans else 0.0,
    }
    return num(numeric.COLLECTIVES[kind]["latency"], values)


def num(form, values: dict[str, float]) -> float:
    """A form's value: `form` a generated form (`numeric.COMM["n_mb"]`), evaluated at the
    float `values` of its symbols (by name) as SymPy evaluates it with Floats; a number is
    itself."""
    if callable(form):
        return as_float(form(values))
    return as_float(form)


@dataclass
class Table:
    """The rows of one step's collectives, added one kind at a time (`add`)."""

    values: dict[str, float]
    sizes: tuple[int, ...]
    group_sizes: dict[str, int]
    gpus_per_node: int
    intra: float
    inter: float
    step_time: float
    max_nodes: int | None
    #: device-limited routing (moe_router_max_devices): a token once per GPU, at most this many
    max_devices: int | None = None
    latency: bool = True  # collective_latency nccl: each call's latency (`call_latency`)
    rows: list[Collective] = field(default_factory=list)
    hides: list = field(default_factory=list)
    seconds_only: bool = False  # each row its seconds alone (a float), no Collective
    parallelisms: list = field(default_factory=list)  # with seconds_only: each row's
    #: MoE parallel folding: the expert layers' sizes (comm_placement.expert_sizes) and the
    #: symbols' values for the experts' DP rows (t_p the ETP, d_p such that c_p d_p / ep is
    #: the EDP); None: the groups of the dense layout, the same values.
    expert_sizes: tuple[int, ...] | None = None
    expert_values: dict[str, float] | None = None
    #: The share of the TP collectives the layers keep (1; less where ETP 1 takes the MoE
    #: layers' MLP half off the TP group: communication._tp_kept).
    tp_kept: float = 1.0

    def add(self, name, parallelism, group, kind, buffer, calls, step_bytes, hide=None, parts=None):
        """One row: `calls` collectives of `buffer`, `step_bytes` in all; `parts` (EP): the
        (NVLink, network) bytes of one call, instead of the ring's or all-to-all's split; `hide`
        a key of HIDE, or an entry of its form (`ep_hide`), or None."""
        size, values, sizes = self.group_sizes[group], self.values, self.sizes
        if size < 2:
            return
        if self.expert_sizes is not None and group in ("EP", "DP experts"):
            sizes = self.expert_sizes
            values = self.expert_values if group == "DP experts" else values
        calls = num(calls, values)
        if group == "TP" and self.tp_kept != 1.0:
            calls *= self.tp_kept
        spans, g = placement(sizes, GROUPS[group], self.gpus_per_node)
        call = {"n_r": float(size), "buffer_bytes": num(buffer, values), "g_node": float(g)}
        if parts is not None:
            nodes = size / g
            routed = {"M_nodes": float(self.max_nodes or nodes), **values, **call}
            routed["M_devices"] = float(self.max_devices or 0)  # read by numeric.EP_DEVICE only
            intra_part, inter_part = (num(part, routed) for part in parts)
            step_bytes = calls * (intra_part + inter_part)
        elif spans:
            split = numeric.COLLECTIVES[kind]
            intra_part, inter_part = num(split["intra"], call), num(split["inter"], call)
            step_bytes = num(step_bytes, values)
        else:
            intra_part, inter_part = num(numeric.COLLECTIVES[kind]["sent"], call), 0.0
            step_bytes = num(step_bytes, values)
        if group == "TP" and self.tp_kept != 1.0:
            step_bytes *= self.tp_kept
        if step_bytes <= 0:
            return
        latency = calls * call_latency(kind, size, g, spans) if self.latency else 0.0
        seconds = calls * maximum(intra_part / self.intra, inter_part / self.inter) + latency
        if self.seconds_only:
            self.rows.append(seconds)
            self.hides.append(HIDE[hide] if isinstance(hide, str) else hide)
            self.parallelisms.append(parallelism)
            return
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
                latency_seconds=latency,
                share=seconds / self.step_time,
                exposed_seconds=seconds,
                hidden_behind=None,
            )
        )
        self.hides.append(HIDE[hide] if isinstance(hide, str) else hide)


def data_parallel(add, zero_stage: int, overlap_grad_reduce: bool, overlap_param_gather: bool):
    """DP rows: the dense weights, then the routed experts (derive.communication, ZeRO); ZeRO 3
    gathers and reduces one layer at a time (FSDP's unit: a call per layer and micro batch)."""
    per_mb = zero_stage >= 2  # ZeRO 2 and 3 reduce-scatter every micro batch's gradients
    reduce = ("reduce each" if per_mb else "reduce") if overlap_grad_reduce else None
    gather = ("gather each" if zero_stage == 3 else "gather") if overlap_param_gather else None
    for group, label in (("DP", "dense"), ("DP experts", "experts")):
        forms = numeric.DP[label]
        grads, weights = forms["grads"], forms["weights"]
        reduces = numeric.COMM["n_mb"] if per_mb else 1
        if zero_stage == 3:
            grads, weights = forms["layer_grads"], forms["layer_weights"]
            reduces = forms["zero3_reduce_calls"]
        if zero_stage == 0:
            add(
                f"DP gradient all-reduce ({label})",
                "DP",
                group,
                "all-reduce",
                grads,
                1,
                forms["zero0"],
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
            reduces,
            forms["reduce_scatter_each"] if per_mb else forms["reduce_scatter"],
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
            forms["zero3_gather_calls"] if zero_stage == 3 else 1,
            forms["all_gathers_zero3"] if zero_stage == 3 else forms["all_gather"],
            gather,
        )


def tensor_parallel(add, sequence_parallel: bool, recompute: int, overlap: bool):
    """TP rows: per layer of the most loaded stage and micro batch, the forward's collectives
    (again under full recompute) and the backward's."""
    hide = "tp" if overlap and sequence_parallel else None
    for kind, forms in numeric.TP[sequence_parallel, recompute].items():
        add(
            f"TP {kind}" + (" (sequence parallel)" if sequence_parallel else ""),
            "TP",
            "TP",
            kind,
            numeric.COMM["tp_buffer"],
            forms["calls"],
            forms["bytes"],
            hide,
        )


def context_parallel(add, cp_comm_type: str, recompute: int):
    """CP rows, by cp_comm_type: per full-attention layer of the stage and micro batch."""
    names = {
        "p2p": "CP ring, K/V blocks (and their gradients)",
        "all_gather": "CP all-gather of K/V (forward, again in backward)",
        "a2a": "CP all-to-all of Q, K, V and O (Ulysses; four a layer, as one buffer)",
    }
    for kind, forms in numeric.CP[cp_comm_type, recompute].items():
        name = names[cp_comm_type] if kind != "reduce-scatter" else "CP reduce-scatter of dK/dV"
        add(
            name,
            "CP",
            "CP",
            kind,
            forms["buffer"],
            forms["calls"],
            forms["bytes"],
            "cp" if kind == "point-to-point" else None,
        )


def expert_parallel(
    add,
    fp8_dispatch: bool,
    recompute: int,
    ep_overlap: str,
    fraction: float = 1.0,
    shared_overlap: bool = False,
    device_limited: bool = False,
):
    """EP rows: the dispatch direction (FP8 with fp8_dispatch) and the combine direction, each
    once forward (again under full recompute) and once backward per MoE layer of the stage and
    micro batch, split over NVLink and the network per derive.communication (a token once per
    expert copy, or once per GPU under device-limited routing, `device_limited`); what each may
    hide behind by ep_overlap, ep_overlap_fraction (`fraction`) and moe_shared_expert_overlap
    (comm_overlap.ep_hide)."""
    hide = ep_hide(ep_overlap, fraction, shared_overlap)
    calls = numeric.COMM["ep_calls_full_recompute"] if recompute else numeric.COMM["ep_calls"]
    for direction, forms in (numeric.EP_DEVICE if device_limited else numeric.EP).items():
        fp8 = " (FP8)" if direction == "dispatch" and fp8_dispatch else ""
        add(
            f"EP all-to-all, {direction}{fp8}",
            "EP",
            "EP",
            "all-to-all",
            forms["buffer"],
            calls,
            None,
            hide,
            parts=(forms["nvlink"], forms["network"]),
        )


def pipeline_parallel(add, sequence_parallel: bool, ep_overlap: str):
    """The PP row: the activations and their gradients between stages, every micro batch."""
    forms = numeric.COMM
    if sequence_parallel:
        buffer, step = forms["pp_buffer_sequence_parallel"], forms["pp_step_sequence_parallel"]
    else:
        buffer, step = forms["pp_buffer"], forms["pp_step"]
    add(
        "PP activations and gradients",
        "PP",
        "PP",
        "point-to-point",
        buffer,
        forms["two_n_mb"],
        step,
        "dualpipe" if ep_overlap == "dualpipe" else None,
    )
