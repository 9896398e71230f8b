"""The figures of a searched layout, fast: the memory model's peak (evaluate.plan_memory) and
the step-time model's parts (evaluate.step_time), from pieces each computed once for the sizes
they depend on.

- Step time: compute_time.compute and the communication model on the layout's scenario, as
  step_time.predict adds them (one compute per layout's compute, one communication per ZeRO
  stage), and a lower bound (the weight GEMMs and the attention core of the most loaded stage,
  and the schedule's least bubble) that lets the search skip layouts that cannot rank.
- Many layouts at once: where the search set `batch` (evaluate.plan_batch), the compute without
  recompute, the recompute parts, the floors and the peaks of its cores are read from it (the
  same floats, computed over arrays of cores); other layouts are computed one by one here.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any

from costmodel.derive import numeric, plain
from costmodel.evaluate import communication, compute_time, gpu_memory, run
from costmodel.evaluate.communication import Compute
from costmodel.evaluate.linear import linear_attention
from costmodel.evaluate.plan_memory import ZERO_STAGES, Memory
from costmodel.evaluate.plan_space import Core, Recompute, Schedule, recompute_options
from costmodel.inputs import efficiency
from costmodel.inputs.layout import recompute_fractions
from costmodel.inputs.scenario import Scenario

__all__ = ["ZERO_STAGES", "Evaluator", "least_bubble", "stage_bound"]
#: What compute_time._optimizer_bytes reads of a scenario (its ZeRO stage apart).
_OPTIMIZER_KEYS = (
    "tensor_parallel",
    "pipeline_parallel",
    "expert_parallel",
    "data_parallel",
    "context_parallel",
    "total_params",
)


class Evaluator(Memory):
    """The pieces of one base scenario's layouts, cached by what each depends on."""

    def __init__(self, base: Scenario, zero_stages: tuple[int, ...] = ZERO_STAGES):
        self.base = base
        self.zero_stages = zero_stages  # those searched (a framework may lack some)
        self.shape = base.shape
        self.params = gpu_memory._params(self.shape, base)
        self.usable = gpu_memory.capacity(base)["usable"]
        self.eff = efficiency.efficiencies(base.values)
        self.kinds = compute_time._layer_kinds(self.shape, base)
        self.layers = sum(n for _, _, n in self.kinds)
        core = compute_time.core_forward_flops(base, counted=False)
        self.core_flops_per_layer = core / max(base.num_full_attention_layers, 1)
        lin = linear_attention(base)  # the layout does not enter it
        self.linear_flops_per_layer = (
            lin["flops_per_step"] / 3 / lin["layers"] if lin and lin["flops_per_step"] else None
        )
        self._cache: dict[tuple, Any] = {}
        self.options = recompute_options(base)
        self.option_index = {rc: i for i, rc in enumerate(self.options)}
        self.batch = None  # an evaluate.plan_batch.Batch of many cores, where the search set one
        self._comm_base = run.communication_args(base, self.shape)

    def _cached(self, key: tuple, build):
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = build()
        return got

    def _batched(self, core: Core) -> tuple | None:
        """The core's figures in the batch (plan_batch.Batch.row), or None."""
        return None if self.batch is None else self.batch.row(core)

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
                sequence_parallel=sp,
                fp8=fp8,
            ),
        )

    def gemm_rows(self, core: Core) -> dict[str, float]:
        """compute_time._gemm_rows of the core (what they read of a layout: TP, CP, EP, SP,
        FP8 and the micro batch)."""
        split = (core.tp, core.cp, core.ep, core.sp, core.fp8)
        return self._cached(
            ("gemm", *split, core.micro_batch),
            lambda: compute_time._gemm_rows(
                self.gemm_scenario(*split), self.eff, self.shape, core.micro_batch
            ),
        )

    def lower_bound(self, core: Core) -> float:
        """Seconds no layout of this core can beat (`stage_bound`)."""
        share = core.dp * core.cp * core.tp
        return stage_bound(self, self.gemm_rows(core), core.micro_batches, share, core.pp)

    def compute(self, core: Core, rc: Recompute, zero: int) -> dict:
        """compute_time.compute of the layout (the ZeRO stage only moves the optimizer's
        shard: 0 or more)."""

        def build():
            row = self._batched(core)
            if row is not None:
                return self.batch.compute(row, min(zero, 1))
            if zero == 0:
                return self._zero0(core)
            sc = self.scenario(core, rc, zero)
            return compute_time.compute(sc, self.shape, self.gemm_rows(core), self._staged(core))

        def derived():  # the compute without recompute, its recompute part added
            computed = self.compute(core, Recompute("none"), zero)
            part = self.recompute_part(core, rc)
            parts = {**computed["parts"], "recompute": part}
            phases = dict(computed["phases"])
            phases["backward"] = (
                sum(parts.values()) - computed["optimizer_seconds"] - phases["forward"]
            )
            r_core = self._fractions(core.pp, rc).recompute_core_fraction
            phases["attention"] += r_core * self._sums(core).get("core_forward", 0.0)
            return {**computed, "parts": parts, "phases": phases}

        key = ("compute", core, rc, min(zero, 1))
        return self._cached(key, build if rc.policy == "none" else derived)

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
        """The recompute part of the step (compute_time.recompute_seconds) from the core's
        stage sums, without a compute of its own."""

        if rc.policy == "none":
            return 0.0
        row = self._batched(core)
        if row is not None:
            return self.batch.recompute_part(row, rc)
        return compute_time.recompute_seconds(self._fractions(core.pp, rc), self._sums(core))

    def _staged(self, core: Core) -> tuple:
        """The core's compute_time.stage_sums (the recompute policy does not enter them)."""

        def build():
            sc = self.scenario(core, Recompute("none"))
            return compute_time.stage_sums(sc, self.shape, self.eff, self.gemm_rows(core))

        return self._cached(("staged", core), build)

    def _sums(self, core: Core) -> dict[str, float]:
        row = self._batched(core)
        if row is not None:
            return row[1]
        return self._staged(core)[0]

    def _zero0(self, core: Core) -> dict:
        """compute_time.compute without recompute at ZeRO 0: ZeRO 1's with the optimizer on the
        whole copy of the stage's parameters (compute_time._optimizer_bytes)."""
        computed = self.compute(core, Recompute("none"), 1)
        sc = self.scenario(core, Recompute("none"))
        bandwidth = sc.hbm_bandwidth * self.eff["hbm"].value
        zero0 = SimpleNamespace(**{key: getattr(sc, key) for key in _OPTIMIZER_KEYS}, zero_stage=0)
        extra = compute_time._optimizer_bytes(zero0, self.shape) / bandwidth
        extra -= computed["optimizer_seconds"]
        parts = {**computed["parts"], "memory_bound": computed["parts"]["memory_bound"] + extra}
        return {
            **computed,
            "parts": parts,
            "optimizer_seconds": computed["optimizer_seconds"] + extra,
        }

    def floor(self, core: Core, rc: Recompute, share: float, zero: int = 1) -> float:
        """The step without communication at a bubble share (of the compute but the
        optimizer's): a floor on the layout's predicted step (its compute exact: the compute
        without recompute and the recompute part)."""
        stage, busy = self._floor_parts(core, rc, zero)
        return stage + share * busy

    def _floor_parts(self, core: Core, rc: Recompute, zero: int) -> tuple[float, float]:
        """(the step's compute, that without the optimizer) of `floor`, cached."""
        row = self._batched(core)
        if row is not None:
            return self.batch.floor_parts(row, rc, zero)
        key = ("floor", core, rc, min(zero, 1))
        got = self._cache.get(key)
        if got is None:
            computed = self.compute(core, Recompute("none"), zero)
            stage = sum(computed["parts"].values()) + self.recompute_part(core, rc)
            got = self._cache[key] = (stage, stage - computed["optimizer_seconds"])
        return got

    def exposed(self, core: Core, rc: Recompute, zero: int) -> float:
        """The communication the overlap rules leave exposed (run.comm's exposed_seconds)."""

        def build():
            computed = self.compute(core, rc, zero)
            phases = Compute(**computed["phases"], basis=run.COMPUTE_BASIS)
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
        """step_time.predict's parts of the layout (seconds)."""
        computed = self.compute(core, rc, zero)
        parts = dict(computed["parts"])
        parts["communication_exposed"] = self.exposed(core, rc, zero)
        stage = sum(computed["parts"].values()) - computed["optimizer_seconds"]
        share = plain.bubble_over_compute(
            schedule.name, core.pp, core.micro_batches, schedule.virtual or 1
        )
        parts["pipeline_bubble"] = share * stage
        return parts


def stage_bound(ev: Evaluator, gemm, micro_batches, share, pp):
    """Seconds no layout of a core can beat: the most loaded stage holds ceil(L / PP) layers, at
    least their share of every layer's weight GEMMs (3 x the forward) and attention core, the
    lm_head's GEMMs (`gemm`: the core's GEMM rows; `share`: DP x CP x TP). Elementwise: one
    core's floats, or arrays over cores (evaluate.plan_batch), the same floats."""
    peak = ev.base.peak_flops
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[ev.base.attention_kernel])
    flash = ev.base.attention_kernel == "flash"
    e_f = ev.eff["attention_flash_forward" if flash else "attention_eager"].value
    e_b = ev.eff["attention_flash_backward" if flash else "attention_eager"].value
    core_seconds = ev.core_flops_per_layer / share / peak
    core_seconds = core_seconds * (1 / e_f + kappa / e_b)
    total = 0.0
    for mixer, mlp, count in ev.kinds:
        rows = compute_time.MIXER_ROWS[mixer] + compute_time.MLP_ROWS[mlp]
        layer = 3 * micro_batches * sum(gemm.get(key, 0.0) for key in rows)
        total += count * (layer + (core_seconds if mixer == "attention" else 0.0))
    stage = -(-ev.layers // pp) / ev.layers * total
    return stage + 3 * micro_batches * sum(gemm.get(key, 0.0) for key in compute_time.OUTSIDE_ROWS)


@functools.cache
def least_bubble(pp: int, micro_batches: float, schedules: tuple[Schedule, ...]) -> float:
    """The least bubble share over the schedules searched for a pipeline."""
    return min(
        plain.bubble_over_compute(s.name, pp, micro_batches, s.virtual or 1) for s in schedules
    )
