"""The layers `costmodel.inputs.scenario.resolve` stacks, course < model < file < `--set`: the
team's keys from a scenario file (its paths made absolute, relative to the file), `data` and
the overrides, each checked; the keys of the model `model:` names; the course's values with the
model's and the team's over them, and where each came from."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.inputs import course_scenario
from costmodel.inputs.fields import COURSE_WIDTH_KEYS, WIDTH_KEYS, check_value


def model_reference(reference: str, base: str | Path) -> str:
    """A model path given relative to `base` (a scenario file's folder), made absolute; a
    preset name or an absolute path is returned as it is."""
    path = Path(reference)
    try:
        if not path.is_absolute() and (Path(base) / path).exists():
            return str((Path(base) / path).resolve())
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        pass
    return reference


def relative_to_file(layer: dict[str, Any], base: str | Path) -> dict[str, Any]:
    """Make a scenario file's paths absolute, in place: `model` (a path, not a preset name) and
    `sequence_lengths` are relative to the file's folder `base`."""
    if isinstance(layer.get("model"), str):
        layer["model"] = model_reference(layer["model"], base)
    if isinstance(layer.get("sequence_lengths"), str):
        layer["sequence_lengths"] = os.path.abspath(os.path.join(base, layer["sequence_lengths"]))
    return layer


def course_values() -> dict[str, Any]:
    """The course's scenario file (costmodel/inputs/course_scenario.py, generated from
    costmodel/inputs/scenarios/course.yaml): a new mapping, with new lists, at each call."""
    return course_scenario.values()


@functools.cache
def course_checked() -> tuple[tuple[str, Any], ...]:
    """The course's values, each checked (check_value), once per process."""
    return tuple((key, check_value(key, value)) for key, value in course_values().items())


def model_keys(reference: str, count_mtp: bool) -> tuple[dict[str, Any], int]:
    """The scenario keys a model fills in, and its MTP layers counted (count_mtp)."""
    from costmodel.inputs import models  # only when a scenario names a model
    from costmodel.inputs.model_shape import loaded_shape

    shape, _ = loaded_shape(reference)  # parsed once per file contents
    if count_mtp and not shape.num_mtp_layers:
        raise CostModelError(
            f"count_mtp: true is not allowed; model {shown(shape.name or reference, 200)} has no "
            "multi-token-prediction layers (num_nextn_predict_layers, mtp_num_hidden_layers)"
        )
    return models.scenario_keys(shape, count_mtp), shape.num_mtp_layers if count_mtp else 0


def shown_name(text: str, limit: int = 120) -> str:
    """A scenario name made from its keys, cut at `limit` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def user_layers(file, overrides, data) -> tuple[dict[str, Any], dict[str, str]]:
    """The team's keys, each checked, the file (or `data`) then the overrides, and where each
    came from."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if file is not None:
        from costmodel.inputs.scenario_yaml import load_yaml  # PyYAML: only for a file

        layer = load_yaml(file)
        relative_to_file(layer, Path(file).parent)
        layers.append(("file", layer))
    if data:
        layers.append(("file", dict(data)))
    if overrides:
        layers.append(("--set", dict(overrides)))
    user: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, layer in layers:
        for key, value in layer.items():
            user[key] = check_value(key, value)
            sources[key] = origin
    return user, sources


def model_keys_layer(user: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The keys of the model named by `model:` (each checked) and its MTP layers counted."""
    model_ref = user.get("model")
    count_mtp = bool(user.get("count_mtp"))
    if count_mtp and not model_ref:
        raise CostModelError(
            "count_mtp: true is not allowed without model; expected a model config with "
            "multi-token-prediction layers (set model: to a config.json or a preset)"
        )
    mtp_layers = 0
    try:
        if model_ref:
            model_layer, mtp_layers = model_keys(model_ref, count_mtp)
            model_layer = checked_layer(model_layer)
        else:
            model_layer = {}
    except CostModelError as error:  # say which model a refused shape key comes from
        message = str(error)
        raise (
            error
            if message.startswith(("model config ", "count_mtp: "))
            else CostModelError(f"model {shown(model_ref, 200)}: {message}")
        ) from None
    return model_layer, mtp_layers


def merged_layers(
    user: dict[str, Any],
    model_layer: dict[str, Any],
    sources: dict[str, str],
    named_after: dict[str, Any] | None,
) -> dict[str, Any]:
    """The course's values, the model's keys over them, the team's over those (`sources` filled
    in); a width key the team or model sets drops the course's other width keys. `named_after`:
    the overrides when they are all the team set (the name says what changed)."""
    values = {key: list(v) if isinstance(v, list) else v for key, v in course_checked()}
    values.setdefault("model", None)
    for key in values:
        sources.setdefault(key, "course")
    # A team that sets any width key gets none of the course's other width keys.
    team_width = set(WIDTH_KEYS) & (set(user) | set(model_layer))
    if team_width:
        for key in COURSE_WIDTH_KEYS:
            values[key] = None
    if "name" not in user and (user or model_layer):
        # the course's scenario with a few keys set (--set, a notebook's overrides) is named
        # after what changed; a scenario file without a name is the team's
        if named_after:
            changed = ", ".join(f"{key}={value}" for key, value in named_after.items())
            values["name"] = shown_name(f"课程场景 + {changed}")
        else:
            values["name"] = "Team scenario"
    for key, value in model_layer.items():
        values[key] = value
        if key not in user:  # a key the team sets is the team's (its source said "model")
            sources[key] = "model"
    values.update(user)
    return values


def checked_layer(layer: dict[str, Any]) -> dict[str, Any]:
    return {key: check_value(key, value) for key, value in layer.items()}
