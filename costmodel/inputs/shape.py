"""``ModelShape``: the frozen shape and parameter counts of a decoder-only LM, and the names of
its layer kinds and parameter components (see ``costmodel.inputs.models`` for what counts where).
Pure Python: no sympy, numpy or torch, so that ``costmodel params`` starts fast."""

from __future__ import annotations

from costmodel.inputs import family_flags
from costmodel.records import frozen_dataclass

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"

BREAKDOWN_KEYS: tuple[str, ...] = (
    "attention",
    "linear_attention",
    "router",
    "routed_experts_total",
    "routed_experts_active",
    "shared_experts",
    "dense_mlp",
    "norms_and_other",
    "embedding",
    "lm_head",
)

#: components whose sum is activated_params (the N of 6ND)
MATMUL_KEYS: tuple[str, ...] = (
    "attention",
    "linear_attention",
    "router",
    "routed_experts_active",
    "shared_experts",
    "dense_mlp",
    "lm_head",
)


#: ModelShape.mlp_activation: the MLP's structure, as the scenario key `mlp_activation` names it
MLP_ACTIVATIONS: tuple[str, ...] = ("swiglu", "gelu")


@frozen_dataclass
class ModelShape:
    """The shape of a decoder-only LM and its parameter counts (see ``costmodel.inputs.models``)."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    layer_types: tuple[str, ...]
    num_full_attention_layers: int
    num_linear_attention_layers: int
    full_attention_every: int | None
    num_heads: int
    num_kv_heads: int
    head_dim: int
    qk_head_dim: int
    v_head_dim: int
    attention_dim: int
    attention_output_gate: bool
    mla: bool
    q_lora_rank: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    intermediate_size: int
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    shared_expert_gate: bool
    moe_layer_flags: tuple[bool, ...]
    num_moe_layers: int
    num_dense_layers: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    num_mtp_layers_excluded: int
    mtp_params: int
    mtp_activated_params: int
    total_params: int
    embedding_params: int
    lm_head_params: int
    activated_params: int
    activated_params_published: int
    breakdown_items: tuple[tuple[str, int], ...]
    #: "swiglu": a gated MLP, gate, up and down (SwiGLU; Gemma's GeGLU); "gelu": up and down
    #: (GELU: GPT-2/3, GPT-NeoX; Nemotron's squared ReLU), dense MLPs and experts alike
    mlp_activation: str = "swiglu"
    #: the config's activation function (hidden_act: silu, gelu, gelu_new, relu2, ...)
    hidden_act: str = "silu"
    #: "rmsnorm" (a weight) or "layernorm" (a weight and a bias), and how many per layer (2;
    #: Gemma 2/3's sandwich norms: 4)
    norm: str = "rmsnorm"
    norms_per_layer: int = 2
    #: learned absolute position embeddings (rows; GPT-2/3), part of `embedding`; 0 with RoPE
    position_embeddings: int = 0
    #: local attention: the window, and how many of the full-attention layers use it (Mistral,
    #: Gemma 2/3, GPT-OSS). They are counted as full attention (see costmodel.inputs.models)
    sliding_window: int = 0
    num_sliding_window_layers: int = 0
    #: a learned logit per head in the softmax (GPT-OSS); no FLOPs, num_heads parameters a layer
    attention_sinks: bool = False
    #: the top-k routing weights divided by their sum (inputs.family_flags.norm_topk)
    norm_topk: bool = True

    @property
    def breakdown(self) -> dict[str, int]:
        """Parameter count per component, keys as in ``BREAKDOWN_KEYS``."""
        return dict(self.breakdown_items)

    @property
    def num_mtp_layers(self) -> int:
        """Multi-token-prediction layers of the config (counted only with count_mtp)."""
        return self.num_mtp_layers_excluded

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_hybrid(self) -> bool:
        return self.num_linear_attention_layers > 0

    @property
    def mlp_gated(self) -> bool:
        """Gate, up and down matrices (3 per MLP), else up and down (2)."""
        return self.mlp_activation == "swiglu"

    @property
    def num_shared_experts(self) -> int | None:
        """Shared experts, each moe_intermediate_size wide; None when the shared width is not a
        whole number of experts (0 without one)."""
        if not self.shared_expert_intermediate_size:
            return 0
        count, rest = divmod(self.shared_expert_intermediate_size, self.moe_intermediate_size)
        return count if not rest else None

    @property
    def first_dense_layers(self) -> int | None:
        """Leading dense layers before the MoE ones (DeepSeek's first_k_dense_replace); None when
        the dense and MoE layers are not laid out so (0 for a model whose layers are all MoE)."""
        if not self.is_moe:
            return None
        leading = next((i for i, moe in enumerate(self.moe_layer_flags) if moe), self.num_layers)
        return leading if all(self.moe_layer_flags[leading:]) else None

    @property
    def qk_norm(self) -> bool:
        """Each query and key head is RMS-normalised (its own saved tensors)."""
        return family_flags.qk_norm(self.model_type)

    @property
    def router_fp32(self) -> bool:
        """The router runs on an fp32 copy of the hidden states (one more saved tensor)."""
        return family_flags.router_fp32(self.model_type)

    @property
    def routing_weights_fp32(self) -> bool:
        """The top-k routing weights are kept in fp32, not cast back to the working dtype."""
        return family_flags.routing_weights_fp32(self.model_type)

    @property
    def rmsnorm_offset(self) -> bool:
        """RMSNorm scales by 1 + weight in fp32 (the eager composite keeps an fp32 product)."""
        return family_flags.rmsnorm_offset(self.model_type)
