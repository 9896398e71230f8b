"""What every family shares: the common fields (``Base``), the layer layout, the standard
attention block, the gated-DeltaNet block, the routed-expert count, and the sums that turn a
family's blocks into a ``ModelShape`` (see ``costmodel.inputs.models`` for what counts where)."""

from __future__ import annotations

from dataclasses import dataclass, field

from costmodel.errors import CostModelError
from costmodel.inputs.config import Fields
from costmodel.inputs.shape import (
    BREAKDOWN_KEYS,
    FULL_ATTENTION,
    LINEAR_ATTENTION,
    MATMUL_KEYS,
    ModelShape,
)

#: model_types with gated-DeltaNet (linear-attention) layers
HYBRIDS = ("qwen3_next", "qwen3_5_moe")


@dataclass(frozen=True)
class Base:
    """The fields every family reads first, in this order, and the layer layout."""

    family: str
    hidden: int
    num_layers: int
    vocab: int
    num_heads: int
    num_kv_heads: int
    tie: bool
    layer_types: tuple[str, ...]

    @property
    def n_full(self) -> int:
        return sum(1 for t in self.layer_types if t == FULL_ATTENTION)

    @property
    def n_linear(self) -> int:
        return self.num_layers - self.n_full


@dataclass(frozen=True)
class Attention:
    """One full-attention layer: its widths and its parameters (matmul weights, other)."""

    num_heads: int
    num_kv_heads: int
    head_dim: int
    qk_dim: int
    v_dim: int
    attention_dim: int
    weights: int
    other: int
    gate: bool = False
    mla: bool = False
    q_lora: int = 0
    kv_lora: int = 0
    rope: int = 0  # MLA: qk_rope_head_dim, the decoupled RoPE width of q and of the shared k


@dataclass(frozen=True)
class LinearAttention:
    """One gated-DeltaNet layer (all zero for a model without one)."""

    num_key_heads: int = 0
    num_value_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    conv_kernel: int = 0
    weights: int = 0
    other: int = 0


@dataclass(frozen=True)
class Mlp:
    """The MLPs: routed experts on the layers flagged MoE, a dense MLP on the others."""

    moe_flags: tuple[bool, ...]
    intermediate: int
    num_experts: int = 0
    k: int = 0
    moe_inter: int = 0
    shared_inter: int = 0
    shared_gate: bool = False  # a 1 x hidden gate on the shared expert (qwen3_next, qwen3_5_moe)
    mlp_bias: bool = False


@dataclass(frozen=True)
class Parts:
    """A family's blocks: what ``build_shape`` sums into a ``ModelShape``."""

    attention: Attention
    mlp: Mlp
    linear: LinearAttention = field(default_factory=LinearAttention)
    mtp: int = 0


# ---------------------------------------------------------------------------------------------
# the common fields and the layout


def base(f: Fields, outer: dict) -> Base:
    """The fields every family has, and the layer types (``Fields`` reads the text model)."""
    hidden = f.int("hidden_size")
    num_layers = f.int("num_hidden_layers")
    vocab = f.int("vocab_size")
    num_heads = f.int("num_attention_heads")
    num_kv_heads = f.int("num_key_value_heads", num_heads)
    tie_default = outer.get("tie_word_embeddings", False) if f.cfg is not outer else False
    tie = f.bool("tie_word_embeddings", bool(tie_default))
    layer_types = _layer_types(f, num_layers)
    return Base(f.model_type, hidden, num_layers, vocab, num_heads, num_kv_heads, tie, layer_types)


def _layer_types(f: Fields, num_layers: int) -> tuple[str, ...]:
    family = f.model_type
    raw = f.cfg.get("layer_types")
    if raw is not None:
        allowed = (FULL_ATTENTION, LINEAR_ATTENTION)
        if not isinstance(raw, list) or len(raw) != num_layers:
            raise CostModelError(
                f"config field 'layer_types' has {len(raw) if isinstance(raw, list) else repr(raw)} "
                f"entries; expected a list of num_hidden_layers = {num_layers}"
            )
        for value in raw:
            if value not in allowed:
                raise CostModelError(
                    f"config field 'layer_types' has value {value!r}; allowed: {', '.join(allowed)}"
                )
        if family not in HYBRIDS and LINEAR_ATTENTION in raw:
            raise CostModelError(
                f"config field 'layer_types' has value 'linear_attention' but model_type '{family}' "
                "has no linear-attention layers; hybrids: qwen3_next, qwen3_5_moe"
            )
        return tuple(raw)
    if family in HYBRIDS:
        interval = f.int("full_attention_interval", 4)
        return tuple(
            FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION
            for i in range(num_layers)
        )
    return tuple(FULL_ATTENTION for _ in range(num_layers))


def period(layer_types: tuple[str, ...]) -> int | None:
    """p such that the full-attention layers are exactly those with (i + 1) % p == 0, else None."""
    n = len(layer_types)
    full = {i for i, t in enumerate(layer_types) if t == FULL_ATTENTION}
    if not full:
        return None
    p = min(full) + 1  # the only candidate: the first layer i with (i + 1) % p == 0 is p - 1
    return p if full == set(range(p - 1, n, p)) else None


# ---------------------------------------------------------------------------------------------
# blocks more than one family uses


def standard_attention(
    f: Fields,
    b: Base,
    *,
    qk_norm: bool,
    gate: bool = False,
    gate_field: str | None = None,
    qkv_bias: bool = False,
) -> Attention:
    """q/k/v/o projections (q doubled with an output gate). ``gate_field`` names the config flag
    of the gate (default ``gate``); ``qkv_bias`` means q/k/v biases always (qwen2), otherwise
    ``attention_bias`` adds biases to q/k/v/o; ``qk_norm`` adds the q and k RMSNorm weights."""
    hidden, num_heads = b.hidden, b.num_heads
    head_dim = f.int("head_dim", hidden // num_heads if hidden % num_heads == 0 else None)
    if gate_field is not None:
        gate = f.bool(gate_field, gate)
    q_out = num_heads * head_dim * (2 if gate else 1)
    kv_out = b.num_kv_heads * head_dim
    weights = hidden * q_out + 2 * hidden * kv_out + num_heads * head_dim * hidden
    other = 0
    if qkv_bias:
        other += q_out + 2 * kv_out
    elif f.bool("attention_bias", False):
        other += q_out + 2 * kv_out + hidden
    if qk_norm:
        other += 2 * head_dim
    return Attention(
        num_heads=num_heads,
        num_kv_heads=b.num_kv_heads,
        head_dim=head_dim,
        qk_dim=head_dim,
        v_dim=head_dim,
        attention_dim=num_heads * head_dim,
        weights=weights,
        other=other,
        gate=gate,
    )


def gated_deltanet(f: Fields, b: Base) -> LinearAttention:
    """One gated-DeltaNet layer: in/out projections (weights); conv1d, A_log, dt_bias, norm."""
    if not b.n_linear:
        return LinearAttention()
    nk = f.int("linear_num_key_heads")
    nv = f.int("linear_num_value_heads")
    dk = f.int("linear_key_head_dim")
    dv = f.int("linear_value_head_dim")
    kernel = f.int("linear_conv_kernel_dim", 4)
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    hidden = b.hidden
    weights = hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * nv + value_dim * hidden
    other = conv_dim * kernel + 2 * nv + dv  # conv1d, A_log + dt_bias, norm
    return LinearAttention(nk, nv, dk, dv, kernel, weights, other)


def experts_per_token(f: Fields, num_experts: int) -> int:
    """``num_experts_per_tok`` (0 without experts), at most ``num_experts``."""
    k = f.int("num_experts_per_tok") if num_experts else 0
    if k > num_experts:
        raise CostModelError(
            f"config field 'num_experts_per_tok' has value {k}; expected at most the {num_experts} experts"
        )
    return k


def dense_intermediate(f: Fields, moe_flags: tuple[bool, ...]) -> int:
    """``intermediate_size``: required when a layer has a dense MLP, else 0 by default."""
    if all(moe_flags):
        return f.int("intermediate_size", 0, minimum=0)
    return f.int("intermediate_size")


# ---------------------------------------------------------------------------------------------
# blocks -> ModelShape


def build_shape(name: str, b: Base, p: Parts) -> ModelShape:
    """Sum a family's blocks per component (``BREAKDOWN_KEYS``) into a ``ModelShape``."""
    attn, lin, mlp = p.attention, p.linear, p.mlp
    hidden, n_full, n_linear = b.hidden, b.n_full, b.n_linear
    n_moe = sum(mlp.moe_flags)
    n_dense = b.num_layers - n_moe
    moe_inter = mlp.moe_inter
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0)
    parts["attention"] = n_full * attn.weights
    parts["linear_attention"] = n_linear * lin.weights
    parts["router"] = n_moe * mlp.num_experts * hidden
    parts["routed_experts_total"] = n_moe * mlp.num_experts * 3 * hidden * moe_inter
    parts["routed_experts_active"] = n_moe * mlp.k * 3 * hidden * moe_inter
    shared_per_layer = 3 * hidden * mlp.shared_inter
    if mlp.shared_gate and mlp.shared_inter:
        shared_per_layer += hidden  # shared_expert_gate: Linear(hidden, 1)
    parts["shared_experts"] = n_moe * shared_per_layer
    parts["dense_mlp"] = n_dense * 3 * hidden * mlp.intermediate
    other = n_full * attn.other + n_linear * lin.other
    other += b.num_layers * 2 * hidden + hidden  # input/post-attention norms, final norm
    if mlp.mlp_bias:
        other += n_dense * (2 * mlp.intermediate + hidden)
    parts["norms_and_other"] = other
    parts["embedding"] = b.vocab * hidden
    parts["lm_head"] = b.vocab * hidden

    mtp_total, mtp_matmul = _mtp_params(b, p)

    total = sum(v for key, v in parts.items() if key not in ("routed_experts_active", "lm_head"))
    if not b.tie:
        total += parts["lm_head"]
    activated = sum(parts[key] for key in MATMUL_KEYS)
    published = total - parts["routed_experts_total"] + parts["routed_experts_active"]

    return ModelShape(
        name=name,
        model_type=b.family,
        hidden_size=hidden,
        num_layers=b.num_layers,
        layer_types=b.layer_types,
        num_full_attention_layers=n_full,
        num_linear_attention_layers=n_linear,
        full_attention_every=period(b.layer_types),
        num_heads=attn.num_heads,
        num_kv_heads=attn.num_kv_heads,
        head_dim=attn.head_dim,
        qk_head_dim=attn.qk_dim,
        v_head_dim=attn.v_dim,
        attention_dim=attn.attention_dim,
        attention_output_gate=attn.gate,
        mla=attn.mla,
        q_lora_rank=attn.q_lora,
        kv_lora_rank=attn.kv_lora,
        qk_rope_head_dim=attn.rope,
        vocab_size=b.vocab,
        tie_word_embeddings=b.tie,
        intermediate_size=mlp.intermediate,
        num_experts=mlp.num_experts,
        experts_per_token=mlp.k,
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=mlp.shared_inter,
        shared_expert_gate=bool(mlp.shared_gate and mlp.shared_inter),
        moe_layer_flags=mlp.moe_flags,
        num_moe_layers=n_moe,
        num_dense_layers=n_dense,
        linear_num_key_heads=lin.num_key_heads,
        linear_num_value_heads=lin.num_value_heads,
        linear_key_head_dim=lin.key_head_dim,
        linear_value_head_dim=lin.value_head_dim,
        linear_conv_kernel_dim=lin.conv_kernel,
        num_mtp_layers_excluded=p.mtp,
        mtp_params=mtp_total,
        mtp_activated_params=mtp_matmul,
        total_params=total,
        embedding_params=parts["embedding"],
        lm_head_params=parts["lm_head"],
        activated_params=activated,
        activated_params_published=published,
        breakdown_items=tuple(parts.items()),
    )


def _mtp_params(b: Base, p: Parts) -> tuple[int, int]:
    """(parameters, matmul parameters per token) of the config's multi-token-prediction layers.

    One MTP layer, as in DeepSeek-V3 (technical report, section 2.2) and Qwen3.5/3.6
    (``mtp_num_hidden_layers``): a projection of [embedding; hidden] (2h -> h), one full-attention
    decoder layer with the model's MoE (or dense) MLP, norms, and the model's embedding and output
    head, shared. Parameters: the projection, the layer, five norm vectors (two inputs, two in
    the layer, one before the head); the shared embedding and head are not new parameters. Matmul
    parameters per token: the projection, the layer's attention, router, k routed experts and
    shared expert (or dense MLP), and the output head again (it runs once more per token)."""
    if not p.mtp:
        return 0, 0
    attn, mlp, hidden = p.attention, p.mlp, b.hidden
    projection = 2 * hidden * hidden
    if mlp.num_experts:
        shared = 3 * hidden * mlp.shared_inter + (
            hidden if mlp.shared_gate and mlp.shared_inter else 0
        )
        router = mlp.num_experts * hidden
        mlp_total = router + mlp.num_experts * 3 * hidden * mlp.moe_inter + shared
        mlp_matmul = router + mlp.k * 3 * hidden * mlp.moe_inter + shared
    else:
        mlp_total = mlp_matmul = 3 * hidden * mlp.intermediate
    total = projection + attn.weights + attn.other + mlp_total + 5 * hidden
    matmul = projection + attn.weights + mlp_matmul + b.vocab * hidden
    return p.mtp * total, p.mtp * matmul
