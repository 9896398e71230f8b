"""Per-model-type switches, each defined once: which model types normalise the query and key heads,
run the router in fp32, keep fp32 routing weights, renormalise the top-k routing weights, scale
RMSNorm by 1 + weight; and the two code
layouts of transformers that only the memory check (``costmodel.validate_memory``) meets.

The parameter counts (``costmodel.inputs.families``), the shape's flags (``ModelShape.qk_norm``
and its neighbours), the memory model of the report (``costmodel.evaluate.simulate.run``) and its check
(``costmodel.validate_memory``) all ask the functions here. No imports: any module of ``inputs``
may read it."""

from __future__ import annotations

#: Model types whose attention normalises each query and key head (Qwen3's q_norm and k_norm,
#: Gemma 3's): two RMSNorm weights of head_dim each, and their saved tensors.
QK_NORM_TYPES: tuple[str, ...] = (
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "qwen3_5_moe",
    "gemma3_text",
)
#: Model types whose router runs on an fp32 copy of its input (DeepSeek-V2/V3's router).
ROUTER_FP32_TYPES: tuple[str, ...] = ("deepseek_v3", "deepseek_v2")
#: Model types whose routing weights stay fp32 (the router's softmax is fp32 and its top-k
#: weights are not cast back: DeepSeek-V3, Mixtral).
ROUTING_WEIGHTS_FP32_TYPES: tuple[str, ...] = ("deepseek_v3", "mixtral")
#: Model types whose RMSNorm scales by 1 + weight in fp32 before the cast back (transformers'
#: Qwen3NextRMSNorm, Qwen3_5MoeRMSNorm, Gemma2RMSNorm, Gemma3RMSNorm).
RMSNORM_OFFSET_TYPES: tuple[str, ...] = ("qwen3_next", "qwen3_5_moe", "gemma2", "gemma3_text")

#: Model types whose top-k routing weights are always divided by their sum (no config field:
#: transformers' MixtralSparseMoeBlock and Qwen3_5MoeTopKRouter).
NORM_TOPK_ALWAYS: tuple[str, ...] = ("mixtral", "qwen3_5_moe")
#: transformers' default of `norm_topk_prob` where a config leaves it out (Qwen3MoeConfig,
#: Qwen3NextConfig, DeepseekV3Config, DeepseekV2Config).
NORM_TOPK_DEFAULTS: dict[str, bool] = {
    "qwen3_moe": False,
    "qwen3_next": True,
    "deepseek_v3": True,
    "deepseek_v2": False,
}

#: Two layouts of transformers' code that change what CPU SDPA keeps (``activations.
#: attention_core_saved``), met only by the memory check: a RoPE built with torch.cat (the
#: partial-rotary form) leaves the query heads-major, so the kernel's saved output is copied
#: before the next op; one fused q/k/v projection whose whole output stays behind the value view
#: the kernel saves. (phi3 is a type costmodel reads as llama: ``validate_memory.SHAPE_AS``.)
SDPA_OUTPUT_COPY_TYPES: tuple[str, ...] = ("phi3", "qwen3_next")
FUSED_QKV_TYPES: tuple[str, ...] = ("phi3",)


def qk_norm(model_type: str) -> bool:
    """Each query and key head is RMS-normalised (two weights of head_dim; saved tensors)."""
    return model_type in QK_NORM_TYPES


def router_fp32(model_type: str) -> bool:
    """The router runs on an fp32 copy of the hidden states (one more saved tensor)."""
    return model_type in ROUTER_FP32_TYPES


def routing_weights_fp32(model_type: str) -> bool:
    """The top-k routing weights are kept in fp32, not cast back to the working dtype."""
    return model_type in ROUTING_WEIGHTS_FP32_TYPES


def rmsnorm_offset(model_type: str) -> bool:
    """RMSNorm scales by 1 + weight in fp32 (the eager composite keeps an fp32 product)."""
    return model_type in RMSNORM_OFFSET_TYPES


def reads_norm_topk(model_type: str) -> bool:
    """Whether the config's `norm_topk_prob` decides the renormalisation (`norm_topk`)."""
    return model_type in NORM_TOPK_DEFAULTS


def norm_topk(model_type: str, configured: bool | None = None) -> bool:
    """The top-k routing weights divided by their sum in fp32 (their own saved tensors): always
    for NORM_TOPK_ALWAYS; for the types with the field, the config's `norm_topk_prob`
    (`configured`), else transformers' default; True for any other type (GPT-OSS's softmax over
    the top-k; a dense model has no routing weights)."""
    if model_type in NORM_TOPK_ALWAYS or not reads_norm_topk(model_type):
        return True
    return NORM_TOPK_DEFAULTS[model_type] if configured is None else configured


def sdpa_output_copy(model_type: str) -> bool:
    """transformers' RoPE of this type leaves CPU SDPA's saved output copied (memory check)."""
    return model_type in SDPA_OUTPUT_COPY_TYPES


def fused_qkv(model_type: str) -> bool:
    """transformers fuses this type's q/k/v projection into one matmul (memory check)."""
    return model_type in FUSED_QKV_TYPES
