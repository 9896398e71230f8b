"""Megatron-LM's FLOPs-per-step formula, re-implemented from the formula, on a costmodel shape.

Megatron-LM logs "throughput per GPU (TFLOP/s/GPU)" as ``num_floating_point_operations(args,
batch_size, ...) / (iteration_time * 1e12 * world_size)``. This module re-derives that count
(our own code, written from the formula) for a ``costmodel.inputs.models.ModelShape`` so that
the course's MFU can be set against what a Megatron log would print.

Source read
-----------
NVIDIA/Megatron-LM, branch ``main`` at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553
(2026-08-22), ``megatron/training/training.py``, ``num_floating_point_operations`` (lines
802-1388 there; last change to the file: da5a81d491d6af1c18e52995a556e30ef84d4052):
https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64ddf34856e74b24714e3bedb2f5a39553/megatron/training/training.py#L802-L1388
The packed-sequence (THD) arguments came in with 5e4fc931ba8b8558445dc3ff6eccf07e5fa92a5c
(2026-05-21, "enable PP for SFT THD", #4103); before it the function took ``(args,
batch_size)`` only and always used ``batch_size * seq_length`` and ``batch_size *
seq_length**2``. The gated-DeltaNet branch and the attention output gate came in with
20d66d5c7b0e1724dd0ebaaab4253105a4de7190 (2026-01-17, Qwen3-Next support, #1989).

Conventions of that formula (what this module reproduces)
---------------------------------------------------------
(g) Factor 3 for forward + backward: every GEMM is run three times (forward, dgrad, wgrad),
    times 2 for a multiply-add. There is NO recompute factor: activation recomputation
    (``--recompute-granularity``) is not counted, so the logged figure is model FLOPs (MFU-like),
    not hardware FLOPs. The attention core also gets 3x (not FlashAttention's 3.5x).
(b) Tokens: every token-linear term (projections, MLP/MoE, MTP, logits) is multiplied by
    ``total_real_tokens_in_batch``. Unpacked (BSHD) runs leave it ``None`` and it defaults to
    ``batch_size * seq_length``: the padded slots count as tokens. Packed (THD) runs pass the
    real token count, ``sum(L_i)`` over the REAL ``cu_seqlens`` (not ``cu_seqlens_padded``), so
    neither CP-alignment nor end-of-sequence padding is counted.
(a) Attention core (QK^T and A V) of each standard-attention layer:
    ``3 * 2 * (num_heads * kv_channels) / 2 * 2 * seqlen_squared_sum`` = ``6 * q_width * sum
    s_i^2``, i.e. forward ``4 s^2 d`` halved for the causal mask (1/2), times 3. BSHD:
    ``seqlen_squared_sum = batch_size * seq_length**2`` (the full padded length, as if every
    sample filled it). THD: ``sum(L_i**2)`` over the real sub-sequence lengths of cu_seqlens.
    MLA: ``3 * 2 * (n * (qk_head_dim + qk_pos_emb_head_dim) / 2 + n * v_head_dim / 2)`` per unit
    of ``sum s_i^2`` = costmodel's causal convention with d = n * (qk + v) / 2.
    Attention projections: ``h * (q + k + v + gate) + q * h`` with q = n * kv_channels,
    k = v = num_query_groups * kv_channels, gate = q when ``attention_output_gate``.
    MLA projections: q lora (``q_lora_rank * (h + n * (qk + rope) + 1)``, the "+1" a q norm) or
    ``h * n * (qk + rope)`` without q lora, ``kv_lora_rank * (h + n * (qk + v) + 1)`` (again "+1"
    for the kv norm), ``h * rope`` (k rope), and the output ``n * v * h``.
(c) MLP / MoE: dense layers ``h * ffn_hidden_size * 3`` (SwiGLU; 2 without), MoE layers
    ``h * moe_ffn_hidden_size * topk * 3`` plus the shared expert ``h *
    moe_shared_expert_intermediate_size * 3``. The ROUTER (``num_experts x h`` per MoE layer) is
    NOT counted, nor the shared-expert gate (``1 x h``), nor any norm.
(d) MTP (``--mtp-num-layers``): each MTP layer is counted as one more transformer layer: its MLP
    is MoE if the LAST decoder layer is MoE (else dense); its attention kind follows the
    linear-attention pattern evaluated over ``num_layers + mtp_num_layers`` layers. Plus, per
    MTP layer, the eh projection ``2 h x h`` and "norms" ``3 h`` (counted like matmul widths),
    and one more logits GEMM. Quirk: with ``--linear-attention-freq N`` the MTP layer at index
    ``num_layers`` gets ``(num_layers + 1) % N``; for Qwen3.6 (40 layers, N = 4) that is a
    gated-DeltaNet layer, while the model builds the MTP layer from the last decoder layer's
    spec (``gpt_builders.py``: full attention). A list-valued pattern must have length
    ``num_layers + mtp`` in the FLOPs function but ``num_layers`` in the model spec, so the FLOPs
    function asserts: we raise ``ValueError`` in that case.
(e) Linear attention: ``--experimental-attention-variant gated_delta_net``/``gdn`` with
    ``--linear-attention-freq`` (int N: layer i is standard attention iff (i+1) % N == 0, else
    a list). Per gated-DeltaNet layer and token (times 3 x 2): in_proj ``h * (2 qk_dim + 2 v_dim
    + 2 n_v)``, conv1d ``kernel * (2 qk_dim + v_dim)``, core ``4 * n_v * d_v**2`` (KK^T, VK^T,
    S(a(I - bKK^T)), SQ: linear in tokens, no chunk size), out_proj ``h * v_dim``; no s^2 term.
    ``gdn2`` (in_proj ``4 qk_dim + 3 v_dim``) is not a HF shape and is not reproduced. The
    separate hybrid path (``--hybrid-layer-pattern``, e.g. "G*E-"; ``megatron_hybrid_flops``
    below) counts GDN the same way but: no attention output gate, no router, no MTP eh
    projection or norms (MTP layers come from the pattern after "/"), and the ``hybrid_flops``
    forward total is multiplied by 3 at the end. Mamba/GDP layers have no costmodel shape.
(f) Logits: ``h * padded_vocab_size * (1 + mtp_num_layers)``, always (tied or not); the input
    embedding is not counted. ``padded_vocab_size`` rounds the tokenizer's vocabulary up to a
    multiple of ``make_vocab_size_divisible_by (128) * tensor_parallel_size``; here we round
    the config's ``vocab_size`` (248,320 and 128,256 are already multiples of 256).

How a HF shape maps to Megatron arguments: see ``megatron_args``. Cross-check done when this
was written: the body of ``num_floating_point_operations`` at that commit, executed on these
mapped arguments (helpers stubbed), gave exactly the numbers of ``megatron_flops`` and
``megatron_hybrid_flops`` for every preset and for DeepSeek-V3 (MLA, with and without q lora),
padded and packed, with and without MTP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodel.inputs.models import FULL_ATTENTION, ModelShape

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
SOURCE = (
    "https://github.com/NVIDIA/Megatron-LM/blob/"
    f"{MEGATRON_COMMIT}/megatron/training/training.py#L802-L1388"
)

FWD_BWD = 3  # forward, backward data gradient, backward weight gradient
FMA = 2  # one multiply-add = 2 FLOPs


# ---------------------------------------------------------------------------------------------
# Megatron arguments, mapped from a HF-config shape


@dataclass(frozen=True)
class MegatronArgs:
    """The Megatron arguments ``num_floating_point_operations`` reads (MoE latent: unused)."""

    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int
    attention_output_gate: bool
    swiglu: bool
    ffn_hidden_size: int
    num_experts: int | None
    moe_layer_freq: tuple[int, ...]
    moe_router_topk: int
    moe_ffn_hidden_size: int
    moe_shared_expert_intermediate_size: int | None
    multi_latent_attention: bool
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_head_dim: int  # MLA: the no-RoPE part only
    qk_pos_emb_head_dim: int  # MLA: the RoPE part
    v_head_dim: int
    experimental_attention_variant: str | None
    linear_attention_freq: int | tuple[int, ...] | None
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_conv_kernel_dim: int
    mtp_num_layers: int | None
    padded_vocab_size: int


def mla_rope_dim(shape: ModelShape) -> int:
    """``qk_rope_head_dim`` of an MLA shape, solved exactly from the attention weight count.

    ``ModelShape`` keeps ``qk_head_dim = nope + rope`` but not ``rope`` itself. Per layer,
    weights = q part + h * (kv_lora + rope) + kv_lora * n * (qk - rope + v) + n * v * h,
    linear in ``rope`` with slope ``h - kv_lora * n``.
    """
    h, n, kv = shape.hidden_size, shape.num_heads, shape.kv_lora_rank
    qk, v, q_lora = shape.qk_head_dim, shape.v_head_dim, shape.q_lora_rank
    per_layer = shape.breakdown["attention"] // shape.num_full_attention_layers
    q_part = h * q_lora + q_lora * n * qk if q_lora else h * n * qk
    rest = per_layer - q_part - h * kv - kv * n * (qk + v) - n * v * h
    slope = h - kv * n
    rope, remainder = divmod(rest, slope)
    if remainder or not 0 <= rope <= qk:
        raise ValueError(f"cannot solve qk_rope_head_dim for {shape.name!r}")
    return rope


def megatron_args(
    shape: ModelShape,
    *,
    count_mtp: bool = False,
    make_vocab_size_divisible_by: int = 128,
    tensor_model_parallel_size: int = 1,
) -> MegatronArgs:
    """Map a HF-config shape to the Megatron arguments the FLOPs formula reads."""
    if shape.mla:
        rope = mla_rope_dim(shape)
        qk_nope = shape.qk_head_dim - rope  # --qk-head-dim is the no-RoPE part in Megatron
    else:
        rope, qk_nope = 0, shape.qk_head_dim
    if shape.num_linear_attention_layers:
        # --linear-attention-freq: an int when the layout is periodic (HF full_attention_interval),
        # else the explicit 0/1 list (1 = linear attention) from HF layer_types
        freq = shape.full_attention_every or tuple(
            0 if t == FULL_ATTENTION else 1 for t in shape.layer_types
        )
        variant = "gdn"  # --experimental-attention-variant gated_delta_net (alias of gdn)
    else:
        freq, variant = None, None
    multiple = make_vocab_size_divisible_by * tensor_model_parallel_size
    mtp = shape.num_mtp_layers_excluded if count_mtp and shape.num_mtp_layers_excluded else None
    return MegatronArgs(
        hidden_size=shape.hidden_size,
        num_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        # --num-query-groups = HF num_key_value_heads (MHA: Megatron sets it to the head count)
        num_query_groups=shape.num_kv_heads,
        # --kv-channels = HF head_dim (Qwen3.6: 256, not hidden_size / num_heads = 128)
        kv_channels=shape.head_dim,
        attention_output_gate=shape.attention_output_gate,  # HF attn_output_gate
        swiglu=True,  # every costmodel family has a SiLU-gated MLP (3 matrices)
        ffn_hidden_size=shape.intermediate_size,  # --ffn-hidden-size = HF intermediate_size
        num_experts=shape.num_experts or None,
        # --moe-layer-freq as an explicit 0/1 list from the shape's MoE flags
        moe_layer_freq=tuple(int(flag) for flag in shape.moe_layer_flags),
        moe_router_topk=shape.experts_per_token,  # HF num_experts_per_tok
        moe_ffn_hidden_size=shape.moe_intermediate_size,  # HF moe_intermediate_size
        # --moe-shared-expert-intermediate-size = HF shared_expert_intermediate_size
        # (DeepSeek: n_shared_experts x moe_intermediate_size)
        moe_shared_expert_intermediate_size=shape.shared_expert_intermediate_size or None,
        multi_latent_attention=shape.mla,
        q_lora_rank=shape.q_lora_rank or None,  # HF q_lora_rank (null: no q lora)
        kv_lora_rank=shape.kv_lora_rank,
        qk_head_dim=qk_nope,  # HF qk_nope_head_dim
        qk_pos_emb_head_dim=rope,  # HF qk_rope_head_dim
        v_head_dim=shape.v_head_dim,
        experimental_attention_variant=variant,
        linear_attention_freq=freq,
        linear_key_head_dim=shape.linear_key_head_dim,
        linear_value_head_dim=shape.linear_value_head_dim,
        linear_num_key_heads=shape.linear_num_key_heads,
        linear_num_value_heads=shape.linear_num_value_heads,
        linear_conv_kernel_dim=shape.linear_conv_kernel_dim,
        # --mtp-num-layers = HF mtp_num_hidden_layers / num_nextn_predict_layers
        mtp_num_layers=mtp,
        padded_vocab_size=math.ceil(shape.vocab_size / multiple) * multiple,
    )


# ---------------------------------------------------------------------------------------------
# the formula (GPT path: ``transformer_flops``), split into named terms


def _linear_attention_pattern(a: MegatronArgs, num_layers: int) -> list[int]:
    """1 = linear-attention layer, 0 = standard attention, over decoder + MTP layers."""
    if a.experimental_attention_variant is None:
        return [0] * num_layers
    freq = a.linear_attention_freq
    if isinstance(freq, int):
        return [0 if (i + 1) % freq == 0 else 1 for i in range(num_layers)]
    if len(freq) != num_layers:
        # Megatron asserts here (its model spec wants len == num_layers without MTP)
        raise ValueError(
            f"Megatron's FLOPs formula needs a linear-attention pattern of {num_layers} entries "
            f"(decoder + MTP layers); a list of {len(freq)} would fail its assert"
        )
    return list(freq)


def _standard_attention_per_token(a: MegatronArgs) -> int:
    """Projections of one standard (softmax) attention layer, per token, forward+backward."""
    h, n = a.hidden_size, a.num_attention_heads
    if a.multi_latent_attention:
        qk_all = a.qk_head_dim + a.qk_pos_emb_head_dim
        if a.q_lora_rank is None:
            q_term = h * n * qk_all
        else:
            q_term = a.q_lora_rank * (h + n * qk_all + 1)  # "+1": the q norm
        kv_term = a.kv_lora_rank * (h + n * (a.qk_head_dim + a.v_head_dim) + 1)  # +1: kv norm
        widths = q_term + kv_term + h * a.qk_pos_emb_head_dim + n * a.v_head_dim * h
    else:
        q = a.kv_channels * n
        kv = a.kv_channels * a.num_query_groups
        gate = q if a.attention_output_gate else 0
        widths = h * (q + 2 * kv + gate) + q * h
    return FWD_BWD * FMA * widths


def _attention_core_per_sq_token(a: MegatronArgs) -> int:
    """Attention core of one standard layer per unit of sum(s_i^2): 3 x 2 x width/2 x 2."""
    n = a.num_attention_heads
    if a.multi_latent_attention:
        # 3 * 2 * (n * (qk + rope) / 2 + n * v / 2), an integer: 3 * n * (qk + rope + v)
        return FWD_BWD * n * (a.qk_head_dim + a.qk_pos_emb_head_dim + a.v_head_dim)
    # 3 * 2 * q / 2 (causal mask) * 2 (QK^T and A V)
    return FWD_BWD * FMA * a.kv_channels * n


def _gdn_per_token(a: MegatronArgs) -> dict[str, int]:
    """One gated-DeltaNet layer per token, forward+backward: projections, conv1d, core."""
    h = a.hidden_size
    nv, dv = a.linear_num_value_heads, a.linear_value_head_dim
    qk_dim = a.linear_key_head_dim * a.linear_num_key_heads
    v_dim = dv * nv
    in_proj = 2 * qk_dim + 2 * v_dim + 2 * nv
    return {
        "projections": FWD_BWD * FMA * (h * in_proj + h * v_dim),
        "conv": FWD_BWD * FMA * a.linear_conv_kernel_dim * (2 * qk_dim + v_dim),
        "core": FWD_BWD * FMA * nv * dv**2 * 4,
    }


def megatron_terms(
    a: MegatronArgs,
    batch_size: int,
    seq_length: int,
    *,
    sum_sq_lengths: int | float | None = None,
    total_tokens: int | float | None = None,
) -> dict[str, int | float]:
    """Megatron's FLOPs of one step (GPT path), split into named terms that sum to the total.

    ``total_tokens`` and ``sum_sq_lengths`` are Megatron's ``total_real_tokens_in_batch`` and
    ``seqlen_squared_sum_in_batch`` (packed/THD); ``None`` gives the BSHD defaults
    ``batch_size * seq_length`` and ``batch_size * seq_length**2``.
    """
    tokens = batch_size * seq_length if total_tokens is None else total_tokens
    sq = batch_size * seq_length**2 if sum_sq_lengths is None else sum_sq_lengths
    h = a.hidden_size
    ffn_factor = 3 if a.swiglu else 2

    if a.num_experts is None:
        num_dense, num_moe, topk, last_is_moe = a.num_layers, 0, 0, 0
    else:
        if len(a.moe_layer_freq) != a.num_layers:
            raise ValueError("moe_layer_freq must have one entry per decoder layer")
        num_moe = sum(a.moe_layer_freq)
        num_dense = a.num_layers - num_moe
        topk, last_is_moe = a.moe_router_topk, a.moe_layer_freq[-1]
    mtp = a.mtp_num_layers or 0
    num_moe += last_is_moe * mtp  # an MTP layer copies the last decoder layer's MLP kind
    num_dense += (1 - last_is_moe) * mtp
    num_layers = a.num_layers + mtp
    shared = a.moe_shared_expert_intermediate_size or 0

    pattern = _linear_attention_pattern(a, num_layers)
    num_linear = sum(pattern)
    num_standard = num_layers - num_linear
    gdn = _gdn_per_token(a) if num_linear else {"projections": 0, "conv": 0, "core": 0}

    per_token = FWD_BWD * FMA * h
    return {
        "dense_mlp": tokens * per_token * a.ffn_hidden_size * ffn_factor * num_dense,
        "routed_experts": tokens * per_token * a.moe_ffn_hidden_size * topk * ffn_factor * num_moe,
        "shared_experts": tokens * per_token * shared * ffn_factor * num_moe,
        "attention_projections": tokens * _standard_attention_per_token(a) * num_standard,
        "linear_attention_projections": tokens * gdn["projections"] * num_linear,
        "linear_attention_conv": tokens * gdn["conv"] * num_linear,
        "linear_attention_core": tokens * gdn["core"] * num_linear,
        "mtp_eh_proj_and_norms": tokens * FWD_BWD * FMA * mtp * (3 * h + 2 * h * h),
        "logits": tokens * per_token * a.padded_vocab_size * (mtp + 1),
        "attention_core": sq * _attention_core_per_sq_token(a) * num_standard,
    }


#: the terms that are weight matmuls (costmodel's 6·N·tokens covers these)
WEIGHT_TERMS = (
    "dense_mlp",
    "routed_experts",
    "shared_experts",
    "attention_projections",
    "linear_attention_projections",
    "logits",
)


def megatron_flops(
    shape: ModelShape,
    batch_size: int,
    seq_length: int,
    *,
    sum_sq_lengths: int | float | None = None,
    total_tokens: int | float | None = None,
    count_mtp: bool = False,
) -> int | float:
    """Megatron-LM's FLOPs of one training step (forward + backward) for ``shape``.

    BSHD (padded) by default: ``batch_size * seq_length`` tokens and ``batch_size *
    seq_length**2`` for the attention core. Packed (THD): pass ``total_tokens = sum(L_i)`` and
    ``sum_sq_lengths = sum(L_i**2)`` of the real lengths. ``count_mtp`` adds the model's MTP
    layers (``--mtp-num-layers``), which costmodel's shapes leave out.
    """
    args = megatron_args(shape, count_mtp=count_mtp)
    terms = megatron_terms(
        args, batch_size, seq_length, sum_sq_lengths=sum_sq_lengths, total_tokens=total_tokens
    )
    return sum(terms.values())


def megatron_hybrid_flops(
    shape: ModelShape,
    batch_size: int,
    seq_length: int,
    *,
    sum_sq_lengths: int | float | None = None,
    total_tokens: int | float | None = None,
    count_mtp: bool = False,
) -> int | float:
    """The same count through Megatron's other path, ``hybrid_flops`` (``--hybrid-layer-pattern``).

    Pattern: per decoder layer "G" (gated DeltaNet) or "*" (attention), then "E" (MoE) or "-"
    (dense MLP); MTP layers as "/*E" (full attention + the last layer's MLP kind), as Qwen3.5/3.6
    build them. Differences from the GPT path: no attention output gate, no MTP eh projection or
    norms; MLA shapes are not supported (Megatron's hybrid FLOPs skip "+" layers entirely).
    """
    if shape.mla:
        raise ValueError("Megatron's hybrid_flops does not count MLA ('+') layers")
    a = megatron_args(shape, count_mtp=count_mtp)
    tokens = batch_size * seq_length if total_tokens is None else total_tokens
    sq = batch_size * seq_length**2 if sum_sq_lengths is None else sum_sq_lengths
    mtp = a.mtp_num_layers or 0
    last_is_moe = bool(shape.moe_layer_flags[-1]) if shape.moe_layer_flags else False
    num_attn = shape.num_full_attention_layers + mtp
    num_gdn = shape.num_linear_attention_layers
    num_moe = shape.num_moe_layers + (mtp if last_is_moe else 0)
    num_mlp = shape.num_dense_layers + (0 if last_is_moe else mtp)
    h, n = a.hidden_size, a.num_attention_heads
    q, kv = a.kv_channels * n, a.kv_channels * a.num_query_groups
    attn = 4 * tokens * (h * q + h * kv) + 2 * sq * q  # attn_layer_flops, forward
    mlp = 2 * 3 * tokens * h * a.ffn_hidden_size  # mlp_layer_flops (SwiGLU), forward
    shared = a.moe_shared_expert_intermediate_size or 0
    moe = 2 * 3 * tokens * h * (a.moe_ffn_hidden_size * a.moe_router_topk + shared)
    gdn = _gdn_per_token(a) if num_gdn else {"projections": 0, "conv": 0, "core": 0}
    gdn_fwd = tokens * (sum(gdn.values()) // FWD_BWD)  # gdn_layer_flops, forward
    logits = 2 * tokens * h * a.padded_vocab_size * (1 + mtp)
    forward = num_attn * attn + num_mlp * mlp + num_moe * moe + num_gdn * gdn_fwd + logits
    return 3 * forward


# ---------------------------------------------------------------------------------------------
# the course's run, and the comparison with costmodel

SAMPLES = 80
SEQ_LEN = 49_152
MEAN_LEN = 28_875
NUM_GPUS = 40
PEAK = 148e12  # H20, dense BF16
STEP_TIME = 120.0


def _mfu(flops: float) -> float:
    return flops / (STEP_TIME * NUM_GPUS * PEAK)


def _modes() -> dict[str, dict]:
    return {
        "padded": {"batch_size": SAMPLES, "seq_length": SEQ_LEN},
        "packed": {
            "batch_size": SAMPLES,
            "seq_length": SEQ_LEN,
            "total_tokens": SAMPLES * MEAN_LEN,
            "sum_sq_lengths": SAMPLES * MEAN_LEN**2,
        },
    }


def _e(x: float) -> str:
    return f"{x:.4e}"


def _report_model(preset: str) -> None:
    from costmodel.derive.attention import attention_training_flops
    from costmodel.evaluate.account.account import account
    from costmodel.evaluate.simulate import linear
    from costmodel.inputs import models
    from costmodel.inputs.scenario import resolve

    shape = models.load_shape(preset)
    acc = account(resolve(overrides={"model": preset}))
    mtp_options = (False, True) if shape.num_mtp_layers_excluded else (False,)
    print(f"== {preset}: N = activated_params = {shape.activated_params:,}")
    print(f"   Megatron FLOPs per step, MFU = FLOPs / ({STEP_TIME:g} s x {NUM_GPUS} x {PEAK:.3g})")
    for mode, kw in _modes().items():
        for mtp in mtp_options:
            flops = megatron_flops(shape, count_mtp=mtp, **kw)
            print(
                f"   {mode:6s} count_mtp={mtp!s:5s}  {_e(flops)} FLOP  MFU {_mfu(flops):7.2%}"
                f"  ({flops / (STEP_TIME * NUM_GPUS) / 1e12:6.1f} TFLOP/s/GPU as Megatron logs)"
            )
            if mode == "padded" and shape.num_linear_attention_layers:
                hyb = megatron_hybrid_flops(shape, count_mtp=mtp, **kw)
                print(f"{'':29s}hybrid-pattern path: {_e(hyb)} FLOP  MFU {_mfu(hyb):7.2%}")
    print(
        f"   costmodel account (model={preset}): 6ND = {_e(acc['model_flops_per_step'])}"
        f"  MFU {acc['mfu']:.2%}; hardware (recompute x{acc['recompute_factor']:.3g})"
        f" {_e(acc['hardware_flops_per_step'])}; attention (course: 3x, full square)"
        f" padded {_e(acc['attention']['padded']['flops_per_step'])},"
        f" actual {_e(acc['attention']['actual']['flops_per_step'])}"
    )
    if preset == "qwen3.6-35b-a3b":
        course = account(resolve())
        print(
            f"   costmodel course account (N = {course['scenario']['activated_params']:.3g}, the"
            f" course's rounded N): 6ND = {_e(course['model_flops_per_step'])}"
            f"  MFU {course['mfu']:.2%}"
        )
    print("   breakdown (count_mtp=False):")
    args = megatron_args(shape)
    b = shape.breakdown
    for mode, kw in _modes().items():
        terms = megatron_terms(args, **kw)
        tokens = kw.get("total_tokens", SAMPLES * SEQ_LEN)
        weights = sum(terms[k] for k in WEIGHT_TERMS)
        six_n = 6 * shape.activated_params * tokens
        left_out = (
            b["router"]
            + b["shared_experts"]
            - (3 * shape.hidden_size * shape.shared_expert_intermediate_size * shape.num_moe_layers)
        )
        print(
            f"   {mode}: tokens {tokens:,}; weight matmuls {_e(weights)} vs 6*N*tokens "
            f"{_e(six_n)} (diff {_e(weights - six_n)} = -6*tokens*{left_out:,} router"
            f"{' + shared-expert gate' if shape.shared_expert_intermediate_size else ''} params:"
            f" {weights - six_n == -6 * tokens * left_out}); vs costmodel 6ND (real tokens)"
            f" x{weights / acc['model_flops_per_step']:.4f}"
        )
        seq = SEQ_LEN if mode == "padded" else MEAN_LEN
        causal = attention_training_flops(
            seq, shape.attention_dim, shape.num_full_attention_layers, SAMPLES, "causal"
        )
        course = acc["attention"]["padded" if mode == "padded" else "actual"]["flops_per_step"]
        print(
            f"      attention core {_e(terms['attention_core'])} vs costmodel causal {_e(causal)}"
            f" (ratio {terms['attention_core'] / causal:.6f}); vs course convention {_e(course)}"
            f" (ratio {terms['attention_core'] / course:.3f})"
        )
        if shape.num_linear_attention_layers:
            la_core = linear.linear_attention_training_flops(shape, tokens)
            la_conv = (
                3
                * linear.linear_attention_conv_flops_per_token(shape)
                * tokens
                * shape.num_linear_attention_layers
            )
            print(
                f"      gated DeltaNet core {_e(terms['linear_attention_core'])} vs costmodel"
                f" chunked (C=64) {_e(la_core)} (ratio"
                f" {terms['linear_attention_core'] / la_core:.4f}); conv1d"
                f" {_e(terms['linear_attention_conv'])} vs {_e(la_conv)}"
            )
    if shape.num_mtp_layers_excluded and shape.num_linear_attention_layers:
        tokens = SAMPLES * SEQ_LEN
        mtp_args = megatron_args(shape, count_mtp=True)
        gdn = sum(_gdn_per_token(mtp_args).values())
        full = _standard_attention_per_token(mtp_args)
        fix = tokens * (full - gdn) + SAMPLES * SEQ_LEN**2 * _attention_core_per_sq_token(mtp_args)
        with_mtp = megatron_flops(shape, SAMPLES, SEQ_LEN, count_mtp=True)
        print(
            f"   MTP quirk: the formula counts the MTP layer as gated DeltaNet "
            f"(pattern index {shape.num_layers}); counted as the full-attention layer the model "
            f"builds, padded count_mtp=True would be {_e(with_mtp + fix)}"
            f" (MFU {_mfu(with_mtp + fix):.2%})"
        )
    print()


def main() -> None:
    print(f"Megatron-LM num_floating_point_operations, re-implemented; source: {SOURCE}")
    print(
        f"Run: {SAMPLES} samples/step, seq_length {SEQ_LEN:,} (padded), mean real length "
        f"{MEAN_LEN:,}, {NUM_GPUS} GPUs x {PEAK:.3g} FLOP/s, {STEP_TIME:g} s/step; packed mode: "
        f"sum s_i^2 = {SAMPLES} x {MEAN_LEN:,}^2, tokens = {SAMPLES} x {MEAN_LEN:,}"
    )
    print()
    for preset in ("qwen3.6-35b-a3b", "llama-3.1-8b"):
        _report_model(preset)


if __name__ == "__main__":
    main()
    __import__("bench_headlines").record("megatron_flops")  # docs/benchmarks.md
