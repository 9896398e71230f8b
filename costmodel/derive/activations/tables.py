"""The tables of the activation rules: the options' allowed values, the bytes of the element
types, the ``Saved`` record of one tensor, the frameworks (``FRAMEWORKS``) and the
cross-entropy kinds; and the checks every rule uses (see the package's docstring)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from costmodel.derive.lanes import as_float
from costmodel.derive.numeric import RECOMPUTE_POLICIES

KERNELS = ("eager", "flash", "math")
ELEMENTWISE = ("eager", "fused")
RECOMPUTE = tuple(RECOMPUTE_POLICIES)  # the policy names, as derive.recompute defines them
MIXERS = ("attention", "mla", "gated_deltanet")
MLPS = ("dense", "moe")
LINEAR_KERNELS = ("fla", "torch")
MOE_IMPLEMENTATIONS = ("loop", "grouped")
#: Megatron-LM's ``--recompute-modules`` names (``megatron/core/transformer/transformer_config.py``)
RECOMPUTE_MODULES = (
    "core_attn",
    "mlp",
    "moe_act",
    "layernorm",
    "mla_up_proj",
    "moe",
    "shared_experts",
)
#: The modules cheapest to recompute first (no GEMMs, the attention core, then the weight
#: modules): the growing selective sets a search or the memory advice tries, in this order.
RECOMPUTE_CHEAPEST_FIRST = ("layernorm", "moe_act", "core_attn", "mla_up_proj", "shared_experts", "mlp", "moe")  # fmt: skip


def recompute_modules_of(shape) -> tuple[str, ...]:
    """The modules of RECOMPUTE_CHEAPEST_FIRST a model has (`shape`: a ModelShape): the MoE
    modules with experts, shared_experts with a shared expert, mlp with dense MLP layers,
    mla_up_proj with MLA; layernorm and core_attn always."""
    has = {
        "moe_act": shape.is_moe,
        "moe": shape.is_moe,
        "shared_experts": bool(shape.shared_expert_intermediate_size),
        "mlp": bool(shape.num_dense_layers and shape.intermediate_size),
        "mla_up_proj": shape.mla,
    }
    return tuple(m for m in RECOMPUTE_CHEAPEST_FIRST if has.get(m, True))


#: Megatron-LM's default selective set (``recompute_modules`` unset: ``["core_attn"]``).
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)
#: Which saved activations are kept in FP8 (``fp8_activations``).
FP8_ACTIVATIONS = ("none", "moe_inputs", "linear_inputs")

FP32 = 4  # bytes of an fp32 element: softmax, rstd, log-sum-exp, router probabilities
INDEX = 8  # bytes of an int64 index
INT32 = 4  # bytes of an int32 index (Transformer Engine's permutation row map)
MASK = 1  # bytes of a bool or uint8 element (a dropout mask, a routing map)
#: An FP8 element and its share of one fp32 scale per 1 x 128 tile (DeepSeek-V3's quantization).
FP8_BYTES = 1 + FP32 / 128


@dataclass(frozen=True)
class Saved:
    """One tensor kept for backward: its bytes on one rank before tensor parallelism, whether
    tensor parallelism splits it without sequence parallelism (split by heads or FFN width), the
    Megatron-LM recompute module whose recompute frees it (``""``: none does), and the
    ``fp8_activations`` settings under which it is stored in FP8."""

    name: str
    bytes: object
    split: bool
    module: str = ""
    fp8: tuple[str, ...] = ()

    @property
    def core(self) -> bool:
        """Part of the attention core (dropped by the default selective recompute)."""
        return self.module == "core_attn"


#: ``fp8`` of a linear layer's saved input, and of an MoE expert GEMM's input.
LINEAR = ("linear_inputs",)
MOE_GEMM = ("linear_inputs", "moe_inputs")


@dataclass(frozen=True)
class Framework:
    """How a framework's layers save for backward: the options of ``layer_saved`` it implies,
    its default cross-entropy, and where each rule was read."""

    name: str
    elementwise: str
    moe: str
    softmax_fp32: bool
    cross_entropy: str
    #: the gated-DeltaNet rule (``fla``: flash-linear-attention's kernel; ``torch``: the
    #: PyTorch fallback transformers runs without that package)
    linear_attention_kernel: str
    #: fp32 copies of the logits its ``fp32`` cross-entropy keeps beside the BF16 logits
    fp32_loss_copies: int
    text: str

    @property
    def layer_options(self) -> dict:
        """Keyword arguments of ``layer_saved`` / ``layer_activation_bytes``."""
        return {
            "elementwise": self.elementwise,
            "moe": self.moe,
            "softmax_fp32": self.softmax_fp32,
            "linear_attention_kernel": self.linear_attention_kernel,
        }


FRAMEWORKS: dict[str, Framework] = {
    "megatron": Framework(
        "megatron",
        elementwise="fused",
        moe="grouped",
        softmax_fp32=False,
        cross_entropy="fused",
        linear_attention_kernel="fla",
        fp32_loss_copies=1,
        text=(
            "Megatron-Core with Transformer Engine: fused RMSNorm + linear (input, fp32 rsigma, "
            "normalised output), fused SwiGLU (fc1 output only), flash attention (Q, K, V, "
            "output, fp32 log-sum-exp), MoE token permutation (an int32 row map) and grouped "
            "GEMMs with the routing weights applied in the activation, gated DeltaNet by "
            "flash-linear-attention's chunked kernel, fused cross-entropy"
        ),
    ),
    "huggingface": Framework(
        "huggingface",
        elementwise="eager",
        moe="loop",
        softmax_fp32=True,
        cross_entropy="fp32",
        linear_attention_kernel="torch",
        fp32_loss_copies=2,
        text=(
            "transformers: RMSNorm as PyTorch ops (fp32 copy of the input, rstd, normalised "
            "output), SwiGLU as separate ops (SiLU output kept), eager attention's fp32 softmax, "
            "the per-expert loop (k copies of each token, expert outputs kept for the combine), "
            "gated DeltaNet by its PyTorch fallback (flash-linear-attention not installed), "
            "the loss on an fp32 copy of the logits"
        ),
    ),
}
#: torchtitan: Megatron-Core's rules, an assumption: torch.compile fuses the norms and SwiGLU
#: as Transformer Engine does (its llama3 configs compile), and its loss casts the logits to
#: fp32 (torchtitan/components/loss.py, one copy counted as Megatron-LM's: the compiled loss
#: fuses the cast into the softmax). Trainer with FSDP runs transformers' modules:
#: huggingface's rules.
FRAMEWORKS["torchtitan"] = replace(
    FRAMEWORKS["megatron"],
    name="torchtitan",
    cross_entropy="fp32",
    text="torchtitan (compiled): Megatron-Core's saved tensors assumed (fused norms and "
    "SwiGLU, flash attention, grouped MoE GEMMs), the loss on an fp32 copy of the logits",
)
FRAMEWORKS["huggingface_fsdp"] = replace(FRAMEWORKS["huggingface"], name="huggingface_fsdp")
#: llm-foundry's MPT layers on Composer (llm-foundry 8c8dd48f): Megatron-Core's rules, as the code
#: matches them: its default norm (low_precision_layernorm) is one layer_norm kernel that saves
#: its input and the per-row statistics (a mean besides the rstd: not counted), its GELU is torch's
#: one kernel (approximate "none"), attention is flash attention, and its default loss
#: (fused_crossentropy) is flash-attn's cross-entropy with the gradient written in place.
FRAMEWORKS["composer"] = replace(
    FRAMEWORKS["megatron"],
    name="composer",
    text="llm-foundry (MPT) on Composer: Megatron-Core's saved tensors, as its kernels match them "
    "(one layer-norm kernel, torch's GELU kernel, flash attention, flash-attn's fused "
    "cross-entropy; MegaBlocks' grouped MoE GEMMs assumed)",
)
#: XTuner and EasyContext run transformers' modules: huggingface's rules. Two departures are not
#: modelled (each saves less than counted): XTuner dispatches LlamaRMSNorm to a Triton kernel
#: (xtuner/model/modules/dispatch: input and rstd only), and EasyContext's loss is flash-attn's
#: in-place cross-entropy on the fp32 logits (one fp32 copy, not two).
FRAMEWORKS["huggingface_sp"] = replace(
    FRAMEWORKS["huggingface"],
    name="huggingface_sp",
    text=FRAMEWORKS["huggingface"].text + " (XTuner, EasyContext: transformers' modules; "
    "XTuner's Triton RMSNorm and EasyContext's in-place loss, which save less, not modelled)",
)

#: What each ``cross_entropy`` keeps while the loss runs (``loss_saved``): ``fp32`` the BF16
#: logits and the framework's fp32 copies (Megatron-LM's ``VocabParallelCrossEntropy``: one fp32
#: copy turned into exp_logits in place; transformers: the fp32 copy and the fp32 log-softmax);
#: ``fused`` the BF16 logits only, the softmax gradient written in place; ``chunked`` one of
#: ``ce_chunks`` pieces of the BF16 logits at a time; ``fused_linear`` no logits (the lm_head and
#: the loss computed together chunk by chunk, as Liger-Kernel's fused linear cross-entropy).
CROSS_ENTROPY = ("fp32", "fused", "chunked", "fused_linear")


def check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: {value!r} is not one of {', '.join(allowed)}")


def is_sympy(x) -> bool:
    """Whether x is a SymPy object (SymPy is imported only by symbolic callers: a number-only
    run, `costmodel report`, never loads it)."""
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(x, sympy.Basic)


def as_number(x):
    """A float for numbers, the expression itself for SymPy expressions with free symbols."""
    if is_sympy(x):
        return x if x.free_symbols else float(x)
    return as_float(x)
