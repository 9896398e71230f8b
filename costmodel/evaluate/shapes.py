"""The model shape behind a scenario: its model config, or the course's model when the scenario's
structure keys agree with it."""

from __future__ import annotations

from typing import Any, Mapping

from costmodel.inputs import models
from costmodel.inputs.assumptions import COURSE_MODEL

#: Scenario keys that must agree with a config for the config to describe the scenario's model.
STRUCTURE_KEYS = ("hidden_size", "num_layers", "num_experts", "experts_per_token", "vocab_size")


def matching_shape(values: Mapping[str, Any], default_model: str = COURSE_MODEL):
    """The ModelShape of the scenario's model: the config named by `model:` if any, else the
    course's model; None when that config's shape (STRUCTURE_KEYS) is not the scenario's."""
    shape = models.load_shape(values.get("model") or default_model)
    keys = models.scenario_keys(shape)
    if all(values.get(key) == keys[key] for key in STRUCTURE_KEYS):
        return shape
    return None
