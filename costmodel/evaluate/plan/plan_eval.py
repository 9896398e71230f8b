"""The figures of a searched layout, fast: the step-time model's parts (evaluate.simulate.step_time) and
the memory model's peak (evaluate.plan.plan_memory), from pieces each computed once for the sizes
they depend on.

- Every core's compute and peaks are the models' formulas on arrays over the cores of the
  search (evaluate.plan.plan_batch: `batch`, which the search sets), or of a batch of the one core
  for a core outside it; the recompute policy is added to the compute without recompute
  (compute_time.with_recompute), as compute_time.compute adds it.
- The communication: the model on the layout's sizes (one per ZeRO stage and the full
  recompute or not), and a lower bound on the step (the weight GEMMs and the attention core of
  the most loaded stage, and the schedule's least bubble) that lets the search skip layouts
  that cannot rank.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from costmodel.derive import plain
from costmodel.evaluate.communication import communication
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.plan.plan_batch import Batch, least_bubble, stage_bound
from costmodel.evaluate.plan.plan_memory import ZERO_STAGES, Memory
from costmodel.evaluate.plan.plan_space import Core, Recompute, Schedule, recompute_options
from costmodel.evaluate.simulate import compute_time, run, step_time
from costmodel.inputs import efficiency
from costmodel.inputs.layout import recompute_fractions
from costmodel.inputs.scenario import Scenario

__all__ = ["ZERO_STAGES", "Evaluator", "least_bubble", "stage_bound"]


class Evaluator(Memory):
    """The pieces of one base scenario's layouts, cached by what each depends on."""

    def __init__(self, base: Scenario, zero_stages: tuple[int, ...] = ZERO_STAGES):
        self.base = base
        self.zero_stages = zero_stages  # those searched (a framework may lack some)
        self.shape = base.shape
        self.params = gpu_memory.split_params(self.shape, base)
        self.usable = gpu_memory.capacity(base)["usable"]
        self.eff = efficiency.efficiencies(base.values)
        self.kinds = compute_time.layer_kinds(self.shape, base)
        self.layers = sum(n for _, _, n in self.kinds)
        self.layer_flops = compute_time.layer_flops(base)  # the layout does not enter them
        self._cache: dict[tuple, Any] = {}
        self.options = recompute_options(base)
        self.option_index = {rc: i for i, rc in enumerate(self.options)}
        self.batch = (
            None  # an evaluate.plan.plan_batch.Batch of many cores, where the search set one
        )
        # the search's layouts at ETP = TP (`keys`): the base's folding arguments dropped
        self._comm_base = run.communication_args(
            base.replace(expert_tensor_parallel=None), self.shape
        )

    def _cached(self, key: tuple, build):
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = build()
        return got

    def _batch_of(self, core: Core) -> Batch:
        """The search's batch where it holds the core, else a batch of the core alone (the
        same formulas and floats: each core's figures are its own)."""
        return self._row(core)[0]

    def _row(self, core: Core) -> tuple[Batch, tuple]:
        """The batch that holds the core (`_batch_of`) and the core's figures in it
        (plan_batch.Batch.row)."""
        batch = self.batch
        row = None if batch is None else batch.row(core)
        if row is None:
            batch = self._cached(("alone", core), lambda: Batch(self, [core]))
            row = batch.row(core)
        return batch, row

    # the layout's scenario --------------------------------------------------------------
    def scenario(
        self, core: Core, rc: Recompute, zero: int = 1, schedule: Schedule | None = None
    ) -> Scenario:
        """The base scenario with the layout's keys (not resolved again; the derived values
        set as resolve derives them)."""
        if schedule is not None:
            return self.base.relaid(**self.keys(core, rc, zero, schedule))
        return self._cached(
            ("scenario", core, rc, zero),
            lambda: self.base.relaid(**self.keys(core, rc, zero, Schedule("1f1b"))),
        )

    def keys(self, core: Core, rc: Recompute, zero: int, schedule: Schedule) -> dict[str, Any]:
        """The scenario keys of a layout, the derived ones with them."""
        fractions = self._fractions(core.pp, rc)
        keys = {
            "tensor_parallel": core.tp,
            "pipeline_parallel": core.pp,
            "context_parallel": core.cp,
            "expert_parallel": core.ep,
            # the search's layouts split the experts by TP (ETP = TP, EP inside DP): it does
            # not search expert_tensor_parallel (MoE parallel folding)
            "expert_tensor_parallel": None,
            "data_parallel": core.dp,
            "micro_batch": core.micro_batch,
            "micro_batches_per_step": core.micro_batches,
            "sequence_parallel": core.sp,
            "fp8": core.fp8,
            "fp8_activations": core.fp8_activations,
            "recompute": rc.policy,
            "recompute_modules": list(rc.modules) if rc.modules is not None else None,
            "recompute_num_layers": rc.num_layers,
            "recompute_method": rc.method or "uniform",
            "selective_recompute_fraction": self._stated(rc),
            "zero_stage": zero,
            "pipeline_schedule": schedule.name,
            "virtual_pipeline": schedule.virtual,
            # recompute_fractions reads the pipeline and the policy alone (cached by them)
            "recompute_weights_fraction": fractions.recompute_weights_fraction,
            "recompute_core_fraction": fractions.recompute_core_fraction,
            "recompute_fraction_from": fractions.recompute_fraction_from,
        }
        return keys

    # step time ------------------------------------------------------------------------------
    def gemm_scenario(self, tp: int, cp: int, ep: int, sp: bool, fp8: str) -> Scenario:
        """The base scenario at the sizes a GEMM table reads (TP, CP, EP, SP, FP8)."""
        return self._cached(
            ("gemm scenario", tp, cp, ep, sp, fp8),
            lambda: self.base.relaid(
                tensor_parallel=tp,
                context_parallel=cp,
                expert_parallel=ep,
                expert_tensor_parallel=None,
                sequence_parallel=sp,
                fp8=fp8,
            ),
        )

    def lower_bound(self, core: Core) -> float:
        """Seconds no layout of this core can beat (plan_batch.stage_bound)."""
        return self._row(core)[1][4]

    def compute(self, core: Core, rc: Recompute, zero: int) -> dict:
        """compute_time.compute's parts, phases and optimizer seconds of the layout: its
        compute without recompute (the ZeRO stage only moves the optimizer's shard: 0 or more)
        and its recompute policy (compute_time.with_recompute)."""

        def build():
            _, row = self._row(core)
            fractions = self._fractions(core.pp, rc)
            return compute_time.with_recompute(
                Batch.compute(row, zero),
                self.recompute_part(core, rc),
                fractions.recompute_core_fraction,
                row[1].get("core_forward", 0.0),
            )

        return self._cached(("compute", core, rc, min(zero, 1)), build)

    def compute_seconds(self, core: Core, rc: Recompute) -> float:
        """The compute parts' sum at ZeRO 1 or more (ZeRO 0's optimizer is longer)."""
        return sum(self.compute(core, rc, 1)["parts"].values())

    def _fractions(self, pp: int, rc: Recompute) -> dict[str, Any]:
        """The recompute keys of a policy as compute_time.recompute_seconds reads them."""

        def build():
            keys = {
                "pipeline_parallel": pp,
                "recompute": rc.policy,
                "recompute_modules": list(rc.modules) if rc.modules is not None else None,
                "recompute_num_layers": rc.num_layers,
                "recompute_method": rc.method or "uniform",
                "selective_recompute_fraction": self._stated(rc),
            }
            got = recompute_fractions({**self.base.values, **keys})
            return SimpleNamespace(
                recompute=rc.policy,
                recompute_modules=keys["recompute_modules"],
                recompute_weights_fraction=got["weights"],
                recompute_core_fraction=got["core"],
                recompute_fraction_from=got["from"],
            )

        return self._cached(("fractions", pp, rc), build)

    def _stated(self, rc: Recompute) -> float | None:
        """The scenario's selective_recompute_fraction, for its own selective policy only."""
        own = rc.policy == self.base.recompute and rc.policy == "selective"
        return self.base.selective_recompute_fraction if own else None

    def recompute_part(self, core: Core, rc: Recompute) -> float:
        """The recompute part of the step (compute_time.recompute_seconds of the core's stage
        sums)."""
        if rc.policy == "none":
            return 0.0
        batch, row = self._row(core)
        return batch.recompute_part(row, rc)

    def _sums(self, core: Core) -> dict[str, float]:
        """The core's compute_time.stage_sums (the recompute policy does not enter them)."""
        return self._row(core)[1][1]

    def floor(self, core: Core, rc: Recompute, share: float, zero: int = 1) -> float:
        """The step without communication at a bubble share (of the compute but the
        optimizer's): a floor on the layout's predicted step (its compute exact: the compute
        without recompute and the recompute part)."""
        stage, busy = self._floor_parts(core, rc, zero)
        return stage + share * busy

    def _floor_parts(self, core: Core, rc: Recompute, zero: int) -> tuple[float, float]:
        """(the step's compute, that without the optimizer) of `floor`."""
        batch, row = self._row(core)
        return batch.floor_parts(row, rc, zero)

    def exposed(self, core: Core, rc: Recompute, zero: int) -> float:
        """The communication the overlap rules leave exposed (run.comm's exposed_seconds)."""

        def build():
            computed = self.compute(core, rc, zero)
            shared = compute_time.shared_expert_seconds(self._sums(core))
            phases = run.hiding_compute(computed["phases"], shared)
            got, fixed = communication.exposed(phases, **self.comm_args(core, rc, zero))
            # what no compute hides and no ZeRO stage changes (`fixed`, the collectives outside
            # DP that may not hide): a floor for the core's others
            floor_key = ("unhidden", core, rc.policy == "full")
            self._cache[floor_key] = max(self._cache.get(floor_key, 0.0), fixed)
            return got

        return self._cached(("exposed", core, rc, zero), build)

    def comm_args(self, core: Core, rc: Recompute, zero: int) -> dict[str, Any]:
        """run.communication_args of the layout's scenario (at any schedule: it reads none),
        from the base scenario's with the layout's keys."""
        return {
            **self._comm_base,
            "dp": core.dp,
            "tp": core.tp,
            "pp": core.pp,
            "cp": core.cp,
            "ep": core.ep,
            "sp": core.sp,
            "zero_stage": zero,
            "micro_batch": core.micro_batch,
            "micro_batches": max(1, math.ceil(core.micro_batches - 1e-9)),
            "full_recompute": rc.policy == "full",
        }

    def unhidden(self, core: Core, rc: Recompute) -> float:
        """The exposed seconds of the collectives outside DP that nothing may hide, as far as
        one of the core's layouts has been evaluated (0 before): the same for every ZeRO stage
        and schedule, and for every recompute policy but full (which adds the recompute's:
        full's is no less than the others')."""
        got = self._cache.get(("unhidden", core, False), 0.0)
        if rc.policy == "full":
            got = max(got, self._cache.get(("unhidden", core, True), 0.0))
        return got

    def parts(self, core: Core, rc: Recompute, zero: int, schedule: Schedule) -> dict:
        """step_time.predict's parts of the layout (seconds: step_time.step_parts)."""
        share = plain.bubble_over_compute(
            schedule.name, core.pp, core.micro_batches, schedule.virtual or 1
        )
        return step_time.step_parts(
            self.compute(core, rc, zero), self.exposed(core, rc, zero), share
        )
