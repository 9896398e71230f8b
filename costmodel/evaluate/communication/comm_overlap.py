"""What of a step's communication compute hides (costmodel.evaluate.communication.communication's overlap
rules, OVERLAP_RULES): the compute a collective may hide behind (`Compute`, the windows of a
step on one GPU) and the exposed seconds the rules leave (`expose`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from costmodel.derive.lanes import maximum, minimum
from costmodel.records import frozen_dataclass

OVERLAP = (
    "seconds and share: the upper bound, no collective overlaps another or compute, every "
    "transfer at the links' peak plus NCCL's latency per call (latency_seconds); exposed_seconds and "
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
    "Megatron-LM refuses tp_comm_overlap without sequence parallelism: then exposed; and "
    "exposed where a TP group spans nodes (userbuffers overlap TP inside one NVLink domain)",
    "EP all-to-all, ep_overlap dualpipe: behind the other micro batch's forward and backward "
    "(DeepSeek-V3's DualPipe, arXiv:2412.19437 section 3.2.1; Megatron-LM's "
    "overlap_moe_expert_parallel_comm); partial: at most ep_overlap_fraction of each behind "
    "the adjacent micro batch's forward and backward, the rest exposed (a share the schedule "
    "does not hide: warm-up, cool-down, the dependent chain); none: exposed, or with "
    "moe_shared_expert_overlap behind the shared expert's forward and backward (Megatron-LM "
    "runs it on its own stream beside the dispatch and the combine)",
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
    #: Within forward and backward, the shared expert's GEMMs (forward and backward): what the
    #: EP all-to-all hides behind with moe_shared_expert_overlap (0: none, or not counted).
    shared_expert: float = 0.0


#: What a collective may hide behind: (label, compute windows, the part of the compute it may
#: hide behind at most: None, "attention" (the attention core) or "shared_expert" (Compute's
#: fields), the share of its seconds that may hide: 1, or ep_overlap_fraction's, `ep_hide`).
HIDE = {
    "reduce": (
        "the last micro batch's backward (overlap_grad_reduce)",
        ("last backward",),
        None,
        1.0,
    ),
    "reduce each": (
        "each micro batch's backward (overlap_grad_reduce)",
        ("last backward", "other backwards"),
        None,
        1.0,
    ),
    "gather": (
        "the first micro batch's forward (overlap_param_gather)",
        ("first forward",),
        None,
        1.0,
    ),
    "gather each": (
        "each micro batch's forward and backward (overlap_param_gather)",
        WINDOWS,
        None,
        1.0,
    ),
    "cp": (
        "the attention blocks' compute (the K/V ring, cp_comm_type p2p)",
        WINDOWS,
        "attention",
        1.0,
    ),
    "tp": ("the layers' GEMMs (tp_comm_overlap)", WINDOWS, None, 1.0),
    "dualpipe": (
        "the other micro batch's forward and backward (DualPipe, ep_overlap dualpipe)",
        WINDOWS,
        None,
        1.0,
    ),
    "shared expert": (
        "the shared expert's forward and backward (moe_shared_expert_overlap)",
        WINDOWS,
        "shared_expert",
        1.0,
    ),
}


def ep_hide(ep_overlap: str, fraction: float, shared_overlap: bool) -> tuple | None:
    """What an EP all-to-all row may hide behind (a HIDE entry; None: exposed): the other micro
    batch's compute under dualpipe; under partial at most `fraction` of its seconds behind the
    adjacent micro batch's forward and backward (Megatron-LM's combined 1F1B,
    --overlap-moe-expert-parallel-comm); under none the shared expert's compute with
    `shared_overlap` (Megatron-LM's --moe-shared-expert-overlap)."""
    if ep_overlap == "dualpipe":
        return HIDE["dualpipe"]
    if ep_overlap == "partial":
        label = (
            f"the adjacent micro batch's forward and backward, at most {fraction:.3g} of it "
            "(ep_overlap partial, ep_overlap_fraction)"
        )
        return (label, WINDOWS, None, float(fraction))
    return HIDE["shared expert"] if shared_overlap else None


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
    first, the capped ones first among equals: the CP ring at most the attention core's
    compute, the EP all-to-all under moe_shared_expert_overlap at most the shared expert's),
    so collectives behind the same compute share it; a row with a share under 1 (ep_overlap
    partial) hides at most that share of its seconds."""
    n = micro_batches
    forward, backward = (compute.forward, compute.backward) if compute else (0.0, 0.0)
    caps = {
        "attention": compute.attention if compute else 0.0,
        "shared_expert": compute.shared_expert if compute else 0.0,
    }
    left = window_seconds(forward, backward, n)
    exposed = list(seconds)
    order = sorted(
        (i for i, hide in enumerate(hides) if hide),
        key=lambda i: (len(hides[i][1]), not hides[i][2]),
    )
    for i in order:
        _, windows, cap, share = hides[i]
        limit = caps[cap] if cap else math.inf
        most = seconds[i] * share  # exact for a share of 1
        hidden = 0.0
        for window in windows:
            take = maximum(0.0, minimum(minimum(most - hidden, left[window]), limit - hidden))
            left[window] -= take
            hidden += take
        if cap:
            caps[cap] -= hidden
        exposed[i] = maximum(0.0, seconds[i] - hidden)
    return exposed
