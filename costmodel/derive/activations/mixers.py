"""The token mixer of a layer, what it saves: attention (MHA/GQA), MLA and gated DeltaNet
(flash-linear-attention's chunked kernel, or transformers' PyTorch fallbacks)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from costmodel.derive.activations.ops import attention_core_saved, rmsnorm_saved
from costmodel.derive.activations.tables import (
    FP32,
    LINEAR,
    LINEAR_KERNELS,
    MASK,
    Saved,
    check,
    is_sympy,
)
from costmodel.derive.plain import head_width


@dataclass(frozen=True)
class _Options:
    """How the layer's operations save (see ``layer_saved``)."""

    kernel: str
    elementwise: str
    softmax_fp32: bool
    dropout: bool
    beta: object
    norm_offset: bool = False
    output_gate: bool = False
    fused_qkv: bool = False
    output_copy: bool = False


def _core(o: _Options, tokens, squares, heads, kv_heads, qk_dim, v_dim, input_module=""):
    return attention_core_saved(
        o.kernel,
        tokens,
        squares,
        heads,
        kv_heads,
        qk_dim,
        v_dim,
        o.beta,
        fused_qkv=o.fused_qkv,
        output_copy=o.output_copy,
        softmax_fp32=o.softmax_fp32,
        dropout=o.dropout,
        input_module=input_module,
    )


def _attention_output(o: _Options, tokens, hidden, heads, v_dim) -> list[Saved]:
    saved = [Saved("attn.output", o.beta * tokens * heads * v_dim, True, "", LINEAR)]
    if o.output_gate:  # Qwen3-Next: output * sigmoid(gate) keeps both factors, then o_proj's input
        width = o.beta * tokens * heads * v_dim
        saved[0] = Saved("attn.output", width, True)
        saved += [
            Saved("attn.gate", width, True),
            Saved("attn.gated_output", width, True, "", LINEAR),
        ]
    if o.dropout:  # the dropout after the output projection (full hidden width)
        saved.append(Saved("attn.output_dropout_mask", MASK * tokens * hidden, False))
    return saved


def _attention(o: _Options, tokens, squares, hidden, heads, kv_heads, head_dim, v_dim, qk_norm):
    beta, ew = o.beta, o.elementwise
    saved = [Saved("attn.qkv_input", beta * tokens * hidden, False, "layernorm", LINEAR)]
    if qk_norm:  # Qwen3: RMSNorm over each query and key head before RoPE
        for name, n in (("q", heads), ("k", kv_heads)):
            saved += rmsnorm_saved(
                f"attn.{name}_norm",
                tokens * n,
                head_dim,
                beta,
                ew,
                split=True,
                offset=o.norm_offset,
            )
    core, inputs = _core(o, tokens, squares, heads, kv_heads, head_dim, v_dim)
    return saved + core + _attention_output(o, tokens, hidden, heads, v_dim), inputs


def _mla(o: _Options, tokens, squares, hidden, heads, qk_dim, v_dim, q_rank, kv_rank):
    beta, ew, up = o.beta, o.elementwise, "mla_up_proj"
    saved = [Saved("attn.qkv_input", beta * tokens * hidden, False, "layernorm", LINEAR)]
    if q_rank:
        saved += rmsnorm_saved("attn.q_a_norm", tokens, q_rank, beta, ew)
        saved.append(Saved("attn.q_b_input", beta * tokens * q_rank, False, up, LINEAR))
    saved += rmsnorm_saved("attn.kv_a_norm", tokens, kv_rank, beta, ew)
    saved.append(Saved("attn.kv_b_input", beta * tokens * kv_rank, False, up, LINEAR))
    # the decompressed keys and values have one head per query head, rebuilt by mla_up_proj
    core, inputs = _core(o, tokens, squares, heads, heads, qk_dim, v_dim, input_module=up)
    return saved + core + _attention_output(o, tokens, hidden, heads, v_dim), inputs


def _gated_deltanet(
    tokens,
    hidden,
    key_heads,
    value_heads,
    key_dim,
    value_dim,
    chunk,
    beta,
    kernel="fla",
    ew="fused",
    sequences=1,
    conv_kernel=4,
):
    """The chunked gated-delta-rule's tensors are the layer's core (``core_attn``)."""
    check("linear_attention_kernel", kernel, LINEAR_KERNELS)
    core = "core_attn"
    conv_width = 2 * key_heads * key_dim + value_heads * value_dim
    rows = tokens * value_heads
    saved = [
        Saved("gdn.in_proj_input", beta * tokens * hidden, False, "layernorm", LINEAR),
        Saved("gdn.conv_input", beta * tokens * conv_width, True),
    ]
    if kernel == "fla":
        saved += [
            Saved("gdn.q", beta * rows * key_dim, True, core),
            Saved("gdn.k", beta * rows * key_dim, True, core),
            Saved("gdn.q_rstd", FP32 * rows, True, core),
            Saved("gdn.k_rstd", FP32 * rows, True, core),
            Saved("gdn.v", beta * rows * value_dim, True, core),
            Saved("gdn.decay_input", FP32 * rows, True, core),
            Saved("gdn.decay", FP32 * rows, True, core),
            Saved("gdn.g", FP32 * rows, True, core),
            Saved("gdn.beta", beta * rows, True, core),
            Saved("gdn.A", beta * rows * chunk, True, core),
        ]
    else:
        saved += _delta_rule_torch(
            sequences, tokens, value_heads, key_dim, value_dim, chunk, conv_width, conv_kernel, beta
        )
    if ew == "fused":
        saved += [
            Saved("gdn.norm_input", beta * rows * value_dim, True),
            Saved("gdn.norm_gate", beta * rows * value_dim, True),
            Saved("gdn.norm_rstd", FP32 * rows, True),
        ]
    else:  # transformers' gated RMSNorm composite: normalise in fp32, weight, times silu(z) in fp32
        saved += [
            Saved("gdn.norm_input_fp32", FP32 * rows * value_dim, True),
            Saved("gdn.norm_rstd", FP32 * rows, True),
            Saved("gdn.norm_normalized", beta * rows * value_dim, True),
            Saved("gdn.norm_weighted", beta * rows * value_dim, True),
            Saved("gdn.norm_gate_fp32", FP32 * rows * value_dim, True),
            Saved("gdn.norm_gate_silu", FP32 * rows * value_dim, True),
        ]
    saved.append(Saved("gdn.output", beta * rows * value_dim, True, "", LINEAR))
    return saved


def _ceil(x):
    if is_sympy(x) and x.free_symbols:
        return sys.modules["sympy"].ceiling(x)
    return math.ceil(x)


def _min(a, b):
    symbolic = any(is_sympy(x) and x.free_symbols for x in (a, b))
    return sys.modules["sympy"].Min(a, b) if symbolic else min(a, b)


def _delta_rule_torch(
    sequences, tokens, value_heads, key_dim, value_dim, chunk, conv_width, conv_kernel, beta
):
    """What transformers' PyTorch fallbacks keep (``causal_conv1d_fn`` and
    ``torch_chunk_gated_delta_rule`` of ``models/qwen3_next/modeling_qwen3_next.py``, run when
    neither the causal-conv1d nor the flash-linear-attention package is installed): the SiLU's
    input over the padded convolution (s + K - 1 positions), then everything in fp32 at the
    value-head count, each sequence padded to whole chunks (P rows): the L2 norm's inputs and
    inverse norms, the padded q, k, v and beta, k·beta, five C x C matrices per chunk and head
    (the pairwise decays, k·beta·kᵀ and q·kᵀ before the decay, the UT system A and the
    intra-chunk attention) and the C x C boolean mask, the two triangular solves' results, the
    decayed q and k, the corrected values of each chunk and one recurrent state (d_k x d_v) per
    chunk read."""
    rows = tokens * value_heads
    length = tokens / sequences
    chunks = _ceil(length / chunk)  # per sequence
    padded = sequences * chunks * chunk * value_heads  # P
    # the last chunk's state update is dropped unread: the decayed q and k, the decay of the
    # keys to the chunk's end and the per-chunk state decay are kept only with two chunks or more
    later = _min(1, chunks - 1)
    return [
        Saved("gdn.conv_output", beta * sequences * (length + conv_kernel - 1) * conv_width, True),
        Saved("gdn.beta", beta * rows, True, "core_attn"),
        Saved("gdn.decay_input", FP32 * rows, True, "core_attn"),
        Saved("gdn.decay", FP32 * rows, True, "core_attn"),
        Saved("gdn.a_exp", FP32 * 2 * value_heads, True, "core_attn"),
        Saved("gdn.q_l2_input", FP32 * rows * key_dim, True, "core_attn"),
        Saved("gdn.k_l2_input", FP32 * rows * key_dim, True, "core_attn"),
        Saved("gdn.q_rstd", FP32 * rows, True, "core_attn"),
        Saved("gdn.k_rstd", FP32 * rows, True, "core_attn"),
        Saved("gdn.q", FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.k", FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.v", FP32 * padded * value_dim, True, "core_attn"),
        Saved("gdn.beta_fp32", FP32 * padded, True, "core_attn"),
        Saved("gdn.k_beta", FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.decay_mask", chunk * chunk, False, "core_attn"),  # bool
        Saved("gdn.pairwise_decay", FP32 * padded * chunk, True, "core_attn"),
        Saved("gdn.kk", FP32 * padded * chunk, True, "core_attn"),
        Saved("gdn.qk", FP32 * padded * chunk, True, "core_attn"),
        Saved("gdn.A", FP32 * padded * chunk, True, "core_attn"),
        Saved("gdn.intra", FP32 * padded * chunk, True, "core_attn"),
        Saved("gdn.new_values", FP32 * padded * value_dim, True, "core_attn"),
        Saved("gdn.k_cumdecay", FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.decay_exp", FP32 * (2 + later) * padded, True, "core_attn"),
        Saved("gdn.chunk_decay", later * FP32 * padded / chunk, True, "core_attn"),
        Saved("gdn.q_decayed", later * FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.k_decayed", later * FP32 * padded * key_dim, True, "core_attn"),
        Saved("gdn.v_new", FP32 * padded * value_dim, True, "core_attn"),
        Saved("gdn.states", FP32 * padded / chunk * key_dim * value_dim, True, "core_attn"),
    ]


def mixer_tensors(kind: str, x, tokens, squares) -> tuple[list[Saved], list[Saved]]:
    """The token mixer's saved tensors and the attention core's inputs (empty for gated
    DeltaNet); ``x``: the layer's options (``layer._Layer``)."""
    o = _Options(
        x.attention_kernel,
        x.elementwise,
        x.softmax_fp32,
        x.dropout,
        x.bytes_per_element,
        norm_offset=x.norm_offset,
        output_gate=x.output_gate,
        fused_qkv=x.fused_qkv,
        output_copy=x.attention_output_copy,
    )
    if kind == "attention":
        kv = x.heads if x.kv_heads is None else x.kv_heads
        hd = math.floor(head_width(x.hidden, x.heads)) if x.head_dim is None else x.head_dim
        vd = hd if x.v_head_dim is None else x.v_head_dim
        return _attention(o, tokens, squares, x.hidden, x.heads, kv, hd, vd, x.qk_norm)
    if kind == "mla":
        ranks = (x.q_lora_rank, x.kv_lora_rank)
        return _mla(o, tokens, squares, x.hidden, x.heads, x.head_dim, x.v_head_dim, *ranks)
    if x.chunk is None:  # the FLOP count's chunk, given by the caller: no second default here
        raise ValueError("chunk: the gated DeltaNet's chunk size is required")
    mixer = _gated_deltanet(
        tokens,
        x.hidden,
        x.linear_key_heads,
        x.linear_value_heads,
        x.linear_key_head_dim,
        x.linear_value_head_dim,
        x.chunk,
        x.bytes_per_element,
        kernel=x.linear_attention_kernel,
        ew=x.elementwise,
        sequences=x.b,
        conv_kernel=x.conv_kernel,
    )
    return mixer, []
