"""The scenario a plan searches: the base scenario on the cluster asked for (`rebase`), and the
inputs a searched layout is resolved again from (`scenario_inputs`, evaluate.plan.plan.as_scenario)."""

from __future__ import annotations

import functools
import gc
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.plan import plan_space
from costmodel.evaluate.simulate import run
from costmodel.inputs import frameworks, hardware, layout, scenario
from costmodel.inputs.scenario import Scenario
from costmodel.inputs.stages import UNEVEN_KEYS


def scenario_inputs(sc: Scenario, changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scenario's keys as inputs to resolve again with `changes` (run.variant's rules: the
    keys a recompute policy does not take dropped; no sequence parallel without TP)."""
    data = {
        key: value
        for key, value in sc.values.items()
        if key in scenario.FIELDS and value is not None and key not in run.NOT_INPUTS
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
    for key in UNEVEN_KEYS:  # the search's even splits
        data.pop(key, None)
    return data


def rebase(sc: Scenario, gpus: int | None = None, gpu: str | None = None) -> Scenario:
    """The scenario on `gpus` GPUs of `gpu` (resolved again; the GPU's peak and bandwidth from
    the table unless the scenario gave them), its own layout kept where it still divides, else
    TP = PP = CP = EP = 1. A null step_time is 1 s (the exposed communication does not depend on
    it), and so is a predicted one (account.fill_step_time's, which may lie outside the bounds of
    a measured step: 5e-9 s for a tiny model). Where TP = PP = CP = 1 leaves a pipeline without
    a micro batch (more GPUs than samples), the first split of the search that gives each one
    (`_fewer_pipelines`)."""
    data = {**scenario_inputs(sc), "name": sc.name}
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
        pass
    plain = {
        "tensor_parallel": 1,
        "pipeline_parallel": 1,
        "context_parallel": 1,
        "expert_parallel": 1,
        "sequence_parallel": False,
        "pipeline_schedule": "1f1b",
    }
    try:
        return scenario.resolve(data=scenario_inputs(sc, {**data, **plain}))
    except CostModelError:
        split = _fewer_pipelines(sc, data["num_gpus"])
        if split is None:
            raise
        return scenario.resolve(data=scenario_inputs(sc, {**data, **plain, **split}))


def own_scenario(sc: Scenario, base: Scenario) -> Scenario:
    """The team's own layout on the plan's cluster as `costmodel report` evaluates it: the base
    scenario (`rebase`) with the scenario's uneven pipeline split, which the base drops (the
    search's layouts split evenly). The base itself where the scenario states no split, where
    the base's pipeline is not the scenario's (rebase changed the layout), or where the split
    does not resolve on this cluster."""
    split = {key: sc.values[key] for key in UNEVEN_KEYS if sc.values.get(key)}
    if not split or base.pipeline_parallel != sc.pipeline_parallel:
        return base
    try:
        return scenario.resolve(data={**scenario_inputs(base), **split, "name": base.name})
    except CostModelError:
        return base


def _fewer_pipelines(sc: Scenario, gpus: int) -> dict[str, int] | None:
    """The first split of the search's (plan_space.gpu_splits) with at least one micro batch per
    pipeline at the scenario's micro batch (inputs.layout's rule, as resolve applies it), as
    keys: the base of a cluster on which every GPU a pipeline of its own (TP = PP = CP = 1)
    leaves some pipelines without a sample; None where there is none."""
    b = sc.micro_batch
    for tp, pp, cp, dp in plan_space.gpu_splits(sc, gpus):
        m = plan_space.micro_batches_of(sc, dp, b)
        if layout.enough_micro_batches(m, sc.batching, sc.samples_per_step, dp):
            return {"tensor_parallel": tp, "pipeline_parallel": pp, "context_parallel": cp}
    return None


#: The most layouts a search ranks (`--top`): each of them is timed and kept with its parts (a
#: search asked for ten million took two minutes and 2 GB), and a ranking of more is not read.
MAX_TOP = 1000


def framework_constraints(framework: str, constraints: dict[str, tuple]) -> dict[str, tuple]:
    """The search's constraints with the framework's (inputs.frameworks.plan_constraints: what
    it does not offer is not searched); where both name a key, the values both allow."""
    out = dict(constraints)
    for key, allowed in frameworks.plan_constraints(framework).items():
        out[key] = tuple(value for value in out.get(key, allowed) if value in allowed)
        if not out[key]:
            asked = ", ".join(str(v) for v in constraints[key])
            raise CostModelError(
                f"framework: {framework!r} is not allowed; expected a framework that offers "
                f"{key} {asked} (it offers {', '.join(str(v) for v in allowed)})"
            )
    return out


def check_top(top: int) -> None:
    """`top` of a search: 1 to MAX_TOP, else one line."""
    if not 1 <= top <= MAX_TOP:
        raise CostModelError(
            f"--top: {top} is not allowed; expected a positive integer up to {MAX_TOP:,} (the "
            "layouts ranked)"
        )


def memory_bounded(function):
    """`function` (a search of `gpus` GPUs, its second argument, default the scenario's), with a
    MemoryError turned into one line: the layout space is bounded before it is built
    (plan_space.SEARCH_BYTES), yet a machine may have less memory than the bound. Raised
    outside the handler, so the line holds nothing of the failed search."""

    @functools.wraps(function)
    def bounded(sc, gpus=None, *args, **kwargs):
        try:
            return function(sc, gpus, *args, **kwargs)
        except MemoryError:
            pass
        gpus = gpus or sc.num_gpus
        raise CostModelError(
            f"num_gpus: {gpus} is not allowed; expected a layout space the search holds in this "
            f"machine's memory: the search of {gpus:,} GPUs ran out of memory"
        )

    return bounded


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
