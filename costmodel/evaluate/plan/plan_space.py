"""The layouts `costmodel plan` searches: every split of a cluster's GPUs into TP x PP x CP x DP
(EP inside DP) with a micro batch, and the settings that go with it (sequence parallel, FP8,
the pipeline schedule and its virtual stages, the recompute policy, the ZeRO stage), kept only
where they divide as `costmodel.inputs.layout` checks a scenario's layout.

A `Core` is what the compute and the communication of a step depend on (the sizes, the micro
batch, sequence parallel, FP8); an `Option` adds the memory settings and the schedule. The
checks mirror `inputs.layout._layout` and `_schedule`, calling its rules where a rule is more
than a divisor (at least one micro batch per pipeline, Ulysses CP and the heads, the virtual
stages, DualPipe's even pipeline, the cross-entropy's pieces); the tests resolve every proposed
layout as a scenario. The search bounds no size beyond them except CP (at most MAX_CP), the
micro batch (at most MAX_MICRO_BATCH, or the scenario's own), padded micro batches (a whole
number per step) and the interleaved schedule (only where PP divides the layers).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, fields

from costmodel.derive import activations as act
from costmodel.derive import plain
from costmodel.derive.plain import divisors
from costmodel.errors import CostModelError
from costmodel.inputs import frameworks
from costmodel.inputs.layout import (
    ce_chunks_most,
    cp_divides,
    dualpipe_allows,
    enough_micro_batches,
    ulysses_divides,
    virtual_splits_stage,
)
from costmodel.inputs.model_shape import tensor_parallel_widths
from costmodel.inputs.scenario import Scenario
from costmodel.inputs.stages import interleaving_allows

#: The largest context-parallel size and micro batch searched (and the scenario's own micro
#: batch, whatever it is).
MAX_CP = 32
MAX_MICRO_BATCH = 8
#: The memory a search may take, by `search_bytes`' estimate: a larger layout space is refused
#: (one line naming its size) before its arrays are built. The estimate is a search's most:
#: CORE_BYTES a core (its Core, its share of the batch's arrays, and its caches and row once
#: timed: 13 KB a core measured where every core is timed, 2 KB where few are) and PEAK_BYTES a
#: figure of its peaks table (a float64 for a recompute policy at a ZeRO stage and a schedule).
SEARCH_BYTES = 2 * 2**30
CORE_BYTES = 16_000
PEAK_BYTES = 8


@dataclass(frozen=True)
class Core:
    """The sizes of a layout and what its step's compute and communication depend on."""

    tp: int
    pp: int
    cp: int
    ep: int
    dp: int
    micro_batch: int
    micro_batches: float  # per step on one pipeline
    sp: bool
    fp8: str  # none | hybrid
    fp8_activations: str

    def __hash__(self) -> int:
        """The fields' hash, as the dataclass's, computed once: a core keys many of the
        search's caches, thousands of lookups each."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, name) for name in CORE_FIELDS))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self) -> dict:
        """Pickled without the kept hash (a string's differs from one process to another)."""
        return {name: getattr(self, name) for name in CORE_FIELDS}


#: The fields of a Core, in order.
CORE_FIELDS = tuple(f.name for f in fields(Core))


@dataclass(frozen=True)
class Recompute:
    """A recompute policy: none, selective with its modules, or full."""

    policy: str
    modules: tuple[str, ...] | None = None
    num_layers: int | None = None
    method: str | None = None

    @property
    def label(self) -> str:
        if self.policy == "selective":
            return "selective:" + "+".join(self.modules or ())
        if self.policy == "full" and self.num_layers is not None:
            return f"full:{self.num_layers}:{self.method or 'uniform'}"
        return self.policy


@dataclass(frozen=True)
class Schedule:
    """A pipeline schedule and its virtual stages (None but for interleaved)."""

    name: str
    virtual: int | None = None

    @property
    def label(self) -> str:
        return f"{self.name}:{self.virtual}" if self.virtual else self.name


def selective_chain(sc: Scenario) -> list[Recompute]:
    """The growing selective module sets of the modules the model has (act.recompute_modules_of,
    cheapest first: run._candidates' order)."""
    out, modules = [], []
    for module in act.recompute_modules_of(sc.shape):
        modules.append(module)
        ordered = tuple(m for m in act.RECOMPUTE_MODULES if m in modules)
        out.append(Recompute("selective", ordered))
    return out


def recompute_options(sc: Scenario) -> list[Recompute]:
    """none, the growing selective module sets of the modules the model has, full, and the
    scenario's own policy where it is none of these."""
    out = [Recompute("none"), *selective_chain(sc), Recompute("full")]
    own = own_recompute(sc)
    if own not in out:
        out.append(own)
    return out


def own_recompute(sc: Scenario) -> Recompute:
    """The scenario's recompute policy as an Option's."""
    if sc.recompute == "selective":
        ordered = tuple(m for m in act.RECOMPUTE_MODULES if m in (sc.recompute_modules or ()))
        return Recompute("selective", ordered)
    if sc.recompute == "full" and sc.recompute_num_layers is not None:
        return Recompute("full", None, sc.recompute_num_layers, sc.recompute_method)
    return Recompute(sc.recompute)


def fp8_options(sc: Scenario, search: bool = False) -> list[tuple[str, str]]:
    """(fp8, fp8_activations): the scenario's precision; with `search`, BF16 and FP8 where the
    GPU has an FP8 peak (the scenario's FP8 storage with it, else none)."""
    if not search:
        return [(sc.fp8, sc.fp8_activations)]
    out = [("none", "none")]
    if sc.gpu_spec.fp8_flops:
        out.append(("hybrid", sc.fp8_activations if sc.fp8 == "hybrid" else "none"))
    return out


def schedule_options(sc: Scenario, pp: int) -> list[Schedule]:
    """1F1B, interleaved with every virtual size that splits the stages evenly (PP divides the
    layers, and the virtual stages each stage's: inputs.layout's `virtual_splits_stage`) where
    the framework offers it (inputs.frameworks), and
    the scenario's own schedule where it is another (zero_bubble; dualpipe where the pipeline
    is even: `dualpipe_allows`); one stage: 1F1B."""
    if pp == 1:
        return [Schedule("1f1b")]
    layers = sc.num_layers
    stage = -(-layers // pp)
    out = [Schedule("1f1b")]
    if layers % pp == 0 and frameworks.schedule_allowed(sc.framework, "interleaved"):
        out += [
            Schedule("interleaved", v)
            for v in range(2, stage + 1)
            if virtual_splits_stage(layers, pp, v)
        ]
    own = sc.pipeline_schedule or "1f1b"
    if own not in ("1f1b", "interleaved") and (own != "dualpipe" or dualpipe_allows(pp)):
        out.append(Schedule(own))
    return out


def bubble_share(schedule: Schedule, pp: int, micro_batches: float) -> float:
    """The schedule's bubble over the stage's compute; infinite for the interleaved schedule
    with fewer micro batches than stages, which Megatron-LM refuses (inputs.stages'
    `interleaving_allows`, the rule a scenario is resolved under): never the least."""
    if schedule.name == "interleaved" and not interleaving_allows(pp, micro_batches):
        return math.inf
    return plain.bubble_over_compute(schedule.name, pp, micro_batches, schedule.virtual or 1)


def tensor_parallel_sizes(sc: Scenario, gpus: int) -> list[int]:
    """The TP sizes that divide the GPUs and every width of the model TP splits."""
    widths = [w for _, w in tensor_parallel_widths(sc.shape, sc.num_mtp_layers)]
    heads = sc.num_heads
    return [
        tp
        for tp in divisors(gpus)
        if tp == 1 or (all(w % tp == 0 for w in widths) and (heads is None or heads % tp == 0))
    ]


def micro_batches_of(sc: Scenario, dp: int, micro_batch: int) -> float:
    return plain.micro_batches(
        sc.batching,
        samples=sc.samples_per_step,
        tokens=sc.tokens_per_step,
        seq_len=sc.seq_len,
        dp=dp,
        micro_batch=micro_batch,
    )


def gpu_splits(sc: Scenario, gpus: int):
    """(tp, pp, cp, dp) that divide the GPUs, with PP at most the layers and CP splitting the
    sequence (inputs.layout's `cp_divides`; and, with Ulysses CP, each TP rank's heads: inputs.layout's `ulysses_divides`)."""
    ulysses = sc.cp_comm_type == "a2a"
    for tp in tensor_parallel_sizes(sc, gpus):
        for pp in divisors(gpus // tp):
            if pp > sc.num_layers:
                break
            for cp in divisors(gpus // (tp * pp)):
                if cp > MAX_CP:
                    break
                if not cp_divides(sc.seq_len, cp) or (
                    ulysses and not ulysses_divides(sc.shape, tp, cp)
                ):
                    continue
                yield tp, pp, cp, gpus // (tp * pp * cp)


def _micro_batch_allowed(sc: Scenario, m: float, micro_batch: int, cp: int, dp: int) -> bool:
    """Whether a core of `m` micro batches per step resolves: at least one micro batch per
    pipeline (inputs.layout's `enough_micro_batches`), a whole number of them with padded
    batching (each rank's samples split into whole micro batches; packed, the documents fill
    rows of seq_len tokens, a fraction of a row per step allowed, as resolve does), and the
    chunked cross-entropy's pieces at most its tokens on a GPU (`ce_chunks_most`)."""
    if not enough_micro_batches(m, sc.batching, sc.samples_per_step, dp):
        return False
    if sc.batching == "padded" and not float(m).is_integer():
        return False
    return sc.ce_chunks <= ce_chunks_most(micro_batch, sc.seq_len, cp)


def cores(sc: Scenario, gpus: int, fp8: bool = False) -> list[Core]:
    """Every Core of `gpus` GPUs for the scenario's model, batch and sequence: at least one
    micro batch per step (a whole number of them with padded batching), EP a divisor of the
    experts and of DP, sequence parallel only with TP (and TP dividing the sequence's share of
    a CP rank); `fp8`: FP8 searched (fp8_options). CostModelError (one line naming the size)
    where the search of so many would take more than SEARCH_BYTES (`search_bytes`)."""
    out, count, size = [], 0, 0
    per_core: dict[int, int] = {}  # search_bytes of a core of each pipeline size
    for tp, pp, cp, dp in gpu_splits(sc, gpus):
        choices = _choices(sc, tp, cp, dp, fp8)
        if pp not in per_core:
            per_core[pp] = search_bytes(sc, len(schedule_options(sc, pp)))
        found = math.prod(len(choice) for choice in choices)
        count += found
        size += found * per_core[pp]
        if size > SEARCH_BYTES:
            continue  # counted, not built
        for (micro_batch, m), ep, sp, (precision, storage) in itertools.product(*choices):
            out.append(Core(tp, pp, cp, ep, dp, micro_batch, m, sp, precision, storage))
    if size > SEARCH_BYTES:
        raise CostModelError(
            f"num_gpus: {gpus} is not allowed; expected a layout space the search holds in "
            f"{SEARCH_BYTES / 2**30:g} GiB: this model and batch on {gpus:,} GPUs have "
            f"{count:,} layouts to search (TP x PP x CP x DP splits with EP, micro batch, "
            f"sequence parallel{', FP8' if fp8 else ''}), about {size / 2**30:.1f} GiB"
        )
    return out


def search_bytes(sc: Scenario, schedules: int) -> int:
    """The memory the search takes per core, estimated (CORE_BYTES, and PEAK_BYTES for each
    figure of its peaks: a recompute policy at a ZeRO stage and one of its pipeline's
    `schedules`)."""
    return CORE_BYTES + PEAK_BYTES * len(recompute_options(sc)) * len(plain.STAGES) * schedules


def _choices(sc: Scenario, tp: int, cp: int, dp: int, fp8: bool) -> tuple[list, ...]:
    """What `cores` pairs with a split: (micro batch, micro batches per step), EP, sequence
    parallel, (fp8, fp8_activations)."""
    experts = sc.num_experts
    eps = [e for e in divisors(dp) if experts % e == 0] if experts else [1]
    sps = [False, True] if tp > 1 and (sc.seq_len // cp) % tp == 0 else [False]
    batches = []
    for micro_batch in sorted({*range(1, MAX_MICRO_BATCH + 1), sc.micro_batch}):
        m = micro_batches_of(sc, dp, micro_batch)
        if _micro_batch_allowed(sc, m, micro_batch, cp, dp):
            batches.append((micro_batch, m))
    return batches, eps, sps, fp8_options(sc, fp8)


def own_core(sc: Scenario) -> Core:
    """The scenario's own layout as a Core."""
    return Core(
        sc.tensor_parallel,
        sc.pipeline_parallel,
        sc.context_parallel,
        sc.expert_parallel,
        sc.data_parallel,
        sc.micro_batch,
        float(sc.micro_batches_per_step),
        bool(sc.sequence_parallel),
        sc.fp8,
        sc.fp8_activations,
    )


def own_schedule(sc: Scenario) -> Schedule:
    if sc.pipeline_parallel == 1:
        return Schedule("1f1b")
    return Schedule(sc.pipeline_schedule or "1f1b", sc.virtual_pipeline)


def outside(sc: Scenario) -> str:
    """Why the scenario's own layout is not among the cores searched (`cores`), in words."""
    core = own_core(sc)
    if core.cp > MAX_CP:
        return f"context_parallel {core.cp} is above the search's {MAX_CP}"
    if core.tp not in tensor_parallel_sizes(sc, sc.num_gpus):
        return f"tensor_parallel {core.tp} does not divide every width TP splits"
    if not _micro_batch_allowed(sc, core.micro_batches, core.micro_batch, core.cp, core.dp):
        return (
            f"its {core.micro_batches:g} micro batches per step are not a whole number of at "
            "least one"
        )
    if (core.fp8, core.fp8_activations) not in fp8_options(sc, True) + fp8_options(sc):
        return f"fp8 {core.fp8} on a GPU without an FP8 peak"
    if core.ep > 1 and core.dp % core.ep:
        return (
            f"expert_parallel {core.ep} does not divide data_parallel {core.dp} (MoE parallel "
            "folding: the search splits the experts inside DP only)"
        )
    if sc.expert_tensor_parallel not in (None, core.tp):
        return (
            f"expert_tensor_parallel {sc.expert_tensor_parallel} is not tensor_parallel "
            f"{core.tp} (the search splits the experts by TP)"
        )
    return "its sizes or settings"
