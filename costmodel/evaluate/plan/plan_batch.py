"""The plan's figures of many cores at once: the models' formulas (evaluate.simulate.compute_time,
evaluate.memory.gpu_memory, evaluate.simulate.stage), each written once, called with NumPy arrays over the cores
of a search (evaluate.plan.plan_eval.Evaluator reads every core's figures from here; a core outside
the search's batch from a batch of its own).

Each piece calls the one formula: gemms.weight_shapes, compute_time.gemm_rates, gemm_count,
shaped_efficiency and plain.gemm_seconds (the GEMM tables), `stage_bound` (the lower bounds),
compute_time.layer_seconds, stage_runs and stage.stage_sum (the stage's sums),
optimizer_step.optimizer_bytes and compute_time.compute_parts (the compute without recompute, at ZeRO 0 and at
ZeRO 1 or more), compute_time.recompute_seconds (the recompute parts), gpu_memory.stage_params,
model_states, stage_phases and peak_bytes (the peaks). What a formula chooses by a branch on a
number that is the same for a group of cores (a pipeline's size and schedules, the order of the
layer kinds, the ZeRO ranks) is called per group.
"""

from __future__ import annotations

import functools
import weakref
from types import SimpleNamespace

import numpy as np

from costmodel.derive import numeric, plain
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.memory.pipeline import schedule_flights
from costmodel.evaluate.plan.plan_memory import ZERO_STAGES
from costmodel.evaluate.plan.plan_space import (
    Core,
    Recompute,
    Schedule,
    bubble_share,
    schedule_options,
)
from costmodel.evaluate.simulate import compute_time, optimizer_step, stage
from costmodel.evaluate.simulate.gemms import weight_shapes
from costmodel.inputs import attention_kernels

#: The compute's parts without recompute, in the order of compute_time.compute_parts' dict.
PARTS = ("gemms", "attention", "linear_attention", "memory_bound", "kernel_overhead")


class Batch:
    """The figures of the cores of a search (an Evaluator `ev`'s), as arrays over them."""

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
        self._computed = _compute(ev, a, self.gemm, self._sums)  # at ZeRO 0, and 1 or more
        self._recompute = _recompute_parts(ev, a, self._sums)
        # per ZeRO stage 0 and 1 or more: the step's compute without recompute, its optimizer
        self._floor = [
            (sum(got["parts"].values()), got["optimizer_seconds"]) for got in self._computed
        ]
        self._pieces = _pieces(ev, cores, a)
        sizes = (ev.base.seq_len, a.tp, a.pp, a.cp, a.ep, a.mb, a.sp)
        self._params = gpu_memory.stage_params(ev.params, ev.shape, *sizes)
        self._rows: dict = {}
        self._groups: dict = {}  # (PP, block): _group's figures of a block of cores
        self._pp_rows: dict = {}  # PP: its cores' rows, the cores of a block
        self._states: dict = {}  # ZeRO stage: `_states_at`

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
        """The core's figures as floats (None for a core outside the batch): the compute
        without recompute (compute_time.compute_parts) at ZeRO 0 and 1, its stage sums, the
        recompute part of each policy, the floors' parts, its lower bound."""
        got = self._rows.get(core)
        if got is None:
            i = self.index.get(core)
            if i is None:
                return None
            computed = [
                {
                    "parts": {name: float(got["parts"][name][i]) for name in PARTS},
                    "forward": float(got["forward"][i]),
                    "optimizer_seconds": float(got["optimizer_seconds"][i]),
                }
                for got in self._computed
            ]
            sums = {key: float(value[i]) for key, value in self._sums.items()}
            recompute = self._recompute[i].tolist()
            floors = [(float(step[i]), float(optimizer[i])) for step, optimizer in self._floor]
            lower = float(self.lower[i])
            got = self._rows[core] = (computed, sums, recompute, floors, lower)
        return got

    @staticmethod
    def compute(row: tuple, zero: int) -> dict:
        """compute_time.compute_parts of a core (its `row`) at ZeRO 0 or 1 (and more)."""
        got = row[0][min(zero, 1)]
        return {**got, "parts": dict(got["parts"])}

    def recompute_part(self, row: tuple, rc: Recompute) -> float:
        return row[2][self.option_index[rc]]

    def floor_parts(self, row: tuple, rc: Recompute, zero: int) -> tuple[float, float]:
        """Evaluator._floor_parts of a core (its `row`): (the step's compute, that without the
        optimizer)."""
        compute, optimizer = row[3][min(zero, 1)]
        step = compute + row[2][self.option_index[rc]]
        return step, step - optimizer

    # memory -------------------------------------------------------------------------------
    def _states_at(self, zero: int) -> tuple[np.ndarray, np.ndarray]:
        """The model states' bytes (gpu_memory.model_states) of every core's first and last
        stage at a ZeRO stage, per group of cores of the same ZeRO ranks, and their weights'
        alone (DualPipe's second copy: evaluate.memory.pipeline)."""
        got = self._states.get(zero)
        if got is None:
            a, base = self.a, self.ev.base
            _, experts, first, last = self._params
            layer = gpu_memory.gathered_layer(
                self.ev.params, self.ev.shape, base.num_mtp_layers, a.tp, a.ep
            )
            ranks = a.dp * a.cp
            pairs = np.stack([ranks, np.maximum(ranks // a.ep, 1)])
            distinct, where = np.unique(pairs, axis=1, return_inverse=True)
            where = where.reshape(-1)
            got = self._states[zero] = tuple(np.empty(len(ranks)) for _ in range(4))
            for j, (dense_ranks, expert_ranks) in enumerate(distinct.T.tolist()):
                rows = np.flatnonzero(where == j)
                for k, on_gpu in enumerate((first, last)):
                    states = gpu_memory.model_states(
                        on_gpu[rows] - experts[rows],
                        experts[rows],
                        zero,
                        dense_ranks,
                        expert_ranks,
                        base.grad_bytes,
                        plain.optimizer_state_bytes(base.optimizer_dtype, base.main_params_dtype),
                        layer[rows],
                    )
                    got[k][rows] = sum(states.values())
                    got[k + 2][rows] = states["weights"]
        return got

    def least_peaks(self, policies: list[Recompute]) -> np.ndarray:
        """The least peak of every core over `policies`, every ZeRO stage and schedule: at the
        least model states of the ZeRO stages searched (the most sharding, but ZeRO 3 also holds
        its gathered layers, which can outweigh what it shards on a stage of few layers) and the
        schedule that holds the fewest micro batches (the peak grows with the states and the
        micro batches in flight)."""
        ev, a = self.ev, self.a
        gradients = self._params[0]
        flights: dict = {}
        for core in self.cores:
            key = (core.pp, core.micro_batches)
            if key not in flights:
                flights[key] = min(_flight(core, schedule_options(ev.base, core.pp)))
        flight = np.array([flights[c.pp, c.micro_batches] for c in self.cores], dtype=float)
        states = [self._states_at(zero)[:2] for zero in ev.zero_stages]  # no second copy
        first, last = (np.minimum.reduce([got[k] for got in states]) for k in (0, 1))
        least = np.inf
        for rc in policies:
            saved, working, outside, logits = (
                self._pieces[:, ev.option_index[rc], i] for i in range(4)
            )
            pieces = (saved, working, outside, logits, gradients)
            peak = np.maximum(
                _peak(first, pieces, flight, a.pp == 1), _peak(last, pieces, 1.0, True)
            )
            least = np.minimum(least, peak)
        return least

    def _group(self, core: Core) -> tuple:
        """The block of cores of the core's pipeline size that holds it: (their [core, policy,
        ZeRO stage, schedule] peaks, their [core, policy, ZeRO stage] settings
        (Evaluator.settings)), and the core's row in it. A pipeline size's cores are taken in
        blocks of at most stage.CHUNK_BYTES of peaks (each core's figures its own: the same floats in
        any block), each computed when one of its cores is first asked for."""
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
            max(1, stage.CHUNK_BYTES // (8 * cells)),
        )
        return got

    def _peaks_of(self, pp: int, rows: np.ndarray) -> tuple:
        """`_group`'s peaks and settings of the cores of `rows` (of one pipeline size): the
        most loaded of the first and the last stage (gpu_memory.most_loaded's rule)."""
        ev = self.ev
        schedules = schedule_options(ev.base, pp)
        saved, working, outside, logits = (self._pieces[rows, :, i, None, None] for i in range(4))
        pieces = (saved, working, outside, logits, self._params[0][rows, None, None, None])
        cores = [self.cores[i] for i in rows.tolist()]
        flight, flight_last = (
            np.array([_flight(core, schedules, j) for core in cores], dtype=float)[:, None, None, :]
            for j in (0, 2)
        )
        every_zero = [self._states_at(z) for z in ZERO_STAGES]
        first, last, first_weights, last_weights = (
            np.stack([got[j][rows] for got in every_zero], axis=1)[:, None, :, None]
            for j in range(4)
        )
        dual = np.array([s.name == "dualpipe" and pp > 1 for s in schedules], dtype=float)
        if dual.any():  # DualPipe's second copy: the mirrored stage's weights
            first, last = first + dual * last_weights, last + dual * first_weights
        every = np.maximum(
            _peak(first, pieces, flight, pp == 1), _peak(last, pieces, flight_last, True)
        )
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


def _peak(states, pieces: tuple, in_flight, has_head):
    """The peak bytes of a pipeline stage's GPU (gpu_memory.stage_phases, peak_bytes)."""
    return gpu_memory.peak_bytes(gpu_memory.stage_phases(states, pieces, in_flight, has_head))


def _flight(core: Core, schedules, stage_index: int = 0) -> list:
    """The micro batches each schedule holds in flight on the first stage (`stage_index` 2: the
    last; evaluate.memory.pipeline.schedule_flights)."""
    return [
        schedule_flights(s.name, core.pp, core.micro_batches, s.virtual or 1)[stage_index]
        for s in schedules
    ]


def _gemm_tables(ev, cores: list[Core]) -> dict[str, np.ndarray]:
    """compute_time.gemm_rows of every core, each row key's seconds an array over the cores:
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
        peak, bandwidth, _, e_m, beta = compute_time.gemm_rates(scenarios[fp8], ev.eff, key)
        shapes = (np.array(m), np.array(n), np.array(k))
        count = compute_time.gemm_count(
            SimpleNamespace(expert_parallel=np.array(ep)), ev.shape, key
        )
        e = compute_time.shaped_efficiency(
            scenarios[fp8], ev.eff, key, shapes, count, stage.minimum
        )
        seconds = plain.gemm_seconds(*shapes, peak, bandwidth, e, e_m, beta, stage.maximum)
        column = columns.setdefault(key, np.zeros(len(tables)))
        column[list(t)] = seconds * count
    where = np.array([tables[split] for split in splits])
    return {key: column[where] for key, column in columns.items()}


def _stage_sums(ev, a, gemm: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """compute_time.stage_sums' sums of every core: each layer kind's `_layer`, then the most
    loaded stage's layers (compute_time.stage_runs, stage.stage_sum) per group of cores of one
    pipeline size and order of kinds."""
    base, n = ev.base, len(a.tp)
    share = a.dp * a.cp * a.tp
    core, linear = ev.layer_flops
    sc = SimpleNamespace(  # what _layer and _elementwise read of a scenario
        micro_batches_per_step=a.m,
        hbm_bandwidth=base.hbm_bandwidth,
        peak_flops=base.peak_flops,
        attention_kernel=base.attention_kernel,
        tensor_parallel=a.tp,
        context_parallel=a.cp,
        micro_batch=a.mb,
        seq_len=base.seq_len,
        sequence_parallel=a.sp,
        expert_parallel=a.ep,
        kernel_launch_overhead=base.kernel_launch_overhead,
        dropout=base.dropout,
        framework=base.framework,
    )
    kinds = [
        compute_time.layer_seconds(
            sc, ev.shape, ev.eff, gemm, core / share, linear / share, mixer, mlp
        )
        for mixer, mlp, _ in ev.kinds
    ]
    keys, counts = list(kinds[0]), [count for _, _, count in ev.kinds]
    totals = np.array([compute_time.layer_total(kind) for kind in kinds])  # [kind, core]
    orders = np.argsort(-totals, axis=0, kind="stable").T.tolist()
    groups: dict[tuple, list[int]] = {}
    for i, (pp, order) in enumerate(zip(a.pp.tolist(), orders)):
        groups.setdefault((pp, tuple(order)), []).append(i)
    table = np.array([[np.broadcast_to(kind[key], n) for key in keys] for kind in kinds])
    out = np.empty((len(keys), n))
    width = max(1, stage.CHUNK_BYTES // (2 * table.itemsize * len(keys)))  # a block's cores
    for (pp, _), members in groups.items():
        runs = stage.heaviest_stage(totals[:, members[0]].tolist(), counts, pp)
        for start in range(0, len(members), width):
            some = members[start : start + width]
            out[:, some] = stage.stage_sum(table[:, :, some], runs)
    return dict(zip(keys, out))


def _compute(ev, a, gemm, sums) -> list[dict]:
    """compute_time.compute_parts of every core (the compute without recompute) at ZeRO 0 and
    at ZeRO 1 or more (the optimizer's shard: compute_time.optimizer_bytes)."""
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
        kernel_launch_overhead=base.kernel_launch_overhead,
        optimizer_dtype=base.optimizer_dtype,
        main_params_dtype=base.main_params_dtype,
        num_mtp_layers=base.num_mtp_layers,
    )
    bandwidth = base.hbm_bandwidth * ev.eff["hbm"].value
    out = []
    for zero in (0, 1):
        sc.zero_stage = zero
        optimizer = optimizer_step.optimizer_bytes(sc, shape) / bandwidth
        out.append(compute_time.compute_parts(sc, shape, gemm, sums, bandwidth, optimizer)[0])
    return out


def _recompute_parts(ev, a, sums) -> np.ndarray:
    """[core, policy]: compute_time.recompute_seconds of every policy of `options` (0 for
    none), per pipeline size (the recompute fractions read it)."""
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


def stage_bound(ev, gemm, micro_batches, share, pp):
    """Seconds no layout of a core can beat: the most loaded stage holds ceil(L / PP) layers, at
    least their share of every layer's weight GEMMs (3 x the forward) and attention core, the
    lm_head's GEMMs (`gemm`: the cores' GEMM rows; `share`: DP x CP x TP; arrays over cores)."""
    peak = ev.base.peak_flops
    kind = attention_kernels.KIND[ev.base.attention_kernel]
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[kind])
    flash = kind == "flash"  # below: the best any CP size reaches (a bound)
    e_f = ev.eff["attention_flash_forward" if flash else "attention_eager"].best
    e_b = ev.eff["attention_flash_backward" if flash else "attention_eager"].best
    core_seconds = ev.layer_flops[0] / share / peak
    core_seconds = core_seconds * (1 / e_f + kappa / e_b)
    total = 0.0
    for mixer, mlp, count in ev.kinds:
        rows = compute_time.MIXER_ROWS[mixer] + compute_time.MLP_ROWS[mlp]
        layer = 3 * micro_batches * sum(gemm.get(key, 0.0) for key in rows)
        total += count * (layer + (core_seconds if mixer == "attention" else 0.0))
    most = -(-ev.layers // pp) / ev.layers * total
    return most + 3 * micro_batches * sum(gemm.get(key, 0.0) for key in compute_time.OUTSIDE_ROWS)


@functools.cache
def least_bubble(pp: int, micro_batches: float, schedules: tuple[Schedule, ...]) -> float:
    """The least bubble share over the schedules searched for a pipeline."""
    return min(bubble_share(s, pp, micro_batches) for s in schedules)
