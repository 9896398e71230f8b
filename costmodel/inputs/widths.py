"""Widths a scenario's keys do not carry (the width of one routed expert, of a dense FFN): from
the scenario's model config when it names one, else from the course's model or rule."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.inputs import models
from costmodel.inputs.assumptions import COURSE_MODEL


@dataclass(frozen=True)
class Width:
    value: int
    source: str  # "config" (the scenario's model), "preset" or "rule"
    detail: str  # where the figure comes from, in English


def expert_width(model: str | None = None) -> Width:
    """Width of one routed expert (moe_intermediate_size): from the scenario's model config if it
    names one with experts, else from the course model's preset (an assumption)."""
    if model:
        shape = models.load_shape(model)
        if shape.num_experts and shape.moe_intermediate_size:
            return Width(
                shape.moe_intermediate_size, "config", f"moe_intermediate_size of {shape.name}"
            )
    shape = models.load_shape(COURSE_MODEL)
    return Width(shape.moe_intermediate_size, "preset", f"moe_intermediate_size of {COURSE_MODEL}")


def dense_ffn_width(hidden: int, model: str | None = None) -> Width:
    """Width of a dense FFN: intermediate_size of the scenario's model config if it has a dense
    one, else the course's rule 4 x hidden."""
    if model:
        shape = models.load_shape(model)
        if shape.intermediate_size and not shape.num_experts:
            return Width(shape.intermediate_size, "config", f"intermediate_size of {shape.name}")
    return Width(4 * int(hidden), "rule", "4 x hidden_size (the course's dense FFN)")
