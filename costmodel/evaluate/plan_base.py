"""The scenario a plan searches: the base scenario on the cluster asked for (`rebase`), and the
inputs a searched layout is resolved again from (`_inputs`, evaluate.plan.as_scenario)."""

from __future__ import annotations

import functools
import gc
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate import run
from costmodel.inputs import hardware, scenario
from costmodel.inputs.scenario import Scenario


def _inputs(sc: Scenario, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scenario's keys as inputs to resolve again with `changes` (run.variant's rules: the
    keys a recompute policy does not take dropped; no sequence parallel without TP)."""
    data = {
        key: value
        for key, value in sc.values.items()
        if key in scenario.FIELDS and value is not None and key not in run._NOT_INPUTS
    }
    if sc.sequence_lengths is not None:  # the lengths file again (its path as resolved)
        data["sequence_lengths"] = sc.sequence_lengths
        data.pop("mean_tokens_per_sample", None)
    data.update(changes or {})
    data = {key: value for key, value in data.items() if value is not None}
    policy = data["recompute"]
    if policy != sc.recompute or policy != "selective":
        data.pop("selective_recompute_fraction", None)
    run.drop_unused_inputs(data)
    if data.get("pipeline_schedule") != "interleaved":
        data.pop("virtual_pipeline", None)
    return data


def rebase(sc: Scenario, gpus: int | None = None, gpu: str | None = None) -> Scenario:
    """The scenario on `gpus` GPUs of `gpu` (resolved again; the GPU's peak and bandwidth from
    the table unless the scenario gave them), its own layout kept where it still divides, else
    TP = PP = CP = EP = 1. A null step_time is 1 s (the exposed communication does not depend on
    it), and so is a predicted one (account.fill_step_time's, which may lie outside the bounds of
    a measured step: 5e-9 s for a tiny model)."""
    data = {**_inputs(sc), "name": sc.name}
    if gpus is not None:
        data["num_gpus"] = gpus
    if gpu is not None:
        name = hardware.lookup(gpu)
        if name is None:
            allowed = ", ".join(hardware.GPUS)
            raise CostModelError(f"--gpu: {gpu!r} is not allowed; expected one of {allowed}")
        data["gpu"] = name.name
        for key in ("peak_flops", "hbm_bandwidth"):
            if sc.sources.get(key) not in ("file", "--set"):
                data.pop(key, None)
    if sc.sources.get("step_time") == "predicted":  # account.fill_step_time's, not an input
        data.pop("step_time", None)
    data.setdefault("step_time", 1.0)
    try:
        return scenario.resolve(data=data)
    except CostModelError:
        plain = {
            "tensor_parallel": 1,
            "pipeline_parallel": 1,
            "context_parallel": 1,
            "expert_parallel": 1,
            "sequence_parallel": False,
            "pipeline_schedule": "1f1b",
        }
        return scenario.resolve(data=_inputs(sc, {**data, **plain}))


def paused_gc(function):
    """`function` run with Python's cyclic garbage collector paused (resumed after, if it was
    on). The plan's search builds a few hundred thousand small objects that it keeps to its end
    (its caches, freed by reference counting when the plan goes: they hold no reference cycle,
    tests/evaluate/test_plan.py checks it); the collector's full passes over them found nothing
    to free and took a fifth to a third of a large search's time."""

    @functools.wraps(function)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was:
                gc.enable()

    return paused
