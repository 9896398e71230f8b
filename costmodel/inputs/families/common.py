"""What every family shares: the common fields (``Base``), the layer layout, the standard
attention block, the gated-DeltaNet block, the routed-expert count, and the sums that turn a
family's blocks into a ``ModelShape`` (see ``costmodel.inputs.models`` for what counts where)."""

from __future__ import annotations

import functools
from dataclasses import field

from costmodel.derive.plain import head_width
from costmodel.errors import CostModelError
from costmodel.inputs import family_flags
from costmodel.inputs.config import Fields
from costmodel.inputs.shape import (
    BREAKDOWN_KEYS,
    FULL_ATTENTION,
    LINEAR_ATTENTION,
    MATMUL_KEYS,
    ModelShape,
)
from costmodel.records import frozen_dataclass

#: model_types with gated-DeltaNet (linear-attention) layers
HYBRIDS = ("qwen3_next", "qwen3_5_moe")

#: A layer whose attention is local (a sliding window): its projections are a full-attention
#: layer's, and the FLOP and memory accounts count it as one (see ``Base.sliding``).
SLIDING_ATTENTION = "sliding_attention"

#: transformers' defaults where a family's config.json may leave a field out.
#: tie_word_embeddings (False unless listed)
TIE_DEFAULTS = {"gpt2": True, "gemma2": True, "gemma3_text": True}
#: sliding_window, for the families whose layers (all, or those the layout marks) are local
SLIDING_WINDOW_DEFAULTS = {"mistral": 4096, "gemma2": 4096, "gemma3_text": 4096, "gpt_oss": 128}


@frozen_dataclass
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
    #: per layer: its attention is local, a window of ``sliding_window`` keys (Mistral, Gemma 2/3,
    #: GPT-OSS); such a layer is a FULL_ATTENTION layer of ``layer_types``
    sliding: tuple[bool, ...] = ()
    sliding_window: int = 0
    #: the top-k routing weights renormalised (``family_flags.norm_topk``)
    norm_topk: bool = True

    @functools.cached_property
    def n_full(self) -> int:
        """Counted once per shape (read thousands of times by a scenario's levers)."""
        return self.layer_types.count(FULL_ATTENTION)

    @property
    def n_linear(self) -> int:
        return self.num_layers - self.n_full


@frozen_dataclass
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
    sinks: bool = False  # a learned logit per head added to the softmax (GPT-OSS), no FLOPs
    mla: bool = False
    q_lora: int = 0
    kv_lora: int = 0
    rope: int = 0  # MLA: qk_rope_head_dim, the decoupled RoPE width of q and of the shared k


@frozen_dataclass
class LinearAttention:
    """One gated-DeltaNet layer (all zero for a model without one)."""

    num_key_heads: int = 0
    num_value_heads: int = 0
    key_head_dim: int = 0
    value_head_dim: int = 0
    conv_kernel: int = 0
    weights: int = 0
    other: int = 0


@frozen_dataclass
class Mlp:
    """The MLPs: routed experts on the layers flagged MoE, a dense MLP on the others.

    ``gated``: gate, up and down matrices, act(gate(x)) * up(x) (SwiGLU, and Gemma's GeGLU);
    else up and down only, act(up(x)) (GELU: GPT-2/3, GPT-NeoX; squared ReLU: Nemotron).
    ``activation`` is the config's activation function (``hidden_act``)."""

    moe_flags: tuple[bool, ...]
    intermediate: int
    num_experts: int = 0
    k: int = 0
    moe_inter: int = 0
    shared_inter: int = 0
    shared_gate: bool = False  # a 1 x hidden gate on the shared expert (qwen3_next, qwen3_5_moe)
    mlp_bias: bool = False
    gated: bool = True
    activation: str = "silu"
    expert_bias: bool = False  # a bias on each routed expert's gate+up and down (GPT-OSS)
    router_bias: bool = False  # a bias on the router's logits (GPT-OSS)

    @property
    def matrices(self) -> int:
        """Weight matrices of one MLP (or expert): 3 gated, 2 not."""
        return 3 if self.gated else 2


@frozen_dataclass
class Norms:
    """The norms: per layer, how many hidden-wide ones (2; Gemma's sandwich norms 4), and
    whether each has a bias (LayerNorm: GPT-2/3, GPT-NeoX, Nemotron's LayerNorm1P)."""

    per_layer: int = 2
    bias: bool = False

    @property
    def kind(self) -> str:
        return "layernorm" if self.bias else "rmsnorm"


@frozen_dataclass
class Parts:
    """A family's blocks: what ``build_shape`` sums into a ``ModelShape``."""

    attention: Attention
    mlp: Mlp
    linear: LinearAttention = field(default_factory=LinearAttention)
    mtp: int = 0
    norms: Norms = field(default_factory=Norms)
    #: learned absolute position embeddings (GPT-2/3: n_positions rows), 0 for RoPE models
    position_embeddings: int = 0


# ---------------------------------------------------------------------------------------------
# the common fields and the layout


def base(f: Fields, outer: dict) -> Base:
    """The fields every family has, and the layer types (``Fields`` reads the text model)."""
    hidden = f.int("hidden_size")
    num_layers = f.int("num_hidden_layers")
    vocab = f.int("vocab_size")
    num_heads = f.int("num_attention_heads")
    num_kv_heads = f.int("num_key_value_heads", num_heads)
    family_tie = TIE_DEFAULTS.get(f.model_type, False)
    tie_default = outer.get("tie_word_embeddings", family_tie) if f.cfg is not outer else family_tie
    tie = f.bool("tie_word_embeddings", bool(tie_default))
    raw = _layer_types(f, num_layers)
    layer_types = tuple(FULL_ATTENTION if t == SLIDING_ATTENTION else t for t in raw)
    window = SLIDING_WINDOW_DEFAULTS.get(f.model_type, 0)  # transformers' default if absent
    if f.has("sliding_window"):
        window = f.int("sliding_window", 0, minimum=0)  # null: no window
    sliding = tuple(bool(window) and t == SLIDING_ATTENTION for t in raw)
    configured = None
    if family_flags.reads_norm_topk(f.model_type):
        configured = f.bool("norm_topk_prob", family_flags.norm_topk(f.model_type))
    return Base(
        f.model_type,
        hidden,
        num_layers,
        vocab,
        num_heads,
        num_kv_heads,
        tie,
        layer_types,
        sliding,
        window if any(sliding) else 0,
        family_flags.norm_topk(f.model_type, configured),
    )


def _layer_types(f: Fields, num_layers: int) -> tuple[str, ...]:
    """The config's ``layer_types`` (full, linear or sliding-window attention per layer), else
    the layout transformers builds for the family."""
    family = f.model_type
    raw = f.get("layer_types")
    if raw is not None:
        allowed = (FULL_ATTENTION, LINEAR_ATTENTION, SLIDING_ATTENTION)
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
        if family not in SLIDING_WINDOW_DEFAULTS and SLIDING_ATTENTION in raw:
            raise CostModelError(
                f"config field 'layer_types' has value 'sliding_attention' but model_type "
                f"'{family}' has no sliding-window layers; families with them: "
                + ", ".join(SLIDING_WINDOW_DEFAULTS)
            )
        return tuple(raw)
    if family in HYBRIDS:
        interval = f.int("full_attention_interval", 4)
        return tuple(
            FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION
            for i in range(num_layers)
        )
    # the sliding-window layouts transformers builds: every layer (mistral), every other one
    # (gemma2, gpt_oss: the first local), five local to one global (gemma3_text)
    local_every = {"mistral": 1, "gemma2": 2, "gpt_oss": 2}.get(family)
    if family == "gemma3_text":
        local_every = f.int("sliding_window_pattern", 6)
    if local_every == 1:
        return tuple(SLIDING_ATTENTION for _ in range(num_layers))
    if local_every:
        return tuple(
            SLIDING_ATTENTION if (i + 1) % local_every else FULL_ATTENTION
            for i in range(num_layers)
        )
    return tuple(FULL_ATTENTION for _ in range(num_layers))


def period(layer_types: tuple[str, ...]) -> int | None:
    """p such that the full-attention layers are exactly those with (i + 1) % p == 0, else None."""
    if FULL_ATTENTION not in layer_types:
        return None
    p = layer_types.index(FULL_ATTENTION) + 1  # the only candidate: the first full layer is p - 1
    every_p = layer_types[p - 1 :: p]  # layers p - 1, 2p - 1, ...: all full, and no other one
    full = every_p.count(FULL_ATTENTION)
    return p if full == len(every_p) == layer_types.count(FULL_ATTENTION) else None


# ---------------------------------------------------------------------------------------------
# blocks more than one family uses


def standard_attention(
    f: Fields,
    b: Base,
    *,
    gate: bool = False,
    gate_field: str | None = None,
    qkv_bias: bool = False,
    bias: bool | None = None,
    sinks: bool = False,
    head_dim_default: int | None = None,
) -> Attention:
    """q/k/v/o projections (q doubled with an output gate). ``gate_field`` names the config flag
    of the gate (default ``gate``); ``qkv_bias`` means q/k/v biases always (qwen2), otherwise
    ``bias`` (default: the config's ``attention_bias``, false if absent) adds biases to q/k/v/o;
    ``sinks`` one learned logit per head (GPT-OSS); the q and k RMSNorm weights where
    ``family_flags.qk_norm`` (the one mapping the memory model reads too); ``head_dim_default``
    is the family's head width when the config gives none (else hidden / heads)."""
    hidden, num_heads = b.hidden, b.num_heads
    width = head_width(hidden, num_heads)
    if head_dim_default is None and width.is_integer():
        head_dim_default = int(width)
    head_dim = f.int("head_dim", head_dim_default)
    if gate_field is not None:
        gate = f.bool(gate_field, gate)
    q_out = num_heads * head_dim * (2 if gate else 1)
    kv_out = b.num_kv_heads * head_dim
    weights = hidden * q_out + 2 * hidden * kv_out + num_heads * head_dim * hidden
    other = 0
    if qkv_bias:
        other += q_out + 2 * kv_out
    elif f.bool("attention_bias", False) if bias is None else bias:
        other += q_out + 2 * kv_out + hidden
    if family_flags.qk_norm(b.family):
        other += 2 * head_dim
    if sinks:
        other += num_heads
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
        sinks=sinks,
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


def _breakdown(b: Base, p: Parts) -> dict[str, int]:
    """The parameters of each component (``BREAKDOWN_KEYS``), summed over the layers."""
    attn, lin, mlp = p.attention, p.linear, p.mlp
    hidden, n_full, n_linear = b.hidden, b.n_full, b.n_linear
    n_moe = sum(mlp.moe_flags)
    n_dense = b.num_layers - n_moe
    moe_inter, mats = mlp.moe_inter, mlp.matrices
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0)
    parts["attention"] = n_full * attn.weights
    parts["linear_attention"] = n_linear * lin.weights
    parts["router"] = n_moe * mlp.num_experts * hidden
    parts["routed_experts_total"] = n_moe * mlp.num_experts * mats * hidden * moe_inter
    parts["routed_experts_active"] = n_moe * mlp.k * mats * hidden * moe_inter
    shared_per_layer = mats * hidden * mlp.shared_inter
    if mlp.shared_gate and mlp.shared_inter:
        shared_per_layer += hidden  # shared_expert_gate: Linear(hidden, 1)
    parts["shared_experts"] = n_moe * shared_per_layer
    parts["dense_mlp"] = n_dense * mats * hidden * mlp.intermediate
    parts["norms_and_other"] = _other_params(b, p, n_moe, n_dense)
    # the input embeddings, lookups: tokens, and learned positions (GPT-2/3)
    parts["embedding"] = (b.vocab + p.position_embeddings) * hidden
    parts["lm_head"] = b.vocab * hidden
    return parts


def build_shape(name: str, b: Base, p: Parts) -> ModelShape:
    """Sum a family's blocks per component (``BREAKDOWN_KEYS``) into a ``ModelShape``."""
    attn, lin, mlp, norms = p.attention, p.linear, p.mlp, p.norms
    hidden, n_full, n_linear = b.hidden, b.n_full, b.n_linear
    n_moe = sum(mlp.moe_flags)
    n_dense = b.num_layers - n_moe
    moe_inter = mlp.moe_inter
    parts = _breakdown(b, p)

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
        mlp_activation="swiglu" if mlp.gated else "gelu",
        hidden_act=mlp.activation,
        norm=norms.kind,
        norms_per_layer=norms.per_layer,
        position_embeddings=p.position_embeddings,
        sliding_window=b.sliding_window,
        num_sliding_window_layers=sum(b.sliding),
        attention_sinks=attn.sinks,
        norm_topk=b.norm_topk,
    )


def _other_params(b: Base, p: Parts, n_moe: int, n_dense: int) -> int:
    """``norms_and_other``: the attention's and linear attention's vectors, the norms (per layer
    and final; a LayerNorm's weight and bias), the MLP biases (gated: gate, up and down; else
    up and down), GPT-OSS's expert and router biases."""
    attn, lin, mlp, norms, hidden = p.attention, p.linear, p.mlp, p.norms, b.hidden
    other = b.n_full * attn.other + b.n_linear * lin.other
    norm_width = hidden * (2 if norms.bias else 1)
    other += b.num_layers * norms.per_layer * norm_width + norm_width  # per layer, final
    up_width = (mlp.matrices - 1) * mlp.intermediate  # gate and up, or up
    if mlp.mlp_bias:
        other += n_dense * (up_width + hidden)
    if mlp.expert_bias:
        other += n_moe * mlp.num_experts * ((mlp.matrices - 1) * mlp.moe_inter + hidden)
    if mlp.router_bias:
        other += n_moe * mlp.num_experts
    return other


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
    attn, mlp, hidden, mats = p.attention, p.mlp, b.hidden, p.mlp.matrices
    projection = 2 * hidden * hidden
    if mlp.num_experts:
        shared = mats * hidden * mlp.shared_inter + (
            hidden if mlp.shared_gate and mlp.shared_inter else 0
        )
        router = mlp.num_experts * hidden
        mlp_total = router + mlp.num_experts * mats * hidden * mlp.moe_inter + shared
        mlp_matmul = router + mlp.k * mats * hidden * mlp.moe_inter + shared
    else:
        mlp_total = mlp_matmul = mats * hidden * mlp.intermediate
    total = projection + attn.weights + attn.other + mlp_total + 5 * hidden
    matmul = projection + attn.weights + mlp_matmul + b.vocab * hidden
    return p.mtp * total, p.mtp * matmul
