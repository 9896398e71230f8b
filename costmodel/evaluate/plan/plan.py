"""`costmodel plan`: the layouts of a scenario's model, global batch and sequence length on a
cluster, ranked by the step-time model's predicted step. The search (evaluate.plan.plan_space enumerates, evaluate.plan.plan_eval evaluates):
1. every core that divides: TP x PP x CP x DP GPUs, EP inside DP, a micro batch, sequence
   parallel, the scenario's precision (or, with `fp8`, BF16 and FP8 where the GPU has an FP8
   peak); each with its settings: the pipeline schedule and its virtual stages, a recompute
   policy (none, the growing selective module sets, full, the scenario's own) and a ZeRO stage;
   only what the scenario's framework offers (inputs.frameworks; the output names the rest);
2. the screen: a core fits when its most memory-saving settings fit (the top ZeRO stage, full or
   the largest module set, the schedule that holds the fewest micro batches); the least peak
   over all cores is what a model that fits nowhere is told it needs;
3. the cores that fit in the order of a lower bound on their step (plan_eval's lower_bound),
   each at its fastest settings that fit (`_best`: the step-time model's parts, as
   step_time.predict adds them), until the bound passes both the scenario's own predicted step
   and the K-th best found. Every core faster than either is timed, so the top K and the own
   layout's rank (1 + the cores predicted faster) are exact; a core past the K-th best is
   timed only until one of its settings beats the own layout (it is counted, not ranked).
   A core that evaluate.plan.plan_comm's floor on the exposed communication puts past both is
   counted as timed (where `_best` would time it) without the communication model. Ties (the
   same predicted step) keep the order of the lesser peak memory.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.account import account
from costmodel.evaluate.plan import plan_comm
from costmodel.evaluate.plan.plan_base import (  # noqa: F401 (plan.rebase, plan.MAX_TOP)
    MAX_TOP,
    check_top,
    framework_constraints,
    memory_bounded,
    own_scenario,
    paused_gc,
    rebase,
    scenario_inputs,
)
from costmodel.evaluate.plan.plan_batch import Batch
from costmodel.evaluate.plan.plan_eval import ZERO_STAGES, Evaluator, least_bubble
from costmodel.evaluate.plan.plan_own import Row, own_row, row_of
from costmodel.evaluate.plan.plan_space import (
    Core,
    Recompute,
    bubble_share,
    cores,
    recompute_options,
    schedule_options,
    selective_chain,
)
from costmodel.evaluate.simulate import step_time
from costmodel.evaluate.simulate.linear import linear_attention
from costmodel.inputs import frameworks, scenario
from costmodel.inputs.resolution import params_contradiction
from costmodel.inputs.scenario import Scenario

#: The keys `search` may be constrained on, and the Core attribute of each (None: a setting).
CONSTRAINED = {
    "tensor_parallel": "tp",
    "pipeline_parallel": "pp",
    "context_parallel": "cp",
    "sequence_parallel": "sp",
    "expert_parallel": "ep",
    "fp8": "fp8",
    "zero_stage": None,
    "recompute": None,
}
#: Layouts shown by default.
TOP = 10
#: Memory headroom under this share of the usable bytes is named as a limit.
TIGHT_MEMORY = 0.05
#: What the compute part is made of: step_time.PARTS but the exposed communication and bubble.
COMPUTE_PARTS = step_time.COMPUTE_PARTS


@dataclass
class Plan:
    """The result of a search (module docstring)."""

    base: Scenario
    rows: list[Row]  # every layout whose step was predicted, fastest first
    own: Row  # the scenario's own layout, always evaluated (plan_own.own_row)
    own_rank: int | None  # 1 + the fitting layouts predicted faster
    own_note: str  # why the own layout is not ranked, where it is not
    own_outside: str  # why the search does not generate the own layout ("" where it does)
    searched: int  # layouts enumerated
    fitting: int  # of them, those that fit
    timed: int  # of those, the ones timed: the rows and those passed over (_passed_over)
    least_peak: float  # the least peak memory over every layout searched
    model_flops_per_step: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        return self.base.num_gpus

    def tokens_per_s(self, row: Row) -> float:
        return self.base.tokens_per_step / row.seconds

    def mfu(self, row: Row) -> float:
        return self.model_flops_per_step / (row.seconds * self.gpus * self.base.peak_flops)


def _screen(ev: Evaluator, all_cores: list[Core], saving: list[Recompute]):
    """The cores that fit under their most memory-saving settings (the recompute options of
    `saving` at the top ZeRO stage searched, the schedule that holds the fewest micro batches:
    Evaluator's least_peak, of every core at once), and the least peak over them all."""
    peaks = ev.batch.least_peaks(saving).tolist()
    fitting = [core for core, peak in zip(all_cores, peaks) if peak <= ev.usable]
    return fitting, min(peaks)


def _policies(ev: Evaluator, core: Core, options, limit: float, chain, bubble: float):
    """(a floor on the step, recompute) of each recompute policy whose compute with the least
    bubble could beat `limit` (ZeRO 0's compute is no shorter than ZeRO 1's); past one that
    cannot, the larger module sets of `chain` are passed over (each recomputes what the one
    before does, and more)."""
    found, chain_over = [], False
    for rc in options:
        chained = rc.policy == "selective" and rc in chain
        if chained and chain_over:
            continue
        floor = ev.floor(core, rc, bubble) + ev.unhidden(core, rc)
        if floor >= limit:
            chain_over = chain_over or chained
            continue
        found.append((floor, rc))
    return found


def _fitting(ev: Evaluator, core: Core, rc: Recompute, schedules, shares) -> list[tuple]:
    """(floor, peak, recompute, ZeRO stage, schedule) of the settings of a policy that fit:
    per ZeRO stage, the schedule of the least bubble that fits (it changes only the bubble)."""
    peaks, choice = ev.settings(core, rc, schedules, shares)
    out = []
    for z, s in enumerate(choice):
        if s >= 0:
            floor = ev.floor(core, rc, shares[s], ZERO_STAGES[z])
            out.append((floor, peaks[z][s], rc, ZERO_STAGES[z], schedules[s]))
    return out


def _best(
    ev: Evaluator,
    core: Core,
    options: list[Recompute],
    limit: float = math.inf,
    enough: float = 0.0,
    chain: tuple[Recompute, ...] = (),
) -> Row | None:
    """The core's fastest settings that fit (recompute, ZeRO stage, schedule), or None where
    none can be faster than `limit`. Best first: policies and then settings in the order of
    their floor (the step without communication, plus what no compute hides outside DP once
    known; a policy's memory is evaluated only when its floor comes up), each timed until the
    floor passes the best found. `enough`: the first settings faster than it end the search
    (the core only needs counting: faster than the own layout, not among the top)."""
    schedules = schedule_options(ev.base, core.pp)
    shares = [bubble_share(s, core.pp, core.micro_batches) for s in schedules]
    bubble = min(shares)
    # no recompute first; the other policies (each no faster in compute) join the queue only
    # when their common floor, no recompute's with what nothing hides, comes up
    none = Recompute("none")
    # (no recompute when the options hold it: a search may be constrained to others)
    floor = ev.floor(core, none, bubble)
    heap = [(floor, 0.0, 0, none, None)] if none in options else []
    heap.append((floor, 0.0, 1, None, None))
    count = 2
    best = None
    timed: dict[int, list[tuple[float, float]]] = {z: [] for z in ZERO_STAGES}
    while heap:
        floor, peak, _, rc, setting = heapq.heappop(heap)
        bar = min(limit, best.seconds if best else math.inf)
        if floor >= bar:
            break
        if rc is None:  # the other policies
            if floor + ev.unhidden(core, none) >= bar:
                continue
            others = [x for x in options if x != none]
            for policy_floor, policy in _policies(ev, core, others, limit, chain, bubble):
                count += 1
                heapq.heappush(heap, (policy_floor, 0.0, count, policy, None))
            continue
        if setting is None:  # a policy: its settings that fit join the queue
            for item in _fitting(ev, core, rc, schedules, shares):
                count += 1
                heapq.heappush(heap, (item[0], item[1], count, rc, item[3:]))
            continue
        zero, schedule = setting
        if floor + ev.unhidden(core, rc) >= bar:
            continue  # no communication could make it faster
        # more recompute at the same ZeRO stage, delta seconds, hides at most 2 x delta more
        # communication (its windows, and the attention cap of the CP ring, grow by at most
        # delta each): the step without its bubble is no shorter than rest - delta
        compute = ev.floor(core, rc, 0.0, zero)
        if any(c <= compute and rest - (compute - c) + floor - compute >= bar
               for c, rest in timed[zero]):  # fmt: skip
            continue
        row = row_of(ev, core, rc, zero, schedule, peak)
        timed[zero].append((compute, row.seconds - row.parts["pipeline_bubble"]))
        if best is None or (row.seconds, row.peak_bytes) < (best.seconds, best.peak_bytes):
            best = row
        if best.seconds < enough:
            return best
    return best


def _bound(ev: Evaluator, core: Core) -> float:
    """A step no layout of the core can beat: its compute bound and its least bubble."""
    schedules = tuple(schedule_options(ev.base, core.pp))
    return ev.lower_bound(core) * (1 + least_bubble(core.pp, core.micro_batches, schedules))


def _saving(options: list[Recompute]) -> list[Recompute]:
    """The recompute options that save the most memory: full, and the largest selective set."""
    selective = [rc for rc in options if rc.policy == "selective"]
    largest = max(selective, key=lambda rc: len(rc.modules or ()), default=None)
    saving = [rc for rc in options if rc.policy == "full"] + ([largest] if largest else [])
    return saving or options


def _space(base: Scenario, fp8: bool, constraints: dict[str, tuple]):
    """The evaluator, the recompute options and the cores of a search, as `constraints` allow
    (search)."""
    if set(constraints) - set(CONSTRAINED):
        raise ValueError(f"constraints: {sorted(set(constraints) - set(CONSTRAINED))}")
    constraints = framework_constraints(base.framework, constraints)
    ev = Evaluator(base, tuple(constraints.get("zero_stage", ZERO_STAGES)))
    options = recompute_options(base)
    if "recompute" in constraints:
        options = [rc for rc in options if rc.policy in constraints["recompute"]]
    allowed = [
        core
        for core in cores(base, base.num_gpus, fp8)
        if all(
            getattr(core, attr) in constraints.get(key, (getattr(core, attr),))
            for key, attr in CONSTRAINED.items()
            if attr
        )
    ]
    return ev, options, allowed


@memory_bounded
@paused_gc
def search(
    sc: Scenario,
    gpus: int | None = None,
    gpu: str | None = None,
    top: int = TOP,
    fp8: bool = False,
    count_own: bool = True,
    constraints: dict[str, tuple] | None = None,
) -> Plan:
    """Search the layouts (module docstring); CostModelError (one line) when none fits.
    `count_own` False: the own layout is evaluated but not ranked (own_rank None): only the top
    K are searched for, much faster where the own layout ranks far down (the notebooks).
    `constraints`: the values allowed of some keys (CONSTRAINED), what a run fixed, with the
    framework's (plan_base.framework_constraints); the others searched. `top`: at most MAX_TOP."""
    check_top(top)
    contradiction = params_contradiction(sc.values, "a plan's search", "")
    if contradiction:  # every layout's step is predicted from the shape's GEMMs
        raise CostModelError(contradiction)
    base = rebase(sc, gpus, gpu)
    ev, options, all_cores = _space(base, fp8, dict(constraints or {}))
    if not all_cores:
        raise CostModelError(
            f"num_gpus: {base.num_gpus} is not allowed; expected a GPU count that a layout of "
            f"this model and batch divides (TP x PP x CP x DP with at least one micro batch of "
            f"{base.samples_per_step:,} samples on each pipeline)"
        )
    ev.batch = Batch(ev, all_cores)
    fitting, least = _screen(ev, all_cores, _saving(options))
    if not fitting:
        raise CostModelError(
            f"num_gpus: {base.num_gpus} is not allowed; expected GPUs with more memory or more "
            f"of them: no layout of {base.num_gpus} x {base.gpu} fits; the least peak over "
            f"the layouts searched is {least / 1e9:.1f} GB per GPU "
            f"({ev.usable / 1e9:.1f} GB usable)"
        )
    own_sc = own_scenario(sc, base)
    own, note, own_outside = own_row(ev, own_sc)
    ranked = not note and count_own
    own_seconds = own.seconds if ranked else 0.0
    every_bound = dict(zip(all_cores, ev.batch.bounds()))  # _bound of each core
    bounds = {core: every_bound[core] for core in fitting}
    fitting = sorted(fitting, key=bounds.get)
    rows, passed = _ranked(ev, fitting, bounds, options, top, own_seconds)
    rank = None
    if ranked:
        rank = 1 + sum(1 for r in rows if r.seconds < own.seconds * (1 - 1e-12))
    figures = account.evaluate(base, (linear_attention(base) or {}).get("flops_per_step") or 0.0)
    found = Plan(
        base=base,
        rows=rows,
        own=own,
        own_rank=rank,
        own_note=note,
        own_outside=own_outside,
        searched=len(all_cores),
        fitting=len(fitting),
        timed=len(rows) + passed,
        least_peak=least,
        model_flops_per_step=figures["model_flops_per_step"],
        extra={
            "evaluator": ev,
            "cores": fitting,
            "bounds": bounds,
            "top": top,
            "options": options,
            "own_scenario": own_sc,
        },
    )
    found.extra["not_offered"] = frameworks.not_offered(base.framework, base.pipeline_schedule)
    return found


def _ranked(ev: Evaluator, fitting, bounds, options, top: int, own_seconds: float):
    """The fitting cores (in the order of their bound) timed until the bound passes both the
    `top`-th best step and the own layout's (search), fastest first; and how many cores were
    passed over by `_passed_over` (each would have been timed, slower than both)."""
    base = ev.base
    best: list[float] = []  # the `top` fastest steps, negated (a max-heap)
    rows: list[Row] = []
    passed = 0
    none = Recompute("none")
    chain = tuple(selective_chain(base))
    for core in fitting:
        kth = -best[0] if len(best) >= top else math.inf
        limit = max(kth, own_seconds)
        if bounds[core] > limit:
            break
        # a tighter bound: the core's compute without recompute, with its least bubble
        schedules = tuple(schedule_options(base, core.pp))
        bubble = least_bubble(core.pp, core.micro_batches, schedules)
        bound = ev.floor(core, none, bubble)
        if bound > limit:
            continue
        # beyond the K-th best, a core is only counted: is it faster than the own layout?
        if kth < math.inf and _passed_over(ev, core, options, schedules, bubble, limit):
            passed += 1
            continue
        counted = bound > kth
        enough = own_seconds if counted else 0.0
        row = _best(ev, core, options, limit * (1 + 1e-12), enough, chain)
        if row is None:
            continue
        rows.append(row)
        heapq.heappush(best, -row.seconds)
        if len(best) > top:
            heapq.heappop(best)
    rows.sort(key=lambda r: (r.seconds, r.peak_bytes))
    return rows, passed


def _passed_over(ev: Evaluator, core: Core, options, schedules, bubble: float, limit: float):
    """Whether every layout of the core is slower than `limit` (its floor without recompute
    plus plan_comm's floor on the exposed DP communication, at each ZeRO stage) while `_best`
    would time one of them (no recompute fits at a ZeRO stage from 1 with a schedule of the
    least bubble, and nothing of the core was timed before): such a core is counted as timed,
    neither among the top nor faster than the own layout, without its communication model."""
    none = Recompute("none")
    if none not in options or ev.unhidden(core, none) > 0:
        return False
    shares = [bubble_share(s, core.pp, core.micro_batches) for s in schedules]
    _, choice = ev.settings(core, none, list(schedules), shares)
    if not any(
        s >= 0 and ZERO_STAGES[z] >= 1 and shares[s] == bubble for z, s in enumerate(choice)
    ):
        return False
    # the ZeRO stages at which some policy of `options` fits with some schedule
    peaks = ev.peaks_of(core, [ev.options.index(rc) for rc in options])
    fits = (peaks <= ev.usable).any(axis=(0, 2))
    stages = [z for i, z in enumerate(ZERO_STAGES) if z in ev.zero_stages and fits[i]]
    floors = [(ev.floor(core, none, bubble, z), z) for z in stages]
    # first without the DP rows (plan_comm.others_floor: no more than exposed_floor)
    if (
        min(f + plan_comm.others_floor(ev, core, z, options) for f, z in floors) * (1 - 1e-9)
        >= limit
    ):
        return True
    least = min(f + plan_comm.exposed_floor(ev, core, z, options) for f, z in floors)
    return least * (1 - 1e-9) >= limit


#: The most layouts `every` evaluates.
EVERY = 400


def every(plan: Plan, most: int = EVERY) -> tuple[list[Row], float | None]:
    """Each layout that fits at its fastest settings that fit, without the search's bounds (a
    scatter of them all), fastest first: where more than `most` fit, the `most` of the least
    bound and the search's top layouts; and the least bound of those left out (None when none
    is): no layout left out is faster than it."""
    ev, options = plan.extra["evaluator"], plan.extra["options"]
    chain = tuple(selective_chain(ev.base))
    ordered = plan.extra["cores"]
    top = {row.core for row in plan.rows[: plan.extra["top"]]}
    chosen = ordered[:most] + [core for core in ordered[most:] if core in top]
    rows = [row for core in chosen if (row := _best(ev, core, options, chain=chain))]
    rows.sort(key=lambda r: (r.seconds, r.peak_bytes))
    left = [plan.extra["bounds"][core] for core in ordered[most:] if core not in top]
    return rows, (min(left) if left else None)


def limits(plan: Plan, row: Row) -> dict[str, Any]:
    """What limits a layout, from its predicted parts: the shares of compute, exposed
    communication and the pipeline bubble, the largest named; memory headroom named when under
    TIGHT_MEMORY of the usable bytes."""
    compute = sum(row.parts[name] for name in COMPUTE_PARTS)
    shares = {
        "compute": compute / row.seconds,
        "communication": row.parts["communication_exposed"] / row.seconds,
        "bubble": row.parts["pipeline_bubble"] / row.seconds,
    }
    limit = max(shares, key=shares.get)
    tight = row.headroom < TIGHT_MEMORY * row.capacity
    return {
        "limit": limit + ("+memory" if tight else ""),
        "shares": shares,
        "headroom_bytes": row.headroom,
        "headroom_share": row.headroom / row.capacity,
        "memory_tight": tight,
    }


def layout_keys(plan: Plan, row: Row) -> dict[str, Any]:
    """The scenario keys of a row's layout (what a team sets to run it)."""
    core, rc = row.core, row.recompute
    return {
        "tensor_parallel": core.tp,
        "pipeline_parallel": core.pp,
        "virtual_pipeline": row.schedule.virtual,
        "pipeline_schedule": row.schedule.name,
        "context_parallel": core.cp,
        "expert_parallel": core.ep,
        "data_parallel": core.dp,
        "micro_batch": core.micro_batch,
        "sequence_parallel": core.sp,
        "fp8": core.fp8,
        "fp8_activations": core.fp8_activations,
        "recompute": rc.policy,
        "recompute_modules": list(rc.modules) if rc.modules is not None else None,
        "recompute_num_layers": rc.num_layers,
        "zero_stage": row.zero_stage,
    }


def as_scenario(plan: Plan, row: Row) -> Scenario:
    """A row's layout resolved as a scenario (validated as `costmodel report` validates it):
    CostModelError where the validation refuses it."""
    keys = layout_keys(plan, row)
    keys.pop("data_parallel")
    keys["recompute_method"] = row.recompute.method
    return scenario.resolve(data=scenario_inputs(plan.base, keys))
