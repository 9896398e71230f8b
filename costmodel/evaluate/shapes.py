"""The model shape behind a scenario: its model config, or the course's model when the scenario's
structure keys agree with it. The functions live in the inputs layer
(`costmodel.inputs.model_shape`), where the scenario's validation checks its layout against the
same shape; they are named here for the evaluate layer."""

from __future__ import annotations

from costmodel.inputs.model_shape import (
    STRUCTURE_KEYS,
    matching_shape,
    scenario_shape,
    shape_from_keys,
    tensor_parallel_widths,
)

__all__ = [
    "STRUCTURE_KEYS",
    "matching_shape",
    "scenario_shape",
    "shape_from_keys",
    "tensor_parallel_widths",
]
