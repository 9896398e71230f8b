"""The linear-attention (gated DeltaNet) core of one step: the term 6ND leaves out for a hybrid
model, linear in s (derive.linear_attention), counted in every "with attention" figure.

The layers are the scenario's (num_layers minus its full-attention layers); the head widths come
from the scenario's model config (inputs.model_shape.matching_shape: its `model:`, or the course's
model when the scenario's structure keys agree with it). Without widths the term is reported as
unknown (null figures and a note), never guessed.

The same closed forms per token and per model (`linear_attention_flops_per_token`,
`linear_attention_conv_flops_per_token`, `linear_attention_training_flops`) serve the FLOP
cross-check and the Megatron-LM comparison; every one reads the widths through `widths`.
"""

from __future__ import annotations

from typing import Any

from costmodel.derive import numeric, plain
from costmodel.derive.plain import exact_integer
from costmodel.errors import CostModelError
from costmodel.inputs.assumptions import assumed
from costmodel.inputs.model_shape import matching_shape
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape


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
    values = widths(shape, chunk, layers) | {"D": scenario.tokens_per_step}
    return {
        "layers": layers,
        "chunk_size": chunk,
        "widths_from": shape.name,
        "flops_per_step": plain.linear_core_training(values),
        "hardware_flops_per_step": None,
        "share": None,
        "note": "chunked gated-delta rule, forward + 2 x forward (derive.linear_attention); "
        "conv1d and elementwise work not counted",
    }


# ---------------------------------------------------------------------------------------------
# per token and per model: the closed forms of costmodel.derive.linear_attention through their
# generated numeric forms (no SymPy)


def widths(shape: ModelShape, chunk_size: int = 1, layers: int | None = None) -> dict:
    """The values of derive.linear_attention's symbols for a model config: its head counts and
    widths, conv kernel, the chunk size and the gated-DeltaNet layers (the config's, unless
    `layers` is given)."""
    return {
        "n_v": shape.linear_num_value_heads,
        "n_k": shape.linear_num_key_heads,
        "d_k": shape.linear_key_head_dim,
        "d_v": shape.linear_value_head_dim,
        "K_conv": shape.linear_conv_kernel_dim,
        "C": chunk_size,
        "L_linear": shape.num_linear_attention_layers if layers is None else layers,
    }


def linear_attention_flops_per_token(shape: ModelShape, chunk_size: int | None = None) -> int:
    """Forward FLOPs per token of one gated-DeltaNet layer's core (state read/update), chunked form.

    This is the linear-attention analogue of the s² attention term: it is NOT in 6·N·D (the
    in/out projections are; see ``activated_params``) and it grows linearly in s.

    Formula (``costmodel.derive.linear_attention.core_forward_per_token``, derived there from the
    chunk's GEMMs), per token and per value head (query/key heads are repeated to the
    ``linear_num_value_heads`` value heads), with chunk size C, key dim dk, value dim dv::

        4·C·dk          (β·K)Kᵀ and QKᵀ inside each chunk (two C×dk×C matmuls per chunk)
      + 2·C·dv          intra-chunk attention (C×C) times the new values (C×dv)
      + 6·dk·dv         per chunk: read the state twice (decayed keys·S and Q·S, C×dk×dv each)
                        and write it once (Kᵀ·V_new, dk×C×dv)
      + (C-1)·(dk+dv)   two unit-lower-triangular solves (C×C) with dv and dk right-hand sides
                        (the UT transform), C·(C-1)·d FLOPs each per chunk

    times ``linear_num_value_heads``; C defaults to the assumption ``linear_attention_chunk``
    (costmodel.inputs.assumptions). Qwen3.6-35B-A3B (32 heads, dk = dv = 128, C = 64): 32 x
    (32768 + 16384 + 98304 + 16128) = 5,234,688 FLOPs per token per layer.

    Assumptions: the chunked algorithm of the reference implementation
    (``torch_chunk_gated_delta_rule`` in transformers, same structure as the FLA kernels); the
    sequence length is a multiple of C (the kernel pads to one, and the padding costs the same);
    elementwise work (decays, gating, L2 norms, exp) is not counted, like softmax for full
    attention; the depthwise causal conv1d before the core is a separate small term
    (``linear_attention_conv_flops_per_token``). Training (forward + backward) takes 3x this, the
    same convention as for matmuls (``linear_attention_training_flops``).
    """
    if shape.num_linear_attention_layers == 0:
        raise CostModelError(
            f"model '{shape.name or shape.model_type}' has no linear-attention layers; "
            "linear_attention_flops_per_token applies to qwen3_next and qwen3_5_moe"
        )
    if chunk_size is None:  # the assumption's (costmodel.inputs.assumptions)
        chunk_size = assumed("linear_attention_chunk")
    c = int(chunk_size)
    if c < 1:
        raise CostModelError(f"chunk_size has value {chunk_size!r}; expected an integer >= 1")
    return exact_integer(numeric.LINEAR["core_forward_per_token"], widths(shape, c))


def linear_attention_conv_flops_per_token(shape: ModelShape) -> int:
    """Forward FLOPs per token of one gated-DeltaNet layer's depthwise causal conv1d.

    ``2 · conv_dim · kernel`` with ``conv_dim = 2·key_heads·dk + value_heads·dv`` (one multiply-add
    per channel and tap; ``costmodel.derive.linear_attention.conv_forward_per_token``). Its weights
    are in ``norms_and_other``, not in ``activated_params``. Returns 0 for models without
    linear-attention layers.
    """
    if shape.num_linear_attention_layers == 0:
        return 0
    return exact_integer(numeric.LINEAR["conv_forward_per_token"], widths(shape))


def linear_attention_training_flops(
    shape: ModelShape, tokens: int, chunk_size: int | None = None
) -> int:
    """Forward+backward FLOPs of all gated-DeltaNet cores for ``tokens`` tokens:
    ``3 · linear_attention_flops_per_token · tokens · num_linear_attention_layers`` (0 for a model
    without linear-attention layers; ``costmodel.derive.linear_attention.core_training``)."""
    if shape.num_linear_attention_layers == 0:
        return 0
    if chunk_size is None:  # the assumption's (costmodel.inputs.assumptions)
        chunk_size = assumed("linear_attention_chunk")
    linear_attention_flops_per_token(shape, chunk_size)  # the same checks
    values = widths(shape, int(chunk_size)) | {"D": int(tokens)}
    return exact_integer(numeric.LINEAR["core_training"], values)
