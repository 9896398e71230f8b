"""The memory model's peak of a searched layout, fast (evaluate.plan_eval.Evaluator's memory
half): a layer's saved tensors grow with the micro batch (derive.activations: every tensor is
b x s / CP tokens wide), so they are built once per (TP, SP, CP, PP, recompute, FP8 storage) at
a micro batch of one and scaled; the model states are linear in the parameters a GPU holds
(derive.model_states), so one GPU's states are the parameters times the bytes per parameter of
the ZeRO stage over DP x CP. The peak then follows gpu_memory.most_loaded's phases for the first
and the last pipeline stage.

`stage_params` and `stage_peak` are elementwise: one layout's floats here, arrays over many
layouts in evaluate.plan_batch (NumPy's `maximum` and `where`), the same floats either way.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np

from costmodel.derive import activations as act
from costmodel.derive import plain
from costmodel.evaluate import gpu_memory
from costmodel.evaluate.plan_space import Core, Recompute, Schedule

ZERO_STAGES = plain.STAGES


def choose(condition, yes, no):
    """`yes if condition else no` (NumPy's `where` for arrays of layouts)."""
    return yes if condition else no


def stage_params(ev, tp, pp, cp, ep, micro_batch, sp, where=choose):
    """The pieces of a stage's peak: the bytes of one layer's activation gradient in flight, the
    expert parameters per GPU, and the parameters on the first and the last pipeline stage's
    GPU (`ev`: the Evaluator; the sizes one layout's, or arrays with NumPy's `where`)."""
    shape, params = ev.shape, ev.params
    tokens = micro_batch * ev.base.seq_len / cp / where(sp, tp, 1)
    gradients = 2 * 2 * tokens * shape.hidden_size
    head = where(shape.tie_word_embeddings and pp == 1, 0, params["lm_head"])
    experts = params["experts"] / (tp * pp * ep)
    layer_params = params["layers"] / (tp * pp) + experts
    first = layer_params + params["embedding"] / tp + where(pp == 1, head / tp, 0)
    last = layer_params + head / tp
    return gradients, experts, first, last


def stage_peak(
    on_gpu, pieces, params, states_bytes, in_flight, has_head, maximum=max, where=choose
):
    """The peak of a pipeline stage's GPU over gpu_memory.most_loaded's phases: its model states
    (`states_bytes`: dense and expert bytes per parameter), the saved tensors of the micro
    batches `in_flight` (with the embedding's and the loss's where it holds the head), the
    working set and the activation gradient of the backward, the logits."""
    saved, working, outside, logits = pieces
    gradients, experts = params
    dense_bytes, expert_bytes = states_bytes
    states = (on_gpu - experts) * dense_bytes + experts * expert_bytes
    forward = states + (saved + where(has_head, outside, 0.0)) * in_flight
    top = maximum(forward + working + gradients, states)
    return where(has_head, maximum(top, forward + logits), top)


class Memory:
    """The memory half of evaluate.plan_eval.Evaluator (its base, shape, params, usable bytes,
    options, ZeRO stages and cache)."""

    def _unscaled(self, core: Core, rc: Recompute) -> tuple[float, float, float, float]:
        """(saved, working set, outside the layers, logits) bytes of the most loaded stage at a
        micro batch of one (cached by TP, SP, CP, PP, the policy and FP8 storage)."""

        def layer_sets():
            one = dataclasses.replace(core, micro_batch=1, pp=1)
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
        return self._cached(key, build)

    def _activations(self, core: Core, rc: Recompute) -> tuple[float, float, float, float]:
        """`_unscaled` at the core's micro batch (every tensor is b x s / CP tokens wide)."""
        return tuple(x * core.micro_batch for x in self._unscaled(core, rc))

    def _state_bytes(self, zero: int, ranks: int) -> float:
        """Bytes per parameter of the model states at a ZeRO stage over `ranks` ranks."""
        key = ("states", zero, ranks)
        return self._cached(
            key,
            lambda: sum(
                plain.model_state_bytes(1.0, zero, ranks, grad_bytes=self.base.grad_bytes).values()
            ),
        )

    def _stage_params(self, core: Core) -> tuple[float, float, float, float]:
        return stage_params(self, core.tp, core.pp, core.cp, core.ep, core.micro_batch, core.sp)

    def peaks(self, core: Core, rc: Recompute, schedules: list[Schedule]) -> np.ndarray:
        """Peak bytes on the most loaded GPU, [ZeRO stage, schedule], of a recompute policy
        among `options` (all of them built at once for the core, once)."""
        return self._every_peak(core, schedules)[self.option_index[rc]]

    def _every_peak(self, core: Core, schedules) -> np.ndarray:
        got = self._cache.get(("peaks", core))
        if got is None:
            if self.batch is not None and core in self.batch.index:
                got = self.batch.peaks(core)  # a view of the batch's array
            else:
                got = self._peaks(core, schedules)
            self._cache[("peaks", core)] = got
        return got

    def peaks_of(self, core: Core, policies: list[int]) -> np.ndarray:
        """[policy, ZeRO stage, schedule] peaks of the policies (indices into `options`)."""
        return self._every_peak(core, None)[policies]

    def settings(self, core: Core, rc: Recompute, schedules: list[Schedule], shares) -> tuple:
        """(peaks [ZeRO stage][schedule], the schedule chosen per ZeRO stage or -1) of a
        recompute policy: per ZeRO stage, of the schedules that fit, the least bubble share
        (`shares`), then the least peak (the first of equals); every policy at once, once."""
        key = ("settings", core)
        got = self._cache.get(key)
        if got is None:
            if self.batch is not None and core in self.batch.index:
                got = self.batch.settings(core)
            else:
                every = self._every_peak(core, schedules)
                choice = self.choice(every[None], np.asarray(shares, dtype=float)[None])[0]
                got = (every.tolist(), choice.tolist())
            self._cache[key] = got
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
        states = self._state_bytes(most, ranks), self._state_bytes(most, max(ranks // ep, 1))
        least = math.inf
        for rc in policies:
            pieces = self._activations(core, rc)
            peak = max(
                0.0,
                stage_peak(first, pieces, (gradients, experts), states, flight, pp == 1),
                stage_peak(last, pieces, (gradients, experts), states, 1.0, True),
            )
            least = min(least, peak)
        return least

    def _peaks(self, core: Core, schedules: list[Schedule]) -> np.ndarray:
        """[recompute policy, ZeRO stage, schedule]: the phases of gpu_memory.most_loaded."""
        pp, ep = core.pp, core.ep
        pieces = np.array([self._activations(core, rc) for rc in self.options])
        pieces = tuple(pieces[:, i, None, None] for i in range(4))
        gradients, experts, first, last = self._stage_params(core)
        per_step = max(1, int(core.micro_batches))
        flight = np.array(
            [act.in_flight_micro_batches(pp, per_step, s.virtual or 1) for s in schedules]
        )
        ranks = core.dp * core.cp
        states = (
            np.array([self._state_bytes(z, ranks) for z in ZERO_STAGES])[:, None],
            np.array([self._state_bytes(z, max(ranks // ep, 1)) for z in ZERO_STAGES])[:, None],
        )
        params = (gradients, experts)
        return np.maximum(
            stage_peak(first, pieces, params, states, flight, pp == 1, np.maximum),
            stage_peak(last, pieces, params, states, 1.0, True, np.maximum),
        )
