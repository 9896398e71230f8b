"""The linear-attention (gated DeltaNet) core of one step: the term 6ND leaves out for a hybrid
model, linear in s (derive.linear_attention), counted in every "with attention" figure.

The layers are the scenario's (num_layers minus its full-attention layers); the head widths come
from the scenario's model config (inputs.model_shape.matching_shape: its `model:`, or the course's
model when the scenario's structure keys agree with it). Without widths the term is reported as
unknown (null figures and a note), never guessed.
"""

from __future__ import annotations

from typing import Any

from costmodel.derive import plain
from costmodel.inputs.assumptions import assumed
from costmodel.inputs.model_shape import matching_shape
from costmodel.inputs.scenario import Scenario, as_scenario


def linear_layers(sc: Scenario) -> int:
    """Gated-DeltaNet layers of a scenario: the layers that are not full attention (MTP layers,
    full attention each, aside)."""
    sc = as_scenario(sc)
    full = sc.num_full_attention_layers - sc.num_mtp_layers
    return sc.num_layers - full


def linear_attention(scenario: Scenario) -> dict[str, Any] | None:
    """The linear-attention object of the account: None for a model without such layers; else
    its layers, chunk size, widths' source and model FLOPs per step (None when the widths are
    unknown). The account adds the hardware FLOPs and the share."""
    layers = linear_layers(scenario)
    if layers <= 0:
        return None
    chunk = assumed("linear_attention_chunk")
    shape = matching_shape(scenario.values)
    if shape is None or not shape.num_linear_attention_layers:
        return {
            "layers": layers,
            "chunk_size": chunk,
            "widths_from": None,
            "flops_per_step": None,
            "hardware_flops_per_step": None,
            "share": None,
            "note": "not counted: no model config gives the gated-DeltaNet head widths "
            "(set model: to the config.json of the run)",
        }
    widths = {
        "n_v": shape.linear_num_value_heads,
        "n_k": shape.linear_num_key_heads,
        "d_k": shape.linear_key_head_dim,
        "d_v": shape.linear_value_head_dim,
        "C": chunk,
        "L_linear": layers,
        "D": scenario.tokens_per_step,
    }
    return {
        "layers": layers,
        "chunk_size": chunk,
        "widths_from": shape.name,
        "flops_per_step": plain.linear_core_training(widths),
        "hardware_flops_per_step": None,
        "share": None,
        "note": "chunked gated-delta rule, forward + 2 x forward (derive.linear_attention); "
        "conv1d and elementwise work not counted",
    }
