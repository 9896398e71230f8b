"""The memory half of the plan's evaluator (evaluate.plan.plan_eval.Evaluator): a layer's saved
tensors grow with the micro batch (derive.activations: every tensor is b x s / CP tokens wide),
so they are built once per (TP, SP, CP, PP, recompute, FP8 storage) at a micro batch of one
(gpu_memory's formulas) and scaled; the peaks of every ZeRO stage and schedule are then
gpu_memory's phases on arrays over the search's cores (evaluate.plan.plan_batch), and the settings
chosen from them.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np

from costmodel.derive import plain
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.plan.plan_space import Core, Recompute, Schedule

ZERO_STAGES = plain.STAGES


class Memory:
    """The memory half of evaluate.plan.plan_eval.Evaluator (its base, shape, params, usable bytes,
    options, ZeRO stages and cache)."""

    def _unscaled(self, core: Core, rc: Recompute) -> tuple[float, float, float, float]:
        """(saved, working set, outside the layers, logits) bytes of the most loaded stage at a
        micro batch of one (cached by TP, SP, CP, PP, the policy and FP8 storage)."""

        def layer_sets():
            one = dataclasses.replace(core, micro_batch=1, pp=1)
            sc = self.scenario(one, rc)
            outside, logits = gpu_memory.outside_layers(self.shape, sc)
            return gpu_memory.layer_saved_sets(self.shape, sc), sum(outside.values()), logits

        def build():
            key = ("layers", core.tp, core.sp, core.cp, rc, core.fp8_activations)
            kinds, outside, logits = self._cached(key, layer_sets)
            stage = SimpleNamespace(  # what _stage_activations reads of a scenario
                pipeline_parallel=core.pp,
                recompute=rc.policy,
                recompute_num_layers=rc.num_layers,
                recompute_method=rc.method or "uniform",
            )
            saved, working = gpu_memory.stage_activations(kinds, stage)
            return saved, working, outside, logits

        key = ("act", core.tp, core.sp, core.cp, core.pp, rc, core.fp8_activations)
        return self._cached(key, build)

    def _activations(self, core: Core, rc: Recompute) -> tuple[float, float, float, float]:
        """`_unscaled` at the core's micro batch (every tensor is b x s / CP tokens wide)."""
        return tuple(x * core.micro_batch for x in self._unscaled(core, rc))

    def peaks(self, core: Core, rc: Recompute, schedules: list[Schedule]) -> np.ndarray:
        """Peak bytes on the most loaded GPU, [ZeRO stage, schedule], of a recompute policy
        among `options` (all of them built at once for the core, once)."""
        return self._every_peak(core)[self.option_index[rc]]

    def _every_peak(self, core: Core) -> np.ndarray:
        got = self._cache.get(("peaks", core))
        if got is None:
            got = self._cache[("peaks", core)] = self._batch_of(core).peaks(core)
        return got

    def peaks_of(self, core: Core, policies: list[int]) -> np.ndarray:
        """[policy, ZeRO stage, schedule] peaks of the policies (indices into `options`)."""
        return self._every_peak(core)[policies]

    def settings(self, core: Core, rc: Recompute, schedules: list[Schedule], shares) -> tuple:
        """(peaks [ZeRO stage][schedule], the schedule chosen per ZeRO stage or -1) of a
        recompute policy: per ZeRO stage, of the schedules that fit, the least bubble share
        (`shares`, the schedules' as the batch computes them), then the least peak (the first
        of equals); every policy at once, once."""
        key = ("settings", core)
        got = self._cache.get(key)
        if got is None:
            got = self._cache[key] = self._batch_of(core).settings(core)
        peaks, choice = got
        index = self.option_index[rc]
        return peaks[index], choice[index]

    def choice(self, every: np.ndarray, shares: np.ndarray) -> np.ndarray:
        """`settings`' choice for [layout, policy, ZeRO stage, schedule] peaks and [layout,
        schedule] bubble shares: [layout, policy, ZeRO stage]."""
        fit = every <= self.usable
        fit[:, :, [z not in self.zero_stages for z in ZERO_STAGES], :] = False
        bubble = shares[:, None, None, :]
        least = np.where(fit, bubble, np.inf).min(axis=3)
        pick = np.where(fit & (bubble == least[..., None]), every, np.inf).argmin(axis=3)
        return np.where(fit.any(axis=3), pick, -1)
