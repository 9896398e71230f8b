"""One what-if path: a resolved scenario with some keys changed, derived again from it.

A lever, a layout the plan ranks, a point of a sweep: each is the resolved scenario with a few
keys set. `changed` sets them as `--set` would on the scenario's own inputs and runs again only
the steps of resolution they touch, with resolution's own functions (costmodel.inputs.resolution,
costmodel.inputs.layout): the lengths file's statistics, the model config's keys and the model
shape are the resolved scenario's unless a key they rest on changed (no file read again, no
shape built again); each key is checked by the validator (`check_value`), and the layout's rules
(DP from the GPUs, the EP an unset expert_parallel is fitted to, sequence parallelism, CP's
divisibility, the schedules') decide as they decide for `resolve`. The result equals `resolve`
of the changed inputs (tests/inputs/test_what_if.py); a refusal is the validator's one line.

The scenario's inputs are its values: the keys resolution derives (DERIVED_KEYS, an EP or
ce_chunks fitted from the course's, a cross_entropy or recompute_modules filled in, the GPU's
figures, a predicted step) go back to what they were derived from before the steps run again.
Setting a key also clears what it leaves without meaning, as a full resolve would otherwise
refuse it: another recompute policy drops the modules, layer count and method it does not take
and a stated selective_recompute_fraction (it was for the old modules); tensor_parallel 1 turns
sequence parallelism off; a schedule other than interleaved drops virtual_pipeline; another
pipeline_parallel or num_layers drops first_stage_layers and last_stage_layers (the even split).
"""

from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Any, Callable, Mapping

from costmodel.errors import CostModelError
from costmodel.inputs import model_shape, models
from costmodel.inputs.fields import COURSE_WIDTH_KEYS, WIDTH_KEYS, check_value
from costmodel.inputs.layout import ShapeOf, check_layout, memory_settings
from costmodel.inputs.lengths import Lengths
from costmodel.inputs.model_shape import SHAPE_KEYS
from costmodel.inputs.resolution import (
    check_mean_with_lengths,
    check_shape_keys,
    cross_check,
    derive,
    gpu_figures,
    params_from_shape_keys,
    read_lengths,
)
from costmodel.inputs.scenario_layers import (
    checked_layer,
    course_checked,
    merged_layers,
    model_keys_layer,
)

#: A costmodel.inputs.scenario.Scenario (that module imports this one: Scenario.what_if).
Scenario = Any
#: Keys that follow a changed scenario's model shape: (shape, values) -> {key: value}.
Follow = Callable[[Any, Mapping[str, Any]], dict]

#: The keys the model shape rests on (`model_shape.scenario_shape`): a change of one builds
#: the shape again and checks the shape keys against each other.
SHAPE_INPUTS = frozenset(
    (
        "model",
        "count_mtp",
        *WIDTH_KEYS,
        "num_layers",
        "full_attention_every",
        "num_experts",
        "experts_per_token",
        "vocab_size",
        *SHAPE_KEYS,
    )
)
#: Keys that no step of resolution derives anything from (the N of 6ND and the total count:
#: checked, against each other too): those that may `follow` a changed scenario's model shape
#: (a sweep point's, evaluate.sweep.sweep_points), set once the shape is known.
CHECKED_ONLY = frozenset(("activated_params", "total_params"))
#: The keys a lengths file is summarized against (`lengths.summarize`).
LENGTH_INPUTS = frozenset(("sequence_lengths", "seq_len", "samples_per_step"))
#: What a key set to null takes back when a change leaves it without meaning.
_WHAT_EACH_POLICY_TAKES = {
    "recompute_modules": "selective",
    "recompute_num_layers": "full",
    "recompute_method": "full",
}


def changed(sc: Scenario, changes: Mapping[str, Any], follow: Follow | None = None) -> Scenario:
    """The scenario with `changes` (module docstring); CostModelError (one line naming the key,
    its value and what is allowed) where the validator refuses a key or the layout. `follow`:
    keys of CHECKED_ONLY that follow the changed scenario's model shape (a sweep point's
    parameter counts: `follow(shape, values)`), set as changes are once the shape is known."""
    checked = {key: check_value(key, value) for key, value in changes.items()}
    if not checked:
        return sc
    if checked.keys() & {"model", "count_mtp"}:
        return _new_model(sc, checked, follow)
    course = _course()
    values, sources = dict(sc.values), dict(sc.sources)
    given = set(_given(sc))
    _inputs_again(values, sources, given, course, checked)
    for key, value in checked.items():
        values[key], sources[key] = value, "--set"
    given |= checked.keys()
    _cleared(values, sources, given, course, checked)
    shape_changed = bool(checked.keys() & SHAPE_INPUTS)
    if shape_changed:
        _model_keys_again(values, sources, given, course, checked)
    lengths = _lengths_again(sc, values, sources, course, checked.keys())
    shape = None if shape_changed else sc._shape
    return _derived(sc, values, sources, given, lengths, shape, follow)


@functools.cache
def _course() -> Mapping[str, Any]:
    """The course's checked values (course_checked), as a mapping, once per process."""
    return MappingProxyType(dict(course_checked()))


def refusal(
    sc: Scenario, changes: Mapping[str, Any], follow: Follow | None = None
) -> tuple[Scenario | None, str | None]:
    """(`changed`, None), or (None, the validator's one-line reason) where it is refused: a
    sweep's row says why its point is not valid."""
    try:
        return changed(sc, changes, follow), None
    except CostModelError as error:
        return None, str(error)


def _given(sc: Scenario) -> frozenset[str]:
    """The keys the team gave: as resolve recorded them, else (a scenario made otherwise) those
    whose source is a scenario file or --set."""
    if sc.given:
        return sc.given
    kept = _GIVEN_BY_SOURCES.get(id(sc.sources))
    if kept is None or kept[0] is not sc.sources:  # worked out once per scenario (a sweep's base)
        if len(_GIVEN_BY_SOURCES) >= 16:
            _GIVEN_BY_SOURCES.clear()
        found = frozenset(key for key, source in sc.sources.items() if source in ("file", "--set"))
        kept = _GIVEN_BY_SOURCES[id(sc.sources)] = (sc.sources, found)
    return kept[1]


#: _given's, where resolve recorded none: id of the sources -> (the sources, held, the keys)
_GIVEN_BY_SOURCES: dict[int, tuple[Mapping[str, str], frozenset[str]]] = {}


def _inputs_again(values, sources, given, course, checked) -> None:
    """The derived and filled keys put back to what they were derived from, in place."""
    if sources.get("step_time") == "predicted":  # account.fill_step_time's, not an input
        values["step_time"] = None
    for key in ("expert_parallel", "ce_chunks"):  # fitted from the course's, or a dense EP
        if sources.get(key) == "derived" and key not in given:
            values[key], sources[key] = course[key], "course"
    for key in ("cross_entropy", "recompute_modules"):  # a null the framework's, the default
        if sources.get(key) == "derived":
            values[key] = None
    if values["attention_dim_from"] != "attention_dim":
        values["attention_dim"] = None
    if "gpu" in checked:
        for key in ("peak_flops", "hbm_bandwidth"):
            if key not in given:
                values[key] = None
    if checked.keys() & set(WIDTH_KEYS):  # the course's width keys go with a team's width
        for key in COURSE_WIDTH_KEYS:
            if sources.get(key) == "course":
                values[key] = None


def _cleared(values, sources, given, course, checked) -> None:
    """The keys a change leaves without meaning, cleared (module docstring), in place."""

    def clear(key: str) -> None:
        if key not in checked:
            values[key], sources[key] = course[key], "course"
            given.discard(key)

    if checked.keys() & {"recompute", "recompute_modules"}:
        clear("selective_recompute_fraction")  # a stated r was for the old policy's modules
    for key, policy in _WHAT_EACH_POLICY_TAKES.items():
        if values["recompute"] != policy:
            clear(key)
    if values["tensor_parallel"] == 1 and values["sequence_parallel"]:
        if "sequence_parallel" not in checked:
            values["sequence_parallel"], sources["sequence_parallel"] = False, "derived"
    if values["pipeline_schedule"] != "interleaved":
        clear("virtual_pipeline")
    if checked.keys() & {"pipeline_parallel", "num_layers"}:  # the stated split was for the old
        clear("first_stage_layers")
        clear("last_stage_layers")


def _model_keys_again(values, sources, given, course, checked) -> None:
    """After a change of the shape's keys: the model config's keys that resolution set back to
    the course's null (stale beside a structure key the team set) come back where they may
    agree again, and the parameters derived from the shape keys are derived again."""
    for key in ("activated_params", "total_params"):
        if sources.get(key) == "derived":
            values[key], sources[key] = course[key], "course"
    if values.get("model") is None:
        return
    shape, _ = model_shape.loaded_shape(values["model"])  # parsed once per file contents
    for key, value in _model_layer(shape, bool(values["count_mtp"])).items():
        if key not in given and sources.get(key) in ("course", "derived"):
            values[key], sources[key] = value, "model"


def _model_layer(shape, count_mtp: bool) -> Mapping[str, Any]:
    """The keys a model config fills in, checked, once per shape object (loaded_shape gives
    the same one until the file changes; a sweep asks for every point)."""
    key = (id(shape), count_mtp)
    kept = _MODEL_LAYERS.get(key)
    if kept is None or kept[0] is not shape:
        if len(_MODEL_LAYERS) >= 16:  # models of files since changed: let them go
            _MODEL_LAYERS.clear()
        kept = _MODEL_LAYERS[key] = (shape, checked_layer(models.scenario_keys(shape, count_mtp)))
    return kept[1]


#: _model_layer's: (id of the shape, count_mtp) -> (the shape, held: its id stays its own)
_MODEL_LAYERS: dict[tuple[int, bool], tuple[Any, dict[str, Any]]] = {}


def _lengths_again(sc, values, sources, course, keys) -> Lengths | None:
    """The lengths file summarized again where a key it is summarized against changed: the
    lengths read once (the scenario's), the file read only when sequence_lengths names
    another."""
    lengths = sc.lengths
    if not keys & LENGTH_INPUTS:
        return lengths
    if values.get("sequence_lengths") is None:
        if sources.get("mean_tokens_per_sample") == "sequence_lengths":
            values["mean_tokens_per_sample"] = course["mean_tokens_per_sample"]
            sources["mean_tokens_per_sample"] = "course"
        return None
    if lengths is None or lengths.path != str(values["sequence_lengths"]):
        return read_lengths(values, sources)
    again = Lengths(lengths.path, lengths.raw, int(values["seq_len"]), values["samples_per_step"])
    values["mean_tokens_per_sample"] = again.mean
    sources["mean_tokens_per_sample"] = "sequence_lengths"
    return again


def _derived(sc, values, sources, given, lengths, shape, follow=None) -> Scenario:
    """Resolution's steps on the changed inputs (scenario.resolve's order), the shape checks
    only where the shape may have changed (`shape` None) and the model shape built at most
    once; then the keys that `follow` it (`changed`)."""
    gpu_figures(values, sources)
    check_mean_with_lengths(values, given)
    derive(values, sources, lengths)
    if shape is None:
        check_shape_keys(values, sources)
        params_from_shape_keys(values, sources)
    cross_check(values)
    rules = ShapeOf(values, shape)
    check_layout(values, sources, rules)
    memory_settings(values, sources, rules)
    if follow is not None:
        _followed(follow(rules()[0], values), values, sources, given)
    return type(sc).from_values(values, sources, lengths, given).with_shape(rules.built)


def _followed(keys: dict[str, Any], values, sources, given) -> None:
    """Keys that follow the shape, set as changes (checked, source --set, given), in place:
    keys of CHECKED_ONLY, that nothing else is derived from."""
    if not keys.keys() <= CHECKED_ONLY:
        raise ValueError(f"follow: {sorted(keys)} are not all keys of CHECKED_ONLY")
    for key, value in keys.items():
        values[key], sources[key] = check_value(key, value), "--set"
        given.add(key)
    if keys:
        cross_check(values)


def _new_model(sc: Scenario, checked: dict[str, Any], follow: Follow | None = None) -> Scenario:
    """A change of `model` or `count_mtp`: the course, the new model's keys and the team's keys
    (those it gave, with the changes) merged again, every step run; the lengths not read again
    unless sequence_lengths names another file."""
    given = _given(sc) - {"sequence_lengths"}
    user = {key: sc.values[key] for key in given}
    if sc.sources.get("step_time") == "predicted" and "step_time" in user:
        user["step_time"] = None  # account.fill_step_time's, not an input
    user.update(checked)
    user.setdefault("name", sc.name)
    sources = {key: sc.sources.get(key, "--set") for key in user}
    sources.update(dict.fromkeys(checked, "--set"))
    model_layer, mtp_layers = model_keys_layer(user)
    values = merged_layers(user, model_layer, sources, named_after=None)
    if sc.sequence_lengths is not None and "sequence_lengths" not in checked:
        values["sequence_lengths"] = sc.sequence_lengths
    values["num_mtp_layers"], sources["num_mtp_layers"] = mtp_layers, "derived"
    course = _course()
    keys = {*checked, "seq_len"}  # the lengths summarized again against the merged keys
    lengths = _lengths_again(sc, values, sources, course, keys)
    return _derived(sc, values, sources, set(user), lengths, None, follow)
