"""A floor on the exposed communication of a core's layouts, for the plan's search
(evaluate.plan): the exposed seconds of the DP collectives alone, of the TP and CP collectives
that may not hide, and of the CP ring past the attention core, from the communication model's
rows (evaluate.communication.floor_rows: no EP or PP rows, no row objects) and the compute
without recompute.

Why it is a floor on every layout of the core at a ZeRO stage, whatever its recompute policy
(evaluate.comm_overlap._expose's rules):
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

from costmodel.evaluate import communication, run
from costmodel.evaluate.plan_space import Core, Recompute


def dp_exposed(rows: list[tuple[float, tuple]], n: int, forward: float, backward: float) -> float:
    """The exposed seconds of the DP rows (seconds, windows) alone under _expose's rules, with
    the compute of a step of `n` micro batches (forward and backward seconds)."""
    left = {
        "first forward": forward / n,
        "other forwards": forward * (n - 1) / n,
        "last backward": backward / n,
        "other backwards": backward * (n - 1) / n,
    }
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
    none = Recompute("none")
    # the DP rows read the sizes and the micro batches alone; TP and CP rows need TP or CP
    dp_key = ("dp rows", core.tp, core.pp, core.cp, core.ep, core.dp, core.micro_batch)
    dp_key += (core.micro_batches,)
    other_key = ("tp cp rows", core)
    dp_rows = ev._cache.get(dp_key)
    other = ev._cache.get(other_key)
    if other is None and core.tp == 1 and core.cp == 1:
        other = ev._cache[other_key] = (0.0, 0.0)
    if dp_rows is None or other is None:
        sc = ev.scenario(core, none, 1)
        args = run.communication_args(sc, ev.shape)
        zeros = ev.zero_stages if dp_rows is None else ()
        got = communication.floor_rows(zeros, other is None, **args)
        if dp_rows is None:
            dp_rows = ev._cache[dp_key] = (got["dp"], got["n"])
        if other is None:
            other = ev._cache[other_key] = (got["exposed"], got["capped"])
    phases = ev.compute(core, none, zero)["phases"]
    rows, n = dp_rows
    floor = dp_exposed(rows[zero], n, phases["forward"], phases["backward"]) + other[0]
    if other[1] > 0:  # the CP ring: behind at most the attention core, recompute's too
        core_forward = ev._sums(core).get("core_forward", 0.0)
        fraction = max(ev._fractions(core.pp, rc).recompute_core_fraction for rc in options)
        floor += max(0.0, other[1] - phases["attention"] - fraction * core_forward)
    return floor
