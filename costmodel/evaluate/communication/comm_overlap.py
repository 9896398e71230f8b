"""What of a step's communication compute hides (costmodel.evaluate.communication.communication's overlap
rules, OVERLAP_RULES): the compute a collective may hide behind (`Compute`, the windows of a
step on one GPU) and the exposed seconds the rules leave (`expose`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from costmodel.records import frozen_dataclass

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
#: The compute windows of a step on one GPU that collectives hide behind, in order.
WINDOWS = ("first forward", "other forwards", "last backward", "other backwards")


@frozen_dataclass
class Compute:
    """Seconds of compute on one GPU per step that collectives hide behind: the forward, the
    backward (recompute included) and, within both, the attention core. Counted as hardware
    FLOPs at the GPU's peak: a lower bound on the compute time."""

    forward: float
    backward: float
    attention: float
    basis: str = "hardware FLOPs of the phase at the GPU's peak (a lower bound on compute time)"


#: What a collective may hide behind: (label, compute windows, at most the attention core).
HIDE = {
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


def expose(rows: list, hides: list, compute: Compute | None, micro_batches: int):
    """The rows (comm_rows.Collective) with their exposed seconds (`exposed_seconds`) and the
    compute each may hide behind."""
    exposed = exposed_seconds([row.seconds for row in rows], hides, compute, micro_batches)
    return [
        replace(row, exposed_seconds=seconds, hidden_behind=hide[0] if hide else None)
        for row, seconds, hide in zip(rows, exposed, hides)
    ]


def window_seconds(forward: float, backward: float, n: int) -> dict[str, float]:
    """The compute seconds of each window (WINDOWS) of a step of `n` micro batches with
    `forward` and `backward` seconds of compute: the first micro batch's and the others'."""
    return {
        "first forward": forward / n,
        "other forwards": forward * (n - 1) / n,
        "last backward": backward / n,
        "other backwards": backward * (n - 1) / n,
    }


def exposed_seconds(
    seconds: list[float], hides: list, compute: Compute | None, micro_batches: int
) -> list[float]:
    """The exposed seconds of each row (`seconds`, what each may hide behind `hides`): each
    collective that may hide takes what is left of its compute windows (the narrowest rules
    first, the CP ring at most the attention core's compute), so collectives behind the same
    compute share it."""
    n = micro_batches
    forward, backward, attention = (
        (compute.forward, compute.backward, compute.attention) if compute else (0.0, 0.0, 0.0)
    )
    left = window_seconds(forward, backward, n)
    exposed = list(seconds)
    order = sorted(
        (i for i, hide in enumerate(hides) if hide),
        key=lambda i: (len(hides[i][1]), not hides[i][2]),
    )
    for i in order:
        _, windows, capped = hides[i]
        limit = attention if capped else math.inf
        hidden = 0.0
        for window in windows:
            take = max(0.0, min(seconds[i] - hidden, left[window], limit - hidden))
            left[window] -= take
            hidden += take
        if capped:
            attention -= hidden
        exposed[i] = max(0.0, seconds[i] - hidden)
    return exposed
