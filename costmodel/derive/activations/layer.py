"""One decoder layer's saved tensors (``layer_saved``), under a recompute policy and FP8
storage, and their bytes per GPU (``per_gpu``, ``layer_activation_bytes``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from costmodel.derive.activations.mixers import mixer_tensors
from costmodel.derive.activations.mlp import mlp_tensors
from costmodel.derive.activations.ops import rmsnorm_saved
from costmodel.derive.activations.tables import (
    DEFAULT_RECOMPUTE_MODULES,
    ELEMENTWISE,
    FP8_ACTIVATIONS,
    FP8_BYTES,
    FRAMEWORKS,
    KERNELS,
    LINEAR_KERNELS,
    MIXERS,
    MLPS,
    MOE_IMPLEMENTATIONS,
    RECOMPUTE,
    RECOMPUTE_MODULES,
    Saved,
    as_number,
    check,
)


@dataclass(frozen=True, kw_only=True)
class _Layer:
    """The keyword arguments of ``layer_saved``: the layer's shape and how its operations save
    (see ``layer_activation_bytes``)."""

    b: object
    s: object
    hidden: object
    heads: object = 0
    kv_heads: object = None
    head_dim: object = None
    v_head_dim: object = None
    ffn: object = 0
    mlp_activation: str = "swiglu"
    qk_norm: bool = False
    q_lora_rank: object = 0
    kv_lora_rank: object = 0
    experts: object = 0
    top_k: object = 0
    moe_ffn: object = 0
    shared_ffn: object = 0
    router_fp32: bool = False
    norm_topk: bool = False
    routing_weights_fp32: bool | None = None
    shared_gate: bool = False
    output_gate: bool = False
    norm_offset: bool = False
    fused_qkv: bool = False
    attention_output_copy: bool = False
    expert_load: object = 1
    linear_key_heads: object = 0
    linear_value_heads: object = 0
    linear_key_head_dim: object = 0
    linear_value_head_dim: object = 0
    chunk: object = None  # the gated DeltaNet's: the caller's (no default: one home)
    conv_kernel: object = 4
    linear_attention_kernel: str = "fla"
    attention_kernel: str = "flash"
    elementwise: str = "fused"
    moe: str = "loop"
    softmax_fp32: bool = True
    dropout: bool = False
    recompute: str = "none"
    recompute_modules: object = None
    fp8_activations: str = "none"
    framework: str | None = None
    cp: object = 1
    bytes_per_element: object = 2


def _freed(t: Saved, modules) -> bool:
    """Whether recomputing ``modules`` frees ``t``: its own module, or ``moe``, which recomputes
    the whole MoE layer (shared experts and the expert activation included) but its input."""
    if t.module in modules:
        return True
    return "moe" in modules and t.module in ("moe_act", "shared_experts")


def _fp8(saved: list[Saved], fp8_activations: str, beta) -> list[Saved]:
    """The tensors ``fp8_activations`` stores in FP8, at FP8_BYTES an element."""
    check("fp8_activations", fp8_activations, FP8_ACTIVATIONS)
    if fp8_activations == "none":
        return saved
    return [
        replace(t, bytes=t.bytes * FP8_BYTES / beta) if fp8_activations in t.fp8 else t
        for t in saved
    ]


def _modules(recompute_modules) -> tuple[str, ...]:
    modules = DEFAULT_RECOMPUTE_MODULES if recompute_modules is None else tuple(recompute_modules)
    for module in modules:
        check("recompute_modules", module, RECOMPUTE_MODULES)
    return modules


def _selective(saved: list[Saved], inputs: list[Saved], recompute_modules) -> list[Saved]:
    """What selective recompute of ``recompute_modules`` keeps of ``saved``; ``inputs``: the
    attention core's inputs, kept to recompute it from when it is recomputed."""
    modules = _modules(recompute_modules)
    kept = [t for t in saved if not _freed(t, modules)]
    if "core_attn" in modules:  # the core's inputs stay, to recompute it from
        names = {t.name for t in kept}
        at = next((i for i, t in enumerate(kept) if t.name == "attn.output"), len(kept))
        kept[at:at] = [t for t in inputs if t.name not in names and not _freed(t, modules)]
    return kept


def _checked(kind: str, mlp: str, options: dict) -> _Layer:
    """The layer's options, a ``framework``'s rules applied, each kind checked."""
    x = _Layer(**options)
    if x.framework is not None:
        check("framework", x.framework, tuple(FRAMEWORKS))
        x = replace(x, **FRAMEWORKS[x.framework].layer_options)
    check("kind", kind, MIXERS)
    check("mlp", mlp, MLPS)
    check("recompute", x.recompute, RECOMPUTE)
    check("attention_kernel", x.attention_kernel, KERNELS)
    check("elementwise", x.elementwise, ELEMENTWISE)
    check("moe", x.moe, MOE_IMPLEMENTATIONS)
    check("linear_attention_kernel", x.linear_attention_kernel, LINEAR_KERNELS)
    return x


def layer_saved(kind: str = "attention", mlp: str = "dense", **options) -> list[Saved]:
    """The ``Saved`` tensors of one decoder layer on one context-parallel rank, before tensor
    parallelism (see ``layer_activation_bytes`` for the arguments, ``_Layer`` for their
    defaults). Kept for the arguments last seen (`_remembered`): the plan's search asks for the
    same layer under many tensor-parallel sizes, which it does not depend on."""
    values = tuple(tuple(v) if type(v) is list else v for v in options.values())
    key = (kind, mlp, tuple(options), values, tuple(map(type, options.values())))
    try:
        hash(key)
    except TypeError:  # an argument that is not hashable: computed each time
        return _layer_saved(kind, mlp, options)
    return list(_remembered(key))


@functools.lru_cache(maxsize=1024)
def _remembered(key: tuple) -> tuple[Saved, ...]:
    kind, mlp, names, values, _ = key
    return tuple(_layer_saved(kind, mlp, dict(zip(names, values))))


def _layer_saved(kind: str, mlp: str, options: dict) -> list[Saved]:
    x = _checked(kind, mlp, options)
    beta = x.bytes_per_element
    local = x.s / x.cp if x.cp != 1 else x.s
    tokens = x.b * local
    squares = x.b * local * x.s  # each rank's query rows against every key
    if x.recompute == "full":
        return [Saved("layer.input", beta * tokens * x.hidden, False)]
    ew, offset = x.elementwise, x.norm_offset
    saved = rmsnorm_saved("attn_norm", tokens, x.hidden, beta, ew, offset=offset)
    mixer, inputs = mixer_tensors(kind, x, tokens, squares)
    saved += mixer
    saved += rmsnorm_saved("mlp_norm", tokens, x.hidden, beta, ew, offset=offset)
    saved += mlp_tensors(mlp, x, tokens)
    if x.recompute == "selective":
        saved = _selective(saved, inputs, x.recompute_modules)
    saved = _fp8(saved, x.fp8_activations, beta)
    names = [t.name for t in saved]
    assert len(names) == len(set(names)), names
    return saved


def per_gpu(saved: list[Saved], tp=1, sp: bool = True) -> dict[str, object]:
    """Bytes per tensor on one GPU: split tensors divide by ``tp``; the others only with
    sequence parallelism (``sp``)."""
    return {
        t.name: as_number(t.bytes / tp if (t.split or sp) and tp != 1 else t.bytes) for t in saved
    }


def layer_activation_bytes(
    kind: str = "attention",
    mlp: str = "dense",
    *,
    tp=1,
    sp: bool = True,
    **shape,
) -> dict[str, float]:
    """Bytes one decoder layer saves for backward on one GPU, per micro batch, by tensor name.

    kind: the token mixer, ``attention`` (MHA/GQA), ``mla`` or ``gated_deltanet``; mlp: ``dense``
    (SwiGLU) or ``moe``. Keyword arguments (numbers):

    - b, s: sequences per micro batch and tokens per sequence; hidden: hidden size;
    - heads, kv_heads, head_dim (query/key head width; MLA: nope + rope), v_head_dim (value head
      width, default head_dim), qk_norm (Qwen3's per-head RMSNorm on queries and keys);
    - MLA: q_lora_rank (0: no query latent), kv_lora_rank;
    - ffn: dense SwiGLU width; MoE: experts, top_k, moe_ffn (one expert's width), shared_ffn
      (shared experts' total width, 0 if none), router_fp32 (router run on an fp32 copy, as
      DeepSeek-V3), norm_topk (top-k weights renormalised), routing_weights_fp32 (the routing
      weights kept in fp32: default router_fp32; Mixtral too), shared_gate (a sigmoid gate on
      the shared expert's output, Qwen3-Next), expert_load (busiest rank's routed rows over
      the mean; 1 when balanced);
    - output_gate: the attention output times sigmoid(gate) (Qwen3-Next); norm_offset: RMSNorm
      scaled by 1 + weight in fp32 (Gemma, Qwen3-Next; changes only the eager composite);
      fused_qkv, attention_output_copy: two layouts of transformers' code under CPU SDPA (see
      ``attention_core_saved``);
    - gated DeltaNet: linear_key_heads, linear_value_heads, linear_key_head_dim,
      linear_value_head_dim, chunk (the kernel's chunk size: required, the caller's; the
      assumption ``linear_attention_chunk`` in the report), conv_kernel (the causal
      conv1d's width), linear_attention_kernel ``fla`` (flash-linear-attention's chunked kernel
      and the causal-conv1d kernel) or ``torch`` (transformers' PyTorch fallbacks);
    - attention_kernel ``eager``/``flash``/``math``, elementwise ``fused``/``eager`` (how
      RMSNorm and SwiGLU save), recompute ``none``/``selective``/``full``;
    - tp, sp (tensor parallelism and sequence parallelism), cp (context parallelism),
      bytes_per_element (2 for BF16).

    Plain numbers in, floats out (SymPy expressions in, expressions out).
    """
    return per_gpu(layer_saved(kind, mlp, **shape), tp=tp, sp=sp)
