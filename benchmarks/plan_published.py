"""Where each published run's layout ranks among the layouts `costmodel plan` finds for its
model, cluster size and global batch (benchmarks/published_runs.csv, each row made a scenario
as benchmarks/published_runs.py does: `published.overrides`, its `framework` the row's), under
what the row's framework offered at the row's date (`published.plan_constraints`: the one table,
costmodel/inputs/frameworks.py, as of that month).

Per row: the rank of the published layout among the fitting layouts (each with its fastest
settings that fit; 1 + those predicted faster, so a published layout whose held settings the
search would change can rank below all of them: "14 / 13 (all faster)"), whether it is in the top 10%, how much faster the top one is predicted, and
the step-time model's error on the published layout itself (predicted / published - 1). A row
outside the top 10% gets a one-line examination: model error (the model misses the published
step by more than MODEL_ERROR, so its ranking of this run is not to be trusted), or what the
top layout changes that the search takes for free (a constraint it ignores), named by the keys
that differ.

    python benchmarks/plan_published.py             # the markdown table and the summary
    python benchmarks/plan_published.py --limit 20  # the first 20 rows only
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.plan import plan
from costmodel.inputs import scenario

#: A published step the model misses by more than this share: the examination says model error.
MODEL_ERROR = 0.25
#: Keys compared between the published layout and the top one (the examination names them).
COMPARED = (
    "tensor_parallel",
    "pipeline_parallel",
    "pipeline_schedule",
    "virtual_pipeline",
    "context_parallel",
    "expert_parallel",
    "micro_batch",
    "sequence_parallel",
    "recompute",
    "zero_stage",
)


def _published():
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import published

    return published


def _layout(keys: dict[str, Any]) -> str:
    pp = f"PP{keys['pipeline_parallel']}"
    if keys.get("virtual_pipeline"):
        pp += f"v{keys['virtual_pipeline']}"
    return (
        f"TP{keys['tensor_parallel']} {pp} CP{keys['context_parallel']} "
        f"EP{keys['expert_parallel']} DP{keys['data_parallel']} mb{keys['micro_batch']} "
        f"Z{keys['zero_stage']} {keys['recompute']}"
    )


def _differences(own: dict[str, Any], top: dict[str, Any]) -> str:
    return ", ".join(
        f"{key} {own[key]}->{top[key]}" for key in COMPARED if own.get(key) != top.get(key)
    )


def _explained(row_id: str) -> dict[str, Any] | None:
    """The scenario keys of the named convention under which a run the memory model puts over
    its card fits (benchmarks/published_runs.py, EXPLAINED), or None."""
    _published()
    import published_runs

    return published_runs.EXPLAINED.get(row_id, (None, None))[0]


def examine(row: dict[str, Any]) -> dict[str, Any]:
    """One published run's rank and its examination (module docstring). A run whose stated
    layout the memory model puts over its card is searched again under the convention that
    explains its memory (`_explained`), and ranked there, said in its examination."""
    pub = _published()
    out: dict[str, Any] = {"id": row["id"], "gpus": row["num_gpus"], "error": None, "under": ""}
    start = time.perf_counter()
    try:
        sc = scenario.resolve(overrides=pub.overrides(row))
        limits = pub.plan_constraints(row)
        found = plan.search(sc, constraints=limits)
        changes = _explained(row["id"])
        if found.own_note and changes:
            again = scenario.resolve(overrides={**pub.overrides(row), **changes})
            retried = plan.search(again, constraints=limits)
            if not retried.own_note:
                sc, found = again, retried
                out["under"] = ", ".join(f"{key} {value}" for key, value in changes.items())
    except CostModelError as error:
        out["error"] = str(error)
        out["seconds_searching"] = time.perf_counter() - start
        return out
    out["seconds_searching"] = time.perf_counter() - start
    published, _ = pub.step_time(row)
    top = found.rows[0]
    out.update(
        fitting=found.fitting,
        rank=found.own_rank,
        note=found.own_note,
        top=_layout(plan.layout_keys(found, top)),
        top_seconds=top.seconds,
        published_seconds=published,
    )
    own = found.own
    if found.own_note:  # evaluated, but over the memory: the run ran, so the memory model errs
        out["top10"] = False
        out["examination"] = (
            f"not ranked: {found.own_note}: model error (memory): the memory model puts the "
            f"published layout at {own.peak_bytes / 1e9:.1f} GB, over the "
            f"{own.capacity / 1e9:.1f} GB usable, yet the run ran"
        )
        return out
    own_keys = plan.layout_keys(found, own)
    out["own"] = _layout(own_keys)
    out["own_seconds"] = own.seconds
    out["model_error"] = own.seconds / published - 1 if published else None
    out["faster"] = own.seconds / top.seconds - 1
    rank = found.own_rank
    out["top10"] = rank is not None and rank <= math.ceil(0.1 * found.fitting)
    if not out["top10"]:
        out["examination"] = _examination(out, own_keys, plan.layout_keys(found, top))
        if not out["examination"].startswith("model error"):
            out["examination"] = _constrained(sc, limits, own_keys) + out["examination"]
    if out["under"]:
        out["examination"] = (
            f"ranked under the convention that explains its memory ({out['under']}: "
            f"published_runs.py, EXPLAINED). " + out.get("examination", "")
        ).strip()
    return out


def _rank_under(sc, constraints: dict[str, tuple]) -> tuple[int | None, int]:
    """The own layout's rank and the layouts that fit under `constraints`; (None, 0) where the
    search refuses them (the scenario's framework offers none of a key's values)."""
    try:
        found = plan.search(sc, constraints=constraints)
    except CostModelError:
        return None, 0
    return found.own_rank, found.fitting


def _constrained(sc, limits: dict[str, tuple], own: dict[str, Any]) -> str:
    """The published layout's rank again under named constraints the search ignores, each on
    top of the framework's of the row's date (`limits`, published.plan_constraints): the run's
    own recompute policy held, then its CP held as well (what the models miss about CP), then
    its TP and PP. Says which one brings it into the top 10%, or that none does."""
    steps = [
        (
            f"the run's recompute ({own['recompute']}) held (the search drops it where the "
            "memory model fits without; no allocator reserve beyond memory_reserve is modelled)",
            {**limits, "recompute": (own["recompute"],)},
        )
    ]
    steps.append(
        (
            f"CP held at the run's ({own['context_parallel']}): a limit of the models, not of the "
            "run (CP pays its ring's bytes and NCCL's latency per step, not the causal load "
            "balance nor the kernel below the shortest length its published curve measures)",
            {**steps[-1][1], "context_parallel": (own["context_parallel"],)},
        )
    )
    steps.append(
        (
            f"TP and PP held at the run's ({own['tensor_parallel']} x "
            f"{own['pipeline_parallel']}): the split the source chose (a study of one split, "
            "or the rule of TP within a node), which the search does not take as given",
            {
                **steps[-1][1],
                "tensor_parallel": (own["tensor_parallel"],),
                "pipeline_parallel": (own["pipeline_parallel"],),
            },
        )
    )
    parts = []
    for name, constraints in steps:
        rank, fitting = _rank_under(sc, constraints)
        inside = rank is not None and rank <= math.ceil(0.1 * fitting)
        parts.append(f"{name}: ranks {rank} / {fitting}{' (top 10%)' if inside else ''}")
        if inside:
            return "EXPLAINED by " + "; then ".join(parts) + ". "
    return "NOT EXPLAINED by a named constraint (" + "; then ".join(parts) + "). "


def _examination(out: dict[str, Any], own: dict[str, Any], top: dict[str, Any]) -> str:
    if out["note"]:
        return out["note"]
    error = out["model_error"]
    if error is not None and abs(error) > MODEL_ERROR:
        return (
            f"model error: the model predicts {out['own_seconds']:.3g} s for the published "
            f"layout, published {out['published_seconds']:.3g} s ({error:+.0%})"
        )
    why = []
    if own["recompute"] != "none" and top["recompute"] == "none":
        why.append("the run recomputes though the memory model fits the top layout without")
    if top["zero_stage"] == 3 and own["zero_stage"] != 3:
        why.append("the model hides ZeRO-3's weight gathers behind compute")
    if top["context_parallel"] > own["context_parallel"]:
        why.append("the model hides the CP ring behind the attention core")
    if top["tensor_parallel"] < own["tensor_parallel"]:
        why.append("less TP: the model has the DP or CP traffic overlapped instead")
    head = f"model within {MODEL_ERROR:.0%} ({error:+.0%})" if error is not None else "no step"
    tail = f": {'; '.join(why)}" if why else ""
    return f"{head}; the top layout changes {_differences(own, top)}{tail}"


def _cell(x: float | None, fmt: str) -> str:
    return "" if x is None else format(x, fmt)


def table(found: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| run | GPUs | published layout | rank / fitting | top 10% | top layout | top faster by "
        "| model error (own) | examination |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in found:
        if x["error"]:
            lines.append(f"| {x['id']} | {x['gpus']} | | | | | | | not searched: {x['error']} |")
            continue
        rank = f"{x['rank']} / {x['fitting']}" if x.get("rank") else f"- / {x['fitting']}"
        if x.get("rank") and x["rank"] > x["fitting"]:  # its held settings: every one faster
            rank += " (all faster)"
        lines.append(
            f"| {x['id']} | {x['gpus']} | {x.get('own', '')} | {rank} | "
            f"{'yes' if x.get('top10') else 'no'} | {x['top']} | "
            f"{_cell(x.get('faster'), '.0%')} | {_cell(x.get('model_error'), '+.0%')} | "
            f"{x.get('examination', '')} |"
        )
    return lines


def summary(found: list[dict[str, Any]]) -> list[str]:
    searched = [x for x in found if not x["error"]]
    ranked = [x for x in searched if x.get("rank")]
    top10 = [x for x in ranked if x["top10"]]
    model = [x for x in ranked if not x["top10"] and x["examination"].startswith("model error")]
    others = [x for x in ranked if not x["top10"] and x not in model]
    named = [x for x in others if x["examination"].startswith("EXPLAINED")]
    cp_held = [x for x in named if _last(x).startswith("CP held")]
    split_held = [x for x in named if _last(x).startswith("TP and PP held")]
    unranked = [x for x in searched if not x.get("rank")]
    under = [x for x in ranked if x["under"]]
    return [
        f"{len(found)} published runs: {len(searched)} searched ({len(found) - len(searched)} "
        f"not: the layout or model cannot be made a scenario), {len(ranked)} with their own "
        f"layout ranked ({len(under)} of them under the convention that explains their memory: "
        f"the stated layout is over its card in the memory model); {len(top10)} of "
        f"{len(ranked)} in the top 10% of the layouts that fit; "
        f"of the {len(ranked) - len(top10)} others, {len(model)} are model error (the published "
        f"step missed by more than {MODEL_ERROR:.0%}); of the other {len(others)}, {len(named)} "
        f"rank in the top 10% under a named constraint the search ignores "
        f"({len(named) - len(cp_held) - len(split_held)} with the run's recompute held, "
        f"{len(cp_held)} only with its CP held as well: a "
        f"limit of the models, {len(split_held)} only with its TP and PP held as well), "
        f"{len(others) - len(named)} do not",
        f"{len(unranked)} searched runs are not ranked: "
        + "; ".join(
            f"{n} {why}"
            for why, n in sorted(_counts(x["note"].split(": ")[0] for x in unranked).items())
        ),
        f"the top layout's predicted gain over the published one (step of the published layout / "
        f"step of the top one), median over the {len(ranked)} ranked runs: "
        f"{_median_gain(ranked):.3f}x",
        f"search time: total {sum(x['seconds_searching'] for x in found):.0f} s, the longest "
        f"{max(x['seconds_searching'] for x in found):.1f} s",
    ]


def _median_gain(ranked: list[dict[str, Any]]) -> float:
    """The median of 1 + `faster` (how much faster the top layout is predicted than the
    published one) over the ranked runs; NaN where none is ranked."""
    gains = [1 + x["faster"] for x in ranked if x.get("faster") is not None]
    return statistics.median(gains) if gains else math.nan


def _last(x: dict[str, Any]) -> str:
    """The constraint step that explained a run (the last one tried)."""
    return x["examination"].split(". ")[0].split("; then ")[-1].removeprefix("EXPLAINED by ")


def _counts(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def main(argv: list[str]) -> int:
    rows = _published().rows()
    if "--limit" in argv:
        rows = rows[: int(argv[argv.index("--limit") + 1])]
    found = []
    head = table([])
    print("\n".join(head), flush=True)
    for row in rows:  # each line as it is found (the largest runs take a while)
        found.append(examine(row))
        print(table(found[-1:])[len(head)], flush=True)
    print("\n".join([""] + summary(found)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
