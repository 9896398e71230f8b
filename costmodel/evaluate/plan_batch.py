"""The plan's pieces for many cores at once: NumPy arrays over the cores of a search, the same
floats as the one-core path of evaluate.plan_eval.Evaluator (which reads them from here for the
cores of its `batch`).

Each piece runs the one-core formula on arrays: gemms.weight_shapes and plain.gemm_seconds (the
GEMM tables), plan_eval.stage_bound (the lower bounds), compute_time._layer, assemble and
_optimizer_bytes (the compute without recompute), compute_time.recompute_seconds (the recompute
parts), plan_memory.stage_params and stage_peak (the peaks). Elementwise operations in the same
order give the same floats (IEEE arithmetic is the same in NumPy); where a piece adds a stage's
layers it adds them one after another (NumPy's accumulate), as compute_time._sums does; what a
core chooses by a branch (sequence parallel, its pipeline's size and schedules, the order of its
layer kinds) is chosen per group of cores alike. tests/evaluate/test_plan_batch.py compares
every value with the one-core path for every core of several searches.
"""

from __future__ import annotations

import weakref
from types import SimpleNamespace

import numpy as np

from costmodel.derive import activations as act
from costmodel.derive import plain
from costmodel.evaluate import compute_time
from costmodel.evaluate.gemms import weight_shapes
from costmodel.evaluate.plan_eval import least_bubble, stage_bound
from costmodel.evaluate.plan_memory import ZERO_STAGES, stage_params, stage_peak
from costmodel.evaluate.plan_space import Core, Recompute, schedule_options

#: The compute's figures, in the order of compute_time.assemble's dicts.
PARTS = ("gemms", "attention", "linear_attention", "memory_bound", "recompute")
PHASES = ("forward", "backward", "attention")
#: The most bytes one array over many cores holds where its size grows with more than the cores
#: (a stage's layers in `_added`, the schedules in `_group`; a few such arrays are alive at
#: once): the search's memory stays bounded for a model of any number of layers.
CHUNK_BYTES = 32 * 2**20


class Batch:
    """The pieces of the cores of a search (an Evaluator `ev`'s), as arrays over them."""

    def __init__(self, ev, cores: list[Core]):
        self.ev = weakref.proxy(ev)  # the Evaluator holds the batch (no cycle: freed at once)
        self.cores = cores
        self.index = {core: i for i, core in enumerate(cores)}
        self.option_index = ev.option_index
        a = self.a = SimpleNamespace(
            **{
                name: np.array([getattr(c, attr) for c in cores], dtype=np.int64)
                for name, attr in (
                    ("tp", "tp"),
                    ("pp", "pp"),
                    ("cp", "cp"),
                    ("ep", "ep"),
                    ("dp", "dp"),
                    ("mb", "micro_batch"),
                )
            },
            m=np.array([c.micro_batches for c in cores], dtype=float),
            sp=np.array([c.sp for c in cores], dtype=bool),
        )
        self.gemm = _gemm_tables(ev, cores)
        self.lower = stage_bound(ev, self.gemm, a.m, a.dp * a.cp * a.tp, a.pp)
        self._sums = _stage_sums(ev, a, self.gemm)
        self._computed = _compute(ev, a, self.gemm, self._sums)
        self._recompute = _recompute_parts(ev, a, self._sums)
        # per ZeRO stage 0 and 1 or more: the step's compute without recompute, its optimizer
        self._floor = [
            (sum(parts[name] for name in PARTS), optimizer)
            for parts, _, optimizer in self._computed
        ]
        self._pieces = _pieces(ev, cores, a)
        self._rows: dict = {}
        self._groups: dict = {}  # (PP, block): _group's figures of a block of cores
        self._pp_rows: dict = {}  # PP: its cores' rows, the cores of a block
        self._zero_states = None  # _states of every core at each ZeRO stage, once asked for

    # the step's compute -------------------------------------------------------------------
    def bounds(self) -> list[float]:
        """plan._bound of every core: its lower bound with its least bubble."""
        base, bubbles = self.ev.base, {}
        for pp, m in zip(self.a.pp.tolist(), self.a.m.tolist()):
            if (pp, m) not in bubbles:
                bubbles[pp, m] = least_bubble(pp, m, tuple(schedule_options(base, pp)))
        bubble = np.array([bubbles[pp, m] for pp, m in zip(self.a.pp.tolist(), self.a.m.tolist())])
        return (self.lower * (1 + bubble)).tolist()

    def row(self, core: Core) -> tuple | None:
        """The core's figures as floats (None for a core outside the batch): the compute's
        (parts, phases, optimizer) at ZeRO 0 and 1, its stage sums, the recompute part of each
        policy, the floors' parts."""
        got = self._rows.get(core)
        if got is None:
            i = self.index.get(core)
            if i is None:
                return None
            computed = [
                (
                    {name: float(parts[name][i]) for name in PARTS},
                    {name: float(phases[name][i]) for name in PHASES},
                    float(optimizer[i]),
                )
                for parts, phases, optimizer in self._computed
            ]
            sums = {key: float(value[i]) for key, value in self._sums.items()}
            recompute = self._recompute[i].tolist()
            floors = [(float(stage[i]), float(optimizer[i])) for stage, optimizer in self._floor]
            got = self._rows[core] = (computed, sums, recompute, floors)
        return got

    @staticmethod
    def compute(row: tuple, zero: int) -> dict:
        """Evaluator.compute of a core (its `row`) without recompute at ZeRO 0 or 1 (and more):
        its parts, phases and optimizer seconds."""
        parts, phases, optimizer = row[0][zero]
        return {"parts": dict(parts), "phases": dict(phases), "optimizer_seconds": optimizer}

    def recompute_part(self, row: tuple, rc: Recompute) -> float:
        return row[2][self.option_index[rc]]

    def floor_parts(self, row: tuple, rc: Recompute, zero: int) -> tuple[float, float]:
        """Evaluator._floor_parts of a core (its `row`): (the step's compute, that without the
        optimizer)."""
        compute, optimizer = row[3][min(zero, 1)]
        stage = compute + row[2][self.option_index[rc]]
        return stage, stage - optimizer

    # memory -------------------------------------------------------------------------------
    def least_peaks(self, policies: list[Recompute]) -> np.ndarray:
        """Evaluator.least_peak of every core over `policies`."""
        ev, a = self.ev, self.a
        gradients, experts, first, last = stage_params(
            ev, a.tp, a.pp, a.cp, a.ep, a.mb, a.sp, np.where
        )
        flights: dict = {}
        for core in self.cores:
            key = (core.pp, core.micro_batches)
            if key not in flights:
                schedules = schedule_options(ev.base, core.pp)
                flights[key] = min(_flight(core, schedules))
        flight = np.array([flights[c.pp, c.micro_batches] for c in self.cores], dtype=float)
        states = _states(ev, a, max(ev.zero_stages))
        least = np.inf
        for rc in policies:
            pieces = tuple(self._pieces[:, ev.option_index[rc], i] for i in range(4))
            params = (gradients, experts)
            first_peak = stage_peak(
                first, pieces, params, states, flight, a.pp == 1, np.maximum, np.where
            )
            last_peak = stage_peak(last, pieces, params, states, 1.0, True, np.maximum, np.where)
            least = np.minimum(least, np.maximum(np.maximum(0.0, first_peak), last_peak))
        return least

    def _group(self, core: Core) -> tuple:
        """The block of cores of the core's pipeline size that holds it: (their [core, policy,
        ZeRO stage, schedule] peaks (Evaluator._peaks), their [core, policy, ZeRO stage]
        settings (Evaluator.settings)), and the core's row in it. A pipeline size's cores are
        taken in blocks of at most CHUNK_BYTES of peaks (each core's figures its own: the same
        floats in any block), each computed when one of its cores is first asked for."""
        pp = core.pp
        rows, size = self._pp_rows.get(pp) or self._pipeline_rows(pp)
        block, row = divmod(int(np.searchsorted(rows, self.index[core])), size)
        got = self._groups.get((pp, block))
        if got is None:
            got = self._groups[pp, block] = self._peaks_of(
                pp, rows[block * size : (block + 1) * size]
            )
        return got, row

    def _pipeline_rows(self, pp: int) -> tuple[np.ndarray, int]:
        """The rows of the cores of a pipeline size, and the cores a block of `_group` holds."""
        cells = len(self.ev.options) * len(ZERO_STAGES) * len(schedule_options(self.ev.base, pp))
        got = self._pp_rows[pp] = (
            np.flatnonzero(self.a.pp == pp),
            max(1, CHUNK_BYTES // (8 * cells)),
        )
        return got

    def _peaks_of(self, pp: int, rows: np.ndarray) -> tuple:
        """`_group`'s peaks and settings of the cores of `rows` (of one pipeline size)."""
        ev, a = self.ev, self.a
        schedules = schedule_options(ev.base, pp)
        sizes = (a.tp[rows], pp, a.cp[rows], a.ep[rows], a.mb[rows], a.sp[rows])
        params = [x[:, None, None, None] for x in stage_params(ev, *sizes, where=np.where)]
        gradients, experts, first, last = params
        pieces = tuple(self._pieces[rows, :, i, None, None] for i in range(4))
        cores = [self.cores[i] for i in rows.tolist()]
        flight = np.array([_flight(core, schedules) for core in cores], dtype=float)
        if self._zero_states is None:
            self._zero_states = [_states(ev, a, z) for z in ZERO_STAGES]
        states = tuple(
            np.stack([got[j][rows] for got in self._zero_states], axis=1)[:, None, :, None]
            for j in (0, 1)
        )
        every = np.maximum(
            stage_peak(
                first, pieces, (gradients, experts), states, flight[:, None, None, :],
                pp == 1, np.maximum,
            ),
            stage_peak(last, pieces, (gradients, experts), states, 1.0, True, np.maximum),
        )  # fmt: skip
        bubbles: dict[float, list[float]] = {}
        for core in cores:
            if core.micro_batches not in bubbles:
                bubbles[core.micro_batches] = [
                    plain.bubble_over_compute(s.name, pp, core.micro_batches, s.virtual or 1)
                    for s in schedules
                ]
        shares = np.array([bubbles[core.micro_batches] for core in cores], dtype=float)
        return every, ev.choice(every, shares)

    def peaks(self, core: Core) -> np.ndarray:
        (every, _), row = self._group(core)
        return every[row]

    def settings(self, core: Core) -> tuple[list, list]:
        (every, choice), row = self._group(core)
        return every[row].tolist(), choice[row].tolist()


def _flight(core: Core, schedules) -> list:
    """The micro batches each schedule holds in flight on the first stage."""
    per_step = max(1, int(core.micro_batches))
    return [act.in_flight_micro_batches(core.pp, per_step, s.virtual or 1) for s in schedules]


def _states(ev, a, zero: int) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per parameter of the dense and the expert model states at a ZeRO stage."""
    ranks = a.dp * a.cp
    dense = _per_value(ranks, lambda r: ev._state_bytes(zero, r))
    expert = _per_value(np.maximum(ranks // a.ep, 1), lambda r: ev._state_bytes(zero, r))
    return dense, expert


def _per_value(values: np.ndarray, of) -> np.ndarray:
    """`of` each element (an int), computed once per distinct value."""
    distinct, where = np.unique(values, return_inverse=True)
    return np.array([of(int(x)) for x in distinct], dtype=float)[where.reshape(-1)]


def _gemm_tables(ev, cores: list[Core]) -> dict[str, np.ndarray]:
    """compute_time._gemm_rows of every core, each row key's seconds an array over the cores:
    the shapes of each table (TP, CP, EP, SP, FP8, micro batch) once, every row's roofline
    at once."""
    splits = [(c.tp, c.cp, c.ep, c.sp, c.fp8, c.micro_batch) for c in cores]
    tables = {split: t for t, split in enumerate(dict.fromkeys(splits))}
    rows: dict[tuple, list] = {}
    scenarios = {}
    for (tp, cp, ep, sp, fp8, micro_batch), t in tables.items():
        sc = scenarios[fp8] = ev.gemm_scenario(tp, cp, ep, sp, fp8)
        for key, m, n, k in weight_shapes(sc, micro_batch):
            rows.setdefault((key, fp8), []).append((t, m, n, k, ep))
    columns: dict[str, np.ndarray] = {}
    for (key, fp8), got in rows.items():
        t, m, n, k, ep = zip(*got)
        peak, bandwidth, e, e_m, beta = compute_time.gemm_rates(scenarios[fp8], ev.eff, key)
        shapes = (np.array(m), np.array(n), np.array(k))
        seconds = plain.gemm_seconds(*shapes, peak, bandwidth, e, e_m, beta, np.maximum)
        count = compute_time.gemm_count(
            SimpleNamespace(expert_parallel=np.array(ep)), ev.shape, key
        )
        column = columns.setdefault(key, np.zeros(len(tables)))
        column[list(t)] = seconds * count
    where = np.array([tables[split] for split in splits])
    return {key: column[where] for key, column in columns.items()}


def _stage_sums(ev, a, gemm: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """compute_time.stage_sums' sums of every core: each layer kind's `_layer` (per value of
    sequence parallel), then the most loaded stage's layers, the heaviest kinds first, added
    one after another per group of cores of one pipeline size and order of kinds."""
    base, n = ev.base, len(a.tp)
    share = a.dp * a.cp * a.tp
    core_fwd = ev.core_flops_per_layer / share
    linear = 0.0 if ev.linear_flops_per_layer is None else ev.linear_flops_per_layer / share
    kinds: list[dict[str, np.ndarray]] = [{} for _ in ev.kinds]
    for sp in (False, True):
        rows = np.flatnonzero(a.sp == sp)
        if not len(rows):
            continue
        sc = SimpleNamespace(  # what _layer and _elementwise read of a scenario
            micro_batches_per_step=a.m[rows],
            hbm_bandwidth=base.hbm_bandwidth,
            peak_flops=base.peak_flops,
            attention_kernel=base.attention_kernel,
            tensor_parallel=a.tp[rows],
            context_parallel=a.cp[rows],
            micro_batch=a.mb[rows],
            seq_len=base.seq_len,
            sequence_parallel=sp,
        )
        sub = {key: column[rows] for key, column in gemm.items()}
        lin = linear if np.isscalar(linear) else linear[rows]
        for kind, (mixer, mlp, _) in zip(kinds, ev.kinds):
            layer = compute_time._layer(sc, ev.shape, ev.eff, sub, core_fwd[rows], lin, mixer, mlp)
            for key, value in layer.items():
                kind.setdefault(key, np.empty(n))[rows] = value
    keys = list(kinds[0])
    totals = np.array([compute_time._total(kind) for kind in kinds])
    orders = np.argsort(-totals, axis=0, kind="stable").T.tolist()
    groups: dict[tuple, list[int]] = {}
    for i, (pp, order) in enumerate(zip(a.pp.tolist(), orders)):
        groups.setdefault((pp, tuple(order)), []).append(i)
    table = np.array([[kind[key] for key in keys] for kind in kinds])  # [kind, key, core]
    out = np.empty((len(keys), n))
    width = max(1, CHUNK_BYTES // (2 * table.itemsize * len(keys)))  # cores a layer's block holds
    for (pp, order), members in groups.items():
        room, runs = -(-ev.layers // pp), []
        for k in order:
            runs.append(min(ev.kinds[k][2], room - sum(runs)))
        layers = [k for k, run in zip(order, runs) for _ in range(run)]  # the stage's, in order
        for start in range(0, len(members), width):
            some = members[start : start + width]
            out[:, some] = _added(table[:, :, some], layers)
    return dict(zip(keys, out))


def _added(table: np.ndarray, layers: list[int]) -> np.ndarray:
    """table[k] ([key, core]) of each kind k of `layers` added one after another (NumPy's
    accumulate), in blocks of layers of at most CHUNK_BYTES (a stage of 55,440 layers over
    thousands of cores would be gigabytes at once): each block's accumulate starts from the sum
    so far, so the additions, and the floats, are those of one accumulate over every layer."""
    block = max(1, CHUNK_BYTES // table[0].nbytes - 1)  # layers besides the sum so far
    total = None
    for start in range(0, len(layers), block):
        rows = table[layers[start : start + block]]
        if total is not None:
            rows = np.concatenate([total[None], rows])
        total = np.add.accumulate(rows, axis=0)[-1]
    return total


def _compute(ev, a, gemm, sums) -> list[tuple]:
    """(parts, phases, optimizer seconds) of every core without recompute at ZeRO 0 and at ZeRO
    1 (Evaluator.compute: compute_time.assemble; ZeRO 0's optimizer as Evaluator._zero0)."""
    base, shape = ev.base, ev.shape
    sc = SimpleNamespace(
        micro_batches_per_step=a.m,
        micro_batch=a.mb,
        seq_len=base.seq_len,
        context_parallel=a.cp,
        tensor_parallel=a.tp,
        pipeline_parallel=a.pp,
        expert_parallel=a.ep,
        data_parallel=a.dp,
        total_params=base.total_params,
        zero_stage=1,
        **vars(ev._fractions(1, Recompute("none"))),
    )
    bandwidth = base.hbm_bandwidth * ev.eff["hbm"].value
    optimizer = compute_time._optimizer_bytes(sc, shape, np.maximum) / bandwidth
    one, _ = compute_time.assemble(sc, shape, gemm, sums, bandwidth, optimizer)
    sc.zero_stage = 0
    extra = compute_time._optimizer_bytes(sc, shape, np.maximum) / bandwidth
    extra = extra - one["optimizer_seconds"]
    parts = {**one["parts"], "memory_bound": one["parts"]["memory_bound"] + extra}
    zero = (parts, one["phases"], one["optimizer_seconds"] + extra)
    return [zero, (one["parts"], one["phases"], one["optimizer_seconds"])]


def _recompute_parts(ev, a, sums) -> np.ndarray:
    """[core, policy]: Evaluator.recompute_part of every policy of `options` (0 for none)."""
    out = np.zeros((len(a.tp), len(ev.options)))
    for pp in np.unique(a.pp).tolist():
        rows = np.flatnonzero(a.pp == pp)
        sub = {key: value[rows] for key, value in sums.items()}
        for p, rc in enumerate(ev.options):
            if rc.policy != "none":
                out[rows, p] = compute_time.recompute_seconds(ev._fractions(pp, rc), sub)
    return out


def _pieces(ev, cores: list[Core], a) -> np.ndarray:
    """[core, policy, 4]: Evaluator._activations of every core and policy (built at a micro
    batch of one once per TP, SP, CP, PP and FP8 storage, scaled)."""
    keys = [(c.tp, c.sp, c.cp, c.pp, c.fp8_activations) for c in cores]
    first = {}
    for core, key in zip(cores, keys):
        first.setdefault(key, core)
    where = {key: i for i, key in enumerate(first)}
    one = np.array([[ev._unscaled(core, rc) for rc in ev.options] for core in first.values()])
    return one[[where[key] for key in keys]] * a.mb[:, None, None]
