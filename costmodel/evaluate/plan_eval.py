"""The figures of a searched layout, fast: the memory model's peak (evaluate.gpu_memory) and the
step-time model's parts (evaluate.step_time), from pieces each computed once for the sizes they
depend on.

- Memory: a layer's saved tensors grow with the micro batch (derive.activations: every tensor
  is b x s / CP tokens wide), so they are built once per (TP, SP, CP, recompute, FP8 storage) at
  a micro batch of one and scaled; the model states are linear in the parameters a GPU holds
  (derive.model_states), so one GPU's states are the parameters times the bytes per parameter
  of the ZeRO stage over DP x CP. The peak then follows gpu_memory.most_loaded's phases for the
  first and the last pipeline stage, for every layout of a batch at once (NumPy).
- Step time: compute_time.compute and the communication model on the layout's scenario, as
  step_time.predict adds them (one compute per layout's compute, one communication per ZeRO
  stage), and a lower bound (the weight GEMMs and the attention core of the most loaded stage,
  and the schedule's least bubble) that lets the search skip layouts that cannot rank.
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from costmodel.derive import activations as act
from costmodel.derive import numeric, plain
from costmodel.evaluate import compute_time, gpu_memory, run
from costmodel.evaluate.communication import Compute
from costmodel.evaluate.plan_space import Core, Recompute, Schedule, recompute_options
from costmodel.inputs import efficiency
from costmodel.inputs.layout import recompute_fractions
from costmodel.inputs.scenario import Scenario

ZERO_STAGES = (0, 1, 2, 3)
#: What compute_time._optimizer_bytes reads of a scenario (its ZeRO stage apart).
_OPTIMIZER_KEYS = (
    "tensor_parallel",
    "pipeline_parallel",
    "expert_parallel",
    "data_parallel",
    "context_parallel",
    "total_params",
)


class Evaluator:
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
        self._cache: dict[tuple, Any] = {}
        self.options = recompute_options(base)

    def _cached(self, key: tuple, build):
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = build()
        return got

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

    # memory -------------------------------------------------------------------------------
    def _activations(self, core: Core, rc: Recompute) -> tuple[float, float, float, float]:
        """(saved, working set, outside the layers, logits) bytes of the most loaded stage at
        the core's micro batch: built at a micro batch of one, scaled."""

        def layer_sets():
            one = Core(**{**core.__dict__, "micro_batch": 1, "pp": 1})
            sc = self.scenario(one, rc)
            outside, logits = gpu_memory._outside(self.shape, sc)
            return gpu_memory._layer_sets(self.shape, sc), sum(outside.values()), logits

        def build():
            key = ("layers", core.tp, core.sp, core.cp, rc, core.fp8_activations)
            kinds, outside, logits = self._cached(key, layer_sets)
            stage = SimpleNamespace(  # what _stage_activations reads of a scenario
                pipeline_parallel=core.pp,
                recompute=rc.policy,
                recompute_num_layers=rc.num_layers,
                recompute_method=rc.method or "uniform",
            )
            saved, working = gpu_memory._stage_activations(kinds, stage)
            return saved, working, outside, logits

        key = ("act", core.tp, core.sp, core.cp, core.pp, rc, core.fp8_activations)
        return tuple(x * core.micro_batch for x in self._cached(key, build))

    def _state_bytes(self, zero: int, ranks: int) -> float:
        """Bytes per parameter of the model states at a ZeRO stage over `ranks` ranks."""
        key = ("states", zero, ranks)
        return self._cached(
            key,
            lambda: sum(
                plain.model_state_bytes(1.0, zero, ranks, grad_bytes=self.base.grad_bytes).values()
            ),
        )

    def peaks(self, core: Core, rc: Recompute, schedules: list[Schedule]) -> np.ndarray:
        """Peak bytes on the most loaded GPU, [ZeRO stage, schedule], of a recompute policy
        among `options` (all of them built at once for the core, once)."""
        key = ("peaks", core)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._peaks(core, schedules)
        return got[self.options.index(rc)]

    def peaks_of(self, core: Core, policies: list[int]) -> np.ndarray:
        """[policy, ZeRO stage, schedule] peaks of the policies (indices into `options`), as
        built by `settings` or `peaks` (one of which ran for the core)."""
        return self._cache[("peaks", core)][policies]

    def settings(self, core: Core, rc: Recompute, schedules: list[Schedule], shares) -> tuple:
        """(peaks [ZeRO stage][schedule], the schedule chosen per ZeRO stage or -1) of a
        recompute policy: per ZeRO stage, of the schedules that fit, the least bubble share
        (`shares`), then the least peak (the first of equals); every policy at once, once."""
        key = ("settings", core)
        got = self._cache.get(key)
        if got is None:
            every = self._cache.get(("peaks", core))
            if every is None:
                every = self._cache[("peaks", core)] = self._peaks(core, schedules)
            fit = every <= self.usable
            fit[:, [z not in self.zero_stages for z in ZERO_STAGES], :] = False
            bubble = np.asarray(shares, dtype=float)
            least = np.where(fit, bubble, np.inf).min(axis=2)
            pick = np.where(fit & (bubble == least[..., None]), every, np.inf).argmin(axis=2)
            choice = np.where(fit.any(axis=2), pick, -1)
            got = self._cache[key] = (every.tolist(), choice.tolist())
        peaks, choice = got
        index = self.options.index(rc)
        return peaks[index], choice[index]

    def least_peak(self, core: Core, policies: list[Recompute], schedules) -> float:
        """The least peak of the core over `policies`, every ZeRO stage and schedule: at ZeRO
        3 and the schedule that holds the fewest micro batches (the peak grows with the states
        and the micro batches in flight), as `_peaks` computes it, for one point."""
        pp, ep = core.pp, core.ep
        gradients, experts, first, last = self._stage_params(core)
        per_step = max(1, int(core.micro_batches))
        flight = min(act.in_flight_micro_batches(pp, per_step, s.virtual or 1) for s in schedules)
        ranks = core.dp * core.cp
        most = max(self.zero_stages)  # the most sharding searched
        dense, expert = self._state_bytes(most, ranks), self._state_bytes(most, max(ranks // ep, 1))
        least = math.inf
        for rc in policies:
            saved, working, outside, logits = self._activations(core, rc)
            peak = 0.0
            for on_gpu, in_flight, has_head in ((first, flight, pp == 1), (last, 1.0, True)):
                states = (on_gpu - experts) * dense + experts * expert
                forward = states + (saved + (outside if has_head else 0.0)) * in_flight
                top = max(forward + working + gradients, states)
                peak = max(peak, max(top, forward + logits) if has_head else top)
            least = min(least, peak)
        return least

    def _stage_params(self, core: Core) -> tuple[float, float, float, float]:
        """The pieces of a stage's peak both `_least_peak` and `_peaks` use: the bytes of one
        layer's activation gradient in flight, the expert parameters per GPU, and the
        parameters on the first and the last pipeline stage's GPU."""
        shape, params = self.shape, self.params
        tp, pp, ep = core.tp, core.pp, core.ep
        tokens = core.micro_batch * self.base.seq_len / core.cp / (tp if core.sp else 1)
        gradients = 2 * 2 * tokens * shape.hidden_size
        head = 0 if shape.tie_word_embeddings and pp == 1 else params["lm_head"]
        experts = params["experts"] / (tp * pp * ep)
        layer_params = params["layers"] / (tp * pp) + experts
        first = layer_params + params["embedding"] / tp + (head / tp if pp == 1 else 0)
        last = layer_params + head / tp
        return gradients, experts, first, last

    def _peaks(self, core: Core, schedules: list[Schedule]) -> np.ndarray:
        """[recompute policy, ZeRO stage, schedule]: the phases of gpu_memory.most_loaded."""
        pp, ep = core.pp, core.ep
        pieces = np.array([self._activations(core, rc) for rc in self.options])
        saved, working, outside, logits = (pieces[:, i, None, None] for i in range(4))
        gradients, experts, first, last = self._stage_params(core)
        per_step = max(1, int(core.micro_batches))
        flight = np.array(
            [act.in_flight_micro_batches(pp, per_step, s.virtual or 1) for s in schedules]
        )
        ranks = core.dp * core.cp
        dense_bytes = np.array([self._state_bytes(z, ranks) for z in ZERO_STAGES])[:, None]
        expert_bytes = np.array([self._state_bytes(z, max(ranks // ep, 1)) for z in ZERO_STAGES])[
            :, None
        ]

        def stage(on_gpu: float, in_flight, has_head: bool) -> np.ndarray:
            states = (on_gpu - experts) * dense_bytes + experts * expert_bytes
            forward = states + (saved + (outside if has_head else 0.0)) * in_flight
            top = np.maximum(forward + working + gradients, states)
            return np.maximum(top, forward + logits) if has_head else top

        return np.maximum(stage(first, flight, pp == 1), stage(last, 1.0, True))

    # step time ------------------------------------------------------------------------------
    def gemm_rows(self, core: Core) -> dict[str, float]:
        """compute_time._gemm_rows of the core (what they read of a layout: TP, CP, EP, SP,
        FP8 and the micro batch)."""
        split = (core.tp, core.cp, core.ep, core.sp, core.fp8)

        def build():
            sc = self._cached(
                ("gemm scenario", *split),
                lambda: self.base.relaid(
                    tensor_parallel=core.tp,
                    context_parallel=core.cp,
                    expert_parallel=core.ep,
                    sequence_parallel=core.sp,
                    fp8=core.fp8,
                ),
            )
            return compute_time._gemm_rows(sc, self.eff, self.shape, core.micro_batch)

        return self._cached(("gemm", *split, core.micro_batch), build)

    def lower_bound(self, core: Core) -> float:
        """Seconds no layout of this core can beat: the most loaded stage holds ceil(L / PP)
        layers, at least their share of every layer's weight GEMMs (3 x the forward) and
        attention core, the lm_head's GEMMs, and the least bubble of the schedules."""
        gemm = self.gemm_rows(core)
        m = core.micro_batches
        kinds = self.kinds
        peak = self.base.peak_flops
        kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[self.base.attention_kernel])
        flash = self.base.attention_kernel == "flash"
        e_f = self.eff["attention_flash_forward" if flash else "attention_eager"].value
        e_b = self.eff["attention_flash_backward" if flash else "attention_eager"].value
        core_seconds = self.core_flops_per_layer / (core.dp * core.cp * core.tp) / peak
        core_seconds *= 1 / e_f + kappa / e_b
        total = 0.0
        for mixer, mlp, count in kinds:
            rows = compute_time.MIXER_ROWS[mixer] + compute_time.MLP_ROWS[mlp]
            layer = 3 * m * sum(gemm.get(key, 0.0) for key in rows)
            total += count * (layer + (core_seconds if mixer == "attention" else 0.0))
        stage = math.ceil(self.layers / core.pp) / self.layers * total
        stage += 3 * m * sum(gemm.get(key, 0.0) for key in compute_time.OUTSIDE_ROWS)
        return stage

    def compute(self, core: Core, rc: Recompute, zero: int) -> dict:
        """compute_time.compute of the layout (the ZeRO stage only moves the optimizer's
        shard: 0 or more)."""

        def build():
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
        return compute_time.recompute_seconds(self._fractions(core.pp, rc), self._sums(core))

    def _staged(self, core: Core) -> tuple:
        """The core's compute_time.stage_sums (the recompute policy does not enter them)."""

        def build():
            sc = self.scenario(core, Recompute("none"))
            return compute_time.stage_sums(sc, self.shape, self.eff, self.gemm_rows(core))

        return self._cached(("staged", core), build)

    def _sums(self, core: Core) -> dict[str, float]:
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
            sc = self.scenario(core, rc, zero)
            phases = Compute(**computed["phases"], basis=run.COMPUTE_BASIS)
            got = run.communication_of(sc, self.shape, phases)
            # what no compute hides and no ZeRO stage changes: a floor for the core's others
            fixed = sum(
                c.exposed_seconds
                for c in got.collectives
                if c.hidden_behind is None and c.parallelism != "DP"
            )
            floor_key = ("unhidden", core, rc.policy == "full")
            self._cache[floor_key] = max(self._cache.get(floor_key, 0.0), fixed)
            return got.exposed_seconds

        return self._cached(("exposed", core, rc, zero), build)

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


@functools.cache
def least_bubble(pp: int, micro_batches: float, schedules: tuple[Schedule, ...]) -> float:
    """The least bubble share over the schedules searched for a pipeline."""
    return min(
        plain.bubble_over_compute(s.name, pp, micro_batches, s.virtual or 1) for s in schedules
    )
