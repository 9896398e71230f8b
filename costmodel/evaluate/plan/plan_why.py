"""Why a layout of a plan is faster (or slower) than the scenario's own, and which parts of the
step-time model the ranking rests on, from the two predictions' parts (issue 35, item 4).

`versus(plan, top)`: for each of the top `top` rows, the differences of its predicted parts from
the own layout's (row minus own, seconds), every part that differs, the largest first, the
exposed communication split by collective (each collective's exposed seconds, row minus own,
summed over the collectives of a name) and by the parallelism it belongs to; None for a row
where there is nothing to compare: the own layout the fastest (it fits and no layout is
faster, so none says why), or the row the own layout itself (the plan evaluates the own layout
always: evaluate.plan.plan_own).
The parts are the search's (`Row.parts`: they sum to the row's step, so the differences sum to
the difference of the steps); the collectives come from the report's model of the two layouts
(step_time.predicted_comm on plan.as_scenario: the top K and the own layout, K + 1 evaluations; its exposed
seconds are the search's, tests/evaluate/test_plan_why.py).

`visible(seconds, reference)`: a difference worth a word: at least VISIBLE of the reference
step (the own layout's). A smaller one is left out of the lines, not of `versus`.

`rests_on(plan, top)`: the one or two parts whose differences decide the ranking: each part's
|difference| from the own layout summed over the other listed layouts; the largest, and the
second where it is at least half the largest; each with its share of the summed |differences|
and PART_INPUTS' account of what it rests on. None where no listed layout differs from it.
"""

from __future__ import annotations

from typing import Any

from costmodel.evaluate.simulate import step_time

#: A difference is named when it is at least this share of the own layout's step.
VISIBLE = 0.01
#: The second part is named beside the first when its summed |difference| is at least this share
#: of the first's.
SECOND = 0.5


def visible(seconds: float, reference: float) -> bool:
    """Whether a difference of `seconds` is worth a word beside a step of `reference` seconds."""
    return abs(seconds) >= VISIBLE * reference


def _collectives(plan, row) -> dict[str, tuple[str, float]]:
    """The row's exposed seconds by collective name, with the collective's parallelism."""
    from costmodel.evaluate.plan.plan import as_scenario  # plan imports nothing of this module

    own = row.key == plan.own.key
    sc = plan.extra["own_scenario"] if own else as_scenario(plan, row)  # its split kept
    out: dict[str, tuple[str, float]] = {}
    # the prediction's collectives, each with its `parallelism` (predict's detail leaves it out)
    for c in step_time.predicted_comm(sc, sc.shape)["collectives"]:
        _, seconds = out.get(c["name"], (c["parallelism"], 0.0))
        out[c["name"]] = (c["parallelism"], seconds + c["exposed_seconds"])
    return out


def _largest_first(items: list[dict], key: str) -> list[dict]:
    return sorted(items, key=lambda item: (-abs(item["seconds"]), item[key]))


def _split(row_comm: dict, own_comm: dict) -> tuple[list[dict], list[dict]]:
    """(by collective, by parallelism): row minus own, nonzero, the largest |difference| first."""
    names, groups = [], {}
    for name in sorted(set(row_comm) | set(own_comm)):  # one order: the same sums each run
        parallelism = (row_comm.get(name) or own_comm[name])[0]
        diff = row_comm.get(name, ("", 0.0))[1] - own_comm.get(name, ("", 0.0))[1]
        if diff:
            names.append({"name": name, "parallelism": parallelism, "seconds": diff})
            groups[parallelism] = groups.get(parallelism, 0.0) + diff
    by_group = [{"parallelism": p, "seconds": s} for p, s in groups.items() if s]
    return _largest_first(names, "name"), _largest_first(by_group, "parallelism")


def _own_is_top(plan) -> bool:
    """Whether the own layout fits and no row is faster (one that does not fit is compared: the
    rows say what fitting costs)."""
    own = plan.own
    fits = own.peak_bytes <= own.capacity
    return (
        fits
        and bool(plan.rows)
        and (plan.rows[0].key == own.key or own.seconds <= plan.rows[0].seconds)
    )


def why_not(plan) -> str | None:
    """Why no row says what it gains over the own layout (None where the rows do)."""
    return "the scenario's own layout is the fastest" if _own_is_top(plan) else None


def versus(plan, top: int) -> list[list[dict[str, Any]] | None]:
    """Each top row's differences from the own layout (module docstring)."""
    rows = plan.rows[:top]
    if why_not(plan):
        return [None] * len(rows)
    own_comm = _collectives(plan, plan.own)
    out: list[list[dict[str, Any]] | None] = []
    for row in rows:
        if row.key == plan.own.key:
            out.append(None)
            continue
        diffs = []
        for part in step_time.PARTS:
            seconds = row.parts[part] - plan.own.parts[part]
            if not seconds:
                continue
            item: dict[str, Any] = {"part": part, "seconds": seconds}
            if part == "communication_exposed":
                item["collectives"], item["parallelisms"] = _split(
                    _collectives(plan, row), own_comm
                )
            diffs.append(item)
        out.append(sorted(diffs, key=lambda d: -abs(d["seconds"])))
    return out


def rests_on(plan, top: int) -> dict[str, Any] | None:
    """The parts the ranking rests on most (module docstring): {"of": the layouts compared,
    "parts": [{"part", "seconds" (summed |difference|), "share", "inputs"}]}."""
    own = plan.own
    others = [row for row in plan.rows[:top] if row.key != own.key]
    summed = {
        part: sum(abs(row.parts[part] - own.parts[part]) for row in others)
        for part in step_time.PARTS
    }
    total = sum(summed.values())
    if not total:
        return None
    ranked = sorted(summed, key=lambda part: -summed[part])
    chosen = ranked[:1] + [p for p in ranked[1:2] if summed[p] >= SECOND * summed[ranked[0]]]
    return {
        "of": len(others),
        "parts": [
            {
                "part": part,
                "seconds": summed[part],
                "share": summed[part] / total,
                "inputs": step_time.PART_INPUTS[part],
            }
            for part in chosen
        ],
    }
