"""A floor on the exposed communication of a core's layouts, for the plan's search
(evaluate.plan.plan): the exposed seconds of the DP collectives alone, of the TP and CP collectives
that may not hide, and of the CP ring past the attention core, from the communication model's
rows (evaluate.communication.communication.floor_rows: no EP or PP rows, no row objects) and the compute
without recompute.

Why it is a floor on every layout of the core at a ZeRO stage, whatever its recompute policy
(evaluate.communication.comm_overlap.expose's rules):
- the exposed time is the sum over the rows of each row's exposed seconds (each >= 0), so the
  DP rows' alone are no more than it;
- _expose takes the rows that may hide in the order of their windows (the fewest first, the CP
  ring's before the others of four), each taking what is left of its windows. Leaving out the
  rows that are not DP (none of the DP rows is capped by the attention core) leaves each DP row
  at least as much of every window (what a row leaves of a window grows with what it finds), so
  the DP rows taken alone, in the same order, hide no less: their exposed time is no more;
- recompute adds its seconds (delta) to the backward and to the step's compute alike. The
  backward windows grow by delta in all, and the DP rows alone hide at most delta more (what
  they hide is the windows' total less what they leave, and what they leave does not shrink
  as the windows grow): the step's compute plus the DP rows' floor is no less than no
  recompute's;
- the TP and CP rows that may not hide are exposed whole, no fewer under full recompute; the
  CP ring (cp_comm_type p2p) hides at most behind the attention core's compute, the most of
  it over the recompute policies searched (the attention phase and its recomputed share).
"""

from __future__ import annotations

import math

from costmodel.evaluate.communication import comm_overlap, communication
from costmodel.evaluate.plan.plan_space import Core, Recompute

NONE = Recompute("none")


def dp_exposed(rows: list[tuple[float, tuple]], n: int, forward: float, backward: float) -> float:
    """The exposed seconds of the DP rows (seconds, windows) alone under _expose's rules, with
    the compute of a step of `n` micro batches (forward and backward seconds)."""
    left = comm_overlap.window_seconds(forward, backward, n)
    exposed = 0.0
    for seconds, windows in sorted(rows, key=lambda row: len(row[1])):
        hidden = 0.0
        for window in windows:
            take = max(0.0, min(seconds - hidden, left[window]))
            left[window] -= take
            hidden += take
        exposed += max(0.0, seconds - hidden)
    return exposed


def exposed_floor(ev, core: Core, zero: int, options: list[Recompute]) -> float:
    """A floor on the exposed communication of the core's layouts at a ZeRO stage with a
    recompute policy of `options` (module docstring), to add to the core's floor without
    recompute (`ev`: plan_eval.Evaluator)."""
    # the DP rows read the sizes and the micro batches alone (plan_comm's cache keys)
    dp_key = ("dp rows", core.tp, core.pp, core.cp, core.ep, core.dp, core.micro_batch)
    dp_key += (core.micro_batches,)
    dp_rows = ev._cache.get(dp_key)
    if dp_rows is None:
        got = communication.floor_rows(ev.zero_stages, False, **ev.comm_args(core, NONE, 1))
        dp_rows = ev._cache[dp_key] = (got["dp"], got["n"])
    phases = ev.compute(core, NONE, zero)["phases"]
    rows, n = dp_rows
    floor = dp_exposed(rows[zero], n, phases["forward"], phases["backward"])
    return _others(ev, core, options, phases, floor)


def others_floor(ev, core: Core, zero: int, options: list[Recompute]) -> float:
    """`exposed_floor` without its DP rows' exposed seconds (each >= 0): no more than it (the
    same additions, from 0 where it adds the DP rows' seconds; floats add monotonically)."""
    return _others(ev, core, options, ev.compute(core, NONE, zero)["phases"], 0.0)


def _others(ev, core: Core, options, phases: dict, floor: float) -> float:
    """`floor` (the DP rows' exposed seconds) with the TP and CP rows that may not hide, and the
    CP ring past the attention core (recompute's share of it included)."""
    other = _tp_cp_rows(ev, core)
    floor = floor + other[0]
    if other[1] > 0:  # the CP ring: behind at most the attention core, recompute's too
        core_forward = ev._sums(core).get("core_forward", 0.0)
        key = ("most core recomputed", core.pp, tuple(options))
        fraction = ev._cached(
            key, lambda: max(ev._fractions(core.pp, rc).recompute_core_fraction for rc in options)
        )
        floor += max(0.0, other[1] - phases["attention"] - fraction * core_forward)
    return floor


def _tp_cp_rows(ev, core: Core) -> tuple[float, float]:
    """(the seconds of the TP and CP rows that may not hide, those of the CP ring) of the core:
    none without TP or CP. They read TP, CP, PP, the micro batch, the micro batches per step
    (derive.communication's forms: t_p, c_p, p_p, b_micro, n_mb and the model's sizes) and
    sequence parallelism, and their groups' placement reads TP and CP alone on a cluster of a
    given size: cached by those (tests/evaluate/test_plan_comm.py checks the key)."""
    if core.tp == 1 and core.cp == 1:
        return 0.0, 0.0
    key = ("tp cp rows", *tp_cp_key(core))
    got = ev._cache.get(key)
    if got is None:
        rows = communication.floor_rows((), True, **ev.comm_args(core, NONE, 1))
        got = ev._cache[key] = (rows["exposed"], rows["capped"])
    return got


def tp_cp_key(core: Core) -> tuple:
    """What the TP and CP rows of a core read of it (`_tp_cp_rows`)."""
    n_mb = max(1, math.ceil(core.micro_batches - 1e-9))
    return core.tp, core.cp, core.pp, core.sp, core.micro_batch, n_mb
