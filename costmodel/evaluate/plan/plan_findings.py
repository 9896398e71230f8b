"""The rules of thumb of layout choice as findings of a search, not as its inputs: each one is
computed from the ranked layouts of a `Plan` and says whether it holds for the top layouts, with
the counts behind it, worded for the search it comes from (this model, cluster, batch and
sequence length). Each statement states the rule, then the counts, so that "[does not hold]"
before it reads true (a statement of the counts alone, "none of the top 10 uses PP", read false
under that tag).

- tp_within_node: every top layout keeps TP within a node (TP <= gpus_per_node);
- pp_across_nodes: the top layouts that use PP (how many);
- cp_at_seq_len: whether CP appears in the top layouts at this sequence length;
- ep_within_node: (MoE) every top layout keeps EP within a node (EP is inside DP by
  construction);
- recompute_forced: every top layout that recomputes would not fit without it (the same layout
  with recompute none at its ZeRO stage and schedule exceeds the memory).
"""

from __future__ import annotations

from typing import Any

from costmodel.evaluate.plan.plan_space import Recompute, schedule_options


def _finding(name: str, holds: bool, count: int, of: int, statement: str) -> dict[str, Any]:
    return {"name": name, "holds": holds, "count": count, "of": of, "statement": statement}


def _fits_without_recompute(plan, row) -> bool:
    ev = plan.extra["evaluator"]
    schedules = schedule_options(ev.base, row.core.pp)
    peaks = ev.peaks(row.core, Recompute("none"), schedules)
    return bool(peaks[row.zero_stage, schedules.index(row.schedule)] <= ev.usable)


def findings(plan, top: int) -> list[dict[str, Any]]:
    """The findings over the `top` fastest layouts of the plan (module docstring)."""
    rows = plan.rows[:top]
    n = len(rows)
    base = plan.base
    node = base.gpus_per_node
    seq = base.seq_len
    out = []
    inside = sum(1 for r in rows if r.core.tp <= node)
    out.append(
        _finding(
            "tp_within_node",
            inside == n,
            inside,
            n,
            f"the top {n} layouts keep TP within a node (TP <= {node} GPUs per node): "
            + (f"all {n} do" if inside == n else f"{inside} do, {n - inside} put TP across nodes"),
        )
    )
    piped = sum(1 for r in rows if r.core.pp > 1)
    out.append(
        _finding(
            "pp_across_nodes",
            piped > 0,
            piped,
            n,
            f"the top {n} layouts use PP (PP > 1): {piped} of {n} do",
        )
    )
    split = sum(1 for r in rows if r.core.cp > 1)
    out.append(
        _finding(
            "cp_at_seq_len",
            split > 0,
            split,
            n,
            f"at seq_len {seq:,}, the top {n} layouts use CP: {split} of {n} do",
        )
    )
    if base.num_experts:
        near = sum(1 for r in rows if r.core.ep <= node)
        out.append(
            _finding(
                "ep_within_node",
                near == n,
                near,
                n,
                f"EP is inside DP in every layout; the top {n} keep EP within a node "
                f"(EP <= {node}): {near} of {n} do",
            )
        )
    recomputing = [r for r in rows if r.recompute.policy != "none"]
    forced = sum(1 for r in recomputing if not _fits_without_recompute(plan, r))
    holds = forced == len(recomputing)
    out.append(
        _finding(
            "recompute_forced",
            holds,
            forced,
            len(recomputing),
            (
                f"none of the top {n} layouts recomputes"
                if not recomputing
                else f"{len(recomputing)} of the top {n} layouts recompute; "
                + (
                    "each would not fit without it (memory forces it)"
                    if holds
                    else f"{len(recomputing) - forced} of them would fit without it"
                )
            ),
        )
    )
    return out
