"""Activation memory: the bytes each layer saves for its backward pass, tensor by tensor.

Every layer kind is written as the list of tensors its operations keep for backward on one micro
batch of ``b`` sequences of ``s`` tokens (T = b·s token rows), each with a name, so a count can be
read, checked and compared with a measurement (``python -m costmodel.validate_memory``, which
sums the storages ``torch.autograd.graph.saved_tensors_hooks`` sees, per decoder layer).

Where the rule comes from. Korthikanti et al., "Reducing Activation Recomputation in Large
Transformer Models" (MLSys 2023, arXiv:2205.05198, section 4.1 and Table 2) count, for a GPT
layer with 2-byte activations, a 4h GELU MLP and dropout, s·b·h·(34 + 5·a·s/h) bytes: the inputs
of every GEMM and of every element-wise op that needs its input for the gradient, plus the
attention scores, the softmax output and its dropout mask (the 5·a·s/h term). With tensor
parallelism and sequence parallelism everything divides by t; without sequence parallelism the
layer-norm and dropout tensors stay whole on every rank (s·b·h·(10 + 24/t + 5·a·s/(h·t))).
Selective recompute of the attention core removes the 5·a·s/h term; full recompute keeps only
the layer's input. Megatron-LM's ``megatron/training/theoretical_memory_usage.py`` uses the
same table. Modern models change the constants (RMSNorm, SwiGLU, GQA, no dropout, MoE, MLA),
so the 34 is not copied here: each term is the tensor one operation saves.

What saves what (the autograd formulas of PyTorch, ``tools/autograd/derivatives.yaml``):

- a linear layer ``y = x W`` saves its input x (for dW = xᵀ dy); Q, K and V projections (or
  gate and up) that read the same x share one saved tensor;
- RMSNorm. A fused kernel (Megatron-LM/Transformer Engine, Apex) saves its input and one fp32
  reciprocal RMS per row (``elementwise="fused"``). The PyTorch composite that Hugging Face
  models run (``x.float()``, ``pow``, ``mean``, ``rsqrt``, ``mul``, cast back, ``weight *``)
  saves the fp32 copy of the input, the fp32 rstd and the normalised tensor in the working
  dtype (for the weight's gradient) (``elementwise="eager"``); a norm that scales by 1 + weight
  in fp32 before the cast back (Gemma, Qwen3-Next) keeps the normalised tensor in fp32 and the
  fp32 1 + weight vector instead (``norm_offset``);
- a gate that multiplies an output (Qwen3-Next's attention output gate, ``output_gate``, and its
  shared expert's gate, ``shared_gate``) keeps both factors: the sigmoid and the gated output;
- RoPE multiplies by cos and sin, which need no gradient: it saves only cos and sin, computed
  once per forward and shared by every layer (a model-level term, ``model_activation_bytes``);
- SwiGLU ``down(silu(gate(x)) * up(x))``: the gate and up outputs, the SiLU output (eager: the
  product saves both of its operands) and the product (the down projection's input). A fused
  SwiGLU kernel (Megatron-LM ``bias_swiglu``) recomputes the SiLU from the gate output: no SiLU
  term;
- the attention core, by kernel (``attention_kernel``):

  ``eager`` (QKᵀ, softmax, AV as separate ops): Q, K and V with K and V expanded to the query
  heads (``repeat_kv``), the softmax output and the probabilities fed to AV. Hugging Face's eager
  path runs ``softmax(..., dtype=float32)`` and casts back: the fp32 softmax output (4 bytes per
  score) and the cast probabilities (β bytes) are both kept, so (4 + β) bytes per element of the
  s x s square, per head;

  ``flash`` (FlashAttention, Dao et al., arXiv:2205.14135; SDPA's flash kernels, Transformer
  Engine): Q, K, V at their own (KV-head) width, the output (the output projection's input,
  counted once) and one fp32 log-sum-exp per query row and head. No s² term;

  ``math`` (PyTorch's composite SDPA, which CPU SDPA runs when the query/key and value head
  widths differ, as in MLA): computed in fp32 on CPU, it keeps fp32 copies of Q, K, V (K and V
  expanded) and one fp32 s x s probability tensor per head;

- MoE (the per-expert loop of Hugging Face's eager experts, ``experts_implementation="eager"``):
  the router's probabilities (fp32) and top-k indices, each token's hidden state copied k times
  (one copy per chosen expert), the expert SwiGLU intermediates on those k·T rows, the routing
  weight per row, the expert output (scaled by that weight) and the scaled copy that is summed
  back (``index_add_``), and the (slot, token) index pairs of each expert;
- MLA (DeepSeek-V2/V3, arXiv:2405.04434): the query and key/value latents (their RMSNorms and
  the up projections' inputs), then the attention core on the decompressed heads (query/key width
  nope + rope, value width v_head_dim);
- gated DeltaNet (Yang et al., arXiv:2412.06464), modelled on the chunked kernel of
  flash-linear-attention (``fla/ops/gated_delta_rule/chunk.py``: ``ChunkGatedDeltaRuleFunction``
  saves q, k (L2-normalised, with their fp32 rstd), v, the fp32 log-decay, beta and the per-chunk
  WY matrix A, C values per token and head) and the layer around it (Qwen3-Next in transformers:
  causal conv1d input, the gate's softplus, a gated RMSNorm, the output projection's input)
  (``linear_attention_kernel="fla"``). Without that package (on CPU, or on a GPU where it is not
  installed) transformers runs its PyTorch fallbacks, which keep many more fp32 intermediates:
  ``linear_attention_kernel="torch"`` is their rule, the one ``costmodel.validate_memory``
  measures;

Policies (``recompute``): ``none`` keeps every tensor; ``selective`` recomputes the modules named
in ``recompute_modules`` (Megatron-LM's names, ``RECOMPUTE_MODULES``; its default set is
``core_attn``, Korthikanti et al. section 5): each tensor carries the module whose recompute frees
it (``Saved.module``), so the recomputed modules' tensors are dropped and only their inputs stay.
``core_attn`` drops the core's own tensors (the s x s terms, the log-sum-exp, the expanded or fp32
copies) and keeps Q, K, V at KV-head width and its output; ``layernorm`` drops the norms' outputs
(the next linear's saved input); ``mla_up_proj`` the MLA up-projections' inputs and outputs (the
decompressed Q, K, V); ``mlp`` the dense MLP's intermediates; ``moe_act`` the expert activation's
output; ``shared_experts`` the shared experts' intermediates; ``moe`` everything the MoE layer saves
but its input. ``full`` keeps each layer's input, and during the backward one layer at a time is
recomputed in full (``stage_activation_bytes`` adds that working set once).

Frameworks (``FRAMEWORKS``, the scenario key ``framework``): which of these rules a run follows.
``megatron`` is Megatron-Core with Transformer Engine, as a large run uses it; ``huggingface`` is
what transformers keeps (the rules ``costmodel.validate_memory`` measures). The rules and the
files they were read from:

- RMSNorm + the next linear (Transformer Engine ``transformer_engine/pytorch/module/
  layernorm_linear.py``, ``_LayerNormLinear.forward``: ``prepare_for_saving(inputmat, ..., ln_out,
  mu, rsigma)``): the norm's input, one fp32 rsigma per row and the normalised output (the
  linear's input), which is ``elementwise="fused"``; transformers' composite is ``"eager"``;
- SwiGLU (Megatron-LM ``megatron/core/fusions/fused_bias_swiglu.py``, ``SwiGLUFunction`` and
  ``WeightedSwiGLUFunction``: ``ctx.save_for_backward(input_for_backward[, weights])``): the fc1
  output (gate and up) and, for the routed experts, the fp32 routing weight per row; the SiLU is
  recomputed in the backward (``"fused"``); transformers keeps the SiLU output too (``"eager"``);
- the attention core: Transformer Engine's flash/fused kernels save Q, K, V, the output and the
  fp32 log-sum-exp (``attention_kernel: flash``); Megatron-Core's unfused ``DotProductAttention``
  (``megatron/core/transformer/dot_product_attention.py``, with ``FusedScaleMaskSoftmax``) keeps
  the softmax output in BF16, no fp32 copy (``softmax_fp32=False``), plus its dropout mask and
  output when attention dropout is on (``dropout=True``, Korthikanti et al.'s 5·a·s/h term);
- MoE (``moe="grouped"``): the router's gating linear saves its BF16 input
  (``megatron/core/transformer/moe/moe_utils.py``, ``RouterGatingLinearFunction``: the fp32
  cast happens inside), the fused top-k saves the routing map and one fp32 score per token and
  expert (Transformer Engine ``transformer_engine/pytorch/router.py``,
  ``FusedTopkScoreFunction``: ``save_for_backward(routing_output, intermediate_output)``); the
  token permutation saves only its int32 row map, T x (2E + 1) (``transformer_engine/pytorch/
  permutation.py``, ``_moe_permute_mask_map_setup_context``: ``save_for_backward(row_id_map,
  pad_offsets)``; the unpermute without merging probs saves the same map); the grouped GEMMs
  (``megatron/core/transformer/moe/experts.py``, ``TEGroupedMLP.forward``) save the routed rows
  (fc1's input), the weighted SwiGLU's input and weights, and fc2's input; the routing weights
  are applied inside the activation, so no expert output is kept for the combine. The per-expert
  loop of transformers (``moe="loop"``) is the list under "MoE" above;
- cross-entropy (``loss_saved``): see ``CROSS_ENTROPY``.

FP8 storage (``fp8_activations``): Transformer Engine's FP8 GEMMs keep the FP8 copy of a linear
layer's input for the backward (``linear_inputs``); DeepSeek-V3 (arXiv:2412.19437, section 3.3,
"Low-Precision Storage and Communication") caches the inputs of the MoE experts' GEMMs and of
their SwiGLU in FP8 (``moe_inputs``; Megatron-LM ``activation_func_fp8_input_store``). An FP8
element is one byte plus one fp32 scale per 128 elements (the 1 x 128 tiles of DeepSeek-V3's
fine-grained quantization): ``FP8_BYTES``.

Division per GPU: a tensor split by heads or by FFN/expert width divides by the tensor-parallel
size t; a tensor with the full hidden width per token (norms, the projections' shared input, the
router, the routed token copies) divides by t only with sequence parallelism. Context
parallelism gives each rank s/c_p of the tokens: every per-token term divides by c_p, and an s x s
term becomes (s/c_p) x s (a rank's queries against all keys). The busiest expert-parallel rank
holds ``expert_load`` times the mean number of routed rows (1 when balanced).

The same functions build SymPy expressions when given SymPy symbols (``symbolic_layer_bytes``),
and byte counts (floats) when given numbers.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

from costmodel.derive.numeric import RECOMPUTE_POLICIES

KERNELS = ("eager", "flash", "math")
ELEMENTWISE = ("eager", "fused")
RECOMPUTE = tuple(
    RECOMPUTE_POLICIES
)  # the policy names, as costmodel.derive.recompute defines them
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

#: What each ``cross_entropy`` keeps while the loss runs (``loss_saved``): ``fp32`` the BF16
#: logits and the framework's fp32 copies (Megatron-LM's ``VocabParallelCrossEntropy``: one fp32
#: copy turned into exp_logits in place; transformers: the fp32 copy and the fp32 log-softmax);
#: ``fused`` the BF16 logits only, the softmax gradient written in place; ``chunked`` one of
#: ``ce_chunks`` pieces of the BF16 logits at a time; ``fused_linear`` no logits (the lm_head and
#: the loss computed together chunk by chunk, as Liger-Kernel's fused linear cross-entropy).
CROSS_ENTROPY = ("fp32", "fused", "chunked", "fused_linear")


def _check(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}: {value!r} is not one of {', '.join(allowed)}")


def _sympy(x) -> bool:
    """Whether x is a SymPy object (SymPy is imported only by symbolic callers: a number-only
    run, `costmodel report`, never loads it)."""
    sympy = sys.modules.get("sympy")
    return sympy is not None and isinstance(x, sympy.Basic)


def _number(x):
    """A float for numbers, the expression itself for SymPy expressions with free symbols."""
    if _sympy(x):
        return x if x.free_symbols else float(x)
    return float(x)


def rmsnorm_saved(
    prefix: str, rows, width, beta, elementwise: str, split: bool = False, offset: bool = False
):
    """RMSNorm over ``rows`` rows of ``width``: fused saves its input and the fp32 rstd; the
    PyTorch composite (eager) saves the fp32 copy of the input, the rstd and the normalised
    tensor in the working dtype. Its output is saved by the op that reads it (not here).

    ``offset``: the scale is ``1 + weight`` applied in fp32 before the cast back (Gemma,
    Qwen3-Next, Qwen3.5 in transformers): the eager composite keeps the normalised tensor in
    fp32 and the fp32 ``1 + weight`` vector (``width`` values, once per norm)."""
    _check("elementwise", elementwise, ELEMENTWISE)
    if elementwise == "fused":
        return [
            Saved(f"{prefix}.input", beta * rows * width, split),
            Saved(f"{prefix}.rstd", FP32 * rows, split),
        ]
    saved = [
        Saved(f"{prefix}.input_fp32", FP32 * rows * width, split),
        Saved(f"{prefix}.rstd", FP32 * rows, split),
    ]
    if not offset:
        return saved + [Saved(f"{prefix}.normalized", beta * rows * width, split)]
    return saved + [
        Saved(f"{prefix}.normalized_fp32", FP32 * rows * width, split),
        Saved(f"{prefix}.scale_fp32", FP32 * width, False),
    ]


def attention_core_saved(
    kernel: str,
    tokens,
    squares,
    heads,
    kv_heads,
    qk_dim,
    v_dim,
    beta,
    prefix="attn",
    fused_qkv=False,
    output_copy=False,
    *,
    softmax_fp32: bool = True,
    dropout: bool = False,
    input_module: str = "",
):
    """The attention core's saved tensors for ``tokens`` query rows and ``squares`` = Σ (query
    rows x key rows) per head; and its inputs, kept instead under selective recompute.

    Returns (saved, inputs). Q, K, V of the flash kernel are its inputs (not core); the eager and
    math paths keep expanded or fp32 copies, which are core. ``softmax_fp32``: the eager softmax
    keeps an fp32 output beside the probabilities (transformers) or only the probabilities in
    the working dtype (Megatron-Core's fused softmax); ``dropout``: attention dropout keeps its
    mask (one byte a score) and its output. ``input_module``: the recompute module that frees
    the inputs (MLA: ``mla_up_proj``, which rebuilds Q, K, V).

    Two layouts of transformers' code on CPU SDPA (``flash``): ``fused_qkv``, one projection for
    q, k and v (Phi-3's qkv_proj): the value the kernel saves is a view of that output, so the
    whole output stays (its q and k parts, ``.qkv_fused``; also eager attention when nothing
    expands the value heads); ``output_copy``, a query left heads-major by a RoPE built with
    torch.cat (transformers' partial-rotary form, which Phi-3 and Qwen3-Next use): the kernel's
    output follows that layout and is saved by it, and its token-major copy is the next op's
    input (``.kernel_output``, core)."""
    _check("attention_kernel", kernel, KERNELS)
    core = "core_attn"
    inputs = [
        Saved(f"{prefix}.q", beta * tokens * heads * qk_dim, True, input_module),
        Saved(f"{prefix}.k", beta * tokens * kv_heads * qk_dim, True, input_module),
        Saved(f"{prefix}.v", beta * tokens * kv_heads * v_dim, True, input_module),
    ]
    if fused_qkv and (kernel == "flash" or (kernel == "eager" and kv_heads == heads)):
        inputs.append(
            Saved(f"{prefix}.qkv_fused", beta * tokens * (heads + kv_heads) * qk_dim, True)
        )
    if kernel == "flash":
        saved = inputs + [Saved(f"{prefix}.lse", FP32 * tokens * heads, True, core)]
        if output_copy:
            saved.append(
                Saved(f"{prefix}.kernel_output", beta * tokens * heads * v_dim, True, core)
            )
        return saved, inputs
    extra = inputs[3:]  # the fused projection's output, kept by the value view
    if kernel == "eager":
        saved = [
            Saved(f"{prefix}.q", beta * tokens * heads * qk_dim, True, core),
            Saved(f"{prefix}.k", beta * tokens * heads * qk_dim, True, core),
            Saved(f"{prefix}.v", beta * tokens * heads * v_dim, True, core),
        ]
        if softmax_fp32:
            saved.append(Saved(f"{prefix}.softmax_fp32", FP32 * heads * squares, True, core))
        saved.append(Saved(f"{prefix}.probs", beta * heads * squares, True, core))
        if dropout:
            saved += [
                Saved(f"{prefix}.dropout_mask", MASK * heads * squares, True, core),
                Saved(f"{prefix}.dropout_output", beta * heads * squares, True, core),
            ]
        return saved + extra, inputs
    saved = [  # math, fp32 on CPU
        Saved(f"{prefix}.q_fp32", FP32 * tokens * heads * qk_dim, True, core),
        Saved(f"{prefix}.k_fp32", FP32 * tokens * heads * qk_dim, True, core),
        Saved(f"{prefix}.v_fp32", FP32 * tokens * heads * v_dim, True, core),
        Saved(f"{prefix}.scores_fp32", FP32 * heads * squares, True, core),
    ]
    return saved, inputs


def swiglu_saved(
    prefix: str, rows, width, beta, elementwise: str, module: str = "mlp", act_module=None
):
    """A SwiGLU MLP's intermediates on ``rows`` rows of ``width`` (its input is counted by the
    caller): gate and up outputs, the SiLU output (eager only), the product (down's input).
    ``module`` frees them all under selective recompute; ``act_module`` (``moe_act``) frees
    what the activation produces (the SiLU output and the product)."""
    _check("elementwise", elementwise, ELEMENTWISE)
    act = act_module or module
    fp8 = MOE_GEMM if module == "moe" else LINEAR
    saved = [
        Saved(f"{prefix}.gate", beta * rows * width, True, module, fp8[1:]),
        Saved(f"{prefix}.up", beta * rows * width, True, module, fp8[1:]),
    ]
    if elementwise == "eager":
        saved.append(Saved(f"{prefix}.silu", beta * rows * width, True, act))
    saved.append(Saved(f"{prefix}.down_input", beta * rows * width, True, act, fp8))
    return saved


def gelu_mlp_saved(prefix: str, rows, hidden, width, beta, elementwise: str):
    """A two-matrix MLP ``fc2(act(fc1(x)))`` on ``rows`` rows, ``hidden`` -> ``width`` ->
    ``hidden`` (GELU: GPT-2/3, GPT-NeoX, Megatron-LM's GPT; squared ReLU: Nemotron), its input
    included: the input x (fc1's, for dW1), fc1's output (the activation's backward needs its
    input) and the activation's output (fc2's input, for dW2).

    ``fused`` is one activation kernel: torch's ``gelu`` (exact or ``approximate="tanh"``),
    Megatron-LM's ``bias_gelu`` fusion and Transformer Engine save only that kernel's input, so
    the three tensors are the whole set. ``eager`` is the tanh approximation written as separate
    ops (transformers' ``gelu_new``, GPT-2's default: ``0.5·x·(1 + tanh(c·(x + 0.044715·x³)))``):
    ``pow`` keeps x, ``tanh`` its output, the last product both factors (0.5·x and 1 + tanh),
    three more tensors of ``width``. Squared ReLU eager (``relu`` then ``square``) keeps the ReLU
    output in place of fc1's output: the same bytes as ``fused``.

    Korthikanti et al. (arXiv:2205.05198, section 4.1) count a 4h GELU MLP as 19·s·b·h bytes:
    2sbh (fc1's input) + 8sbh (GELU's input) + 8sbh (fc2's input) + sbh (the dropout mask, one
    byte per element); with no dropout, as here, the three tensors are 18·s·b·h."""
    _check("elementwise", elementwise, ELEMENTWISE)
    saved = [
        Saved(f"{prefix}.input", beta * rows * hidden, False, "layernorm", LINEAR),
        Saved(f"{prefix}.act_input", beta * rows * width, True, "mlp"),
    ]
    if elementwise == "eager":
        saved += [
            Saved(f"{prefix}.tanh", beta * rows * width, True, "mlp"),
            Saved(f"{prefix}.half_input", beta * rows * width, True, "mlp"),
            Saved(f"{prefix}.one_plus_tanh", beta * rows * width, True, "mlp"),
        ]
    saved.append(Saved(f"{prefix}.down_input", beta * rows * width, True, "mlp", LINEAR))
    return saved


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
    _check("linear_attention_kernel", kernel, LINEAR_KERNELS)
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
    if _sympy(x) and x.free_symbols:
        return sys.modules["sympy"].ceiling(x)
    return math.ceil(x)


def _min(a, b):
    symbolic = any(_sympy(x) and x.free_symbols for x in (a, b))
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


def _moe_loop(
    tokens,
    hidden,
    experts,
    top_k,
    expert_ffn,
    shared_ffn,
    router_fp32,
    norm_topk,
    load,
    ew,
    beta,
    weights_fp32=None,
    shared_gate=False,
):
    """transformers' per-expert loop (``experts_implementation="eager"``)."""
    routed = top_k * tokens * load  # rows the (busiest) rank's experts run
    saved = [Saved("moe.input", beta * tokens * hidden, False, "layernorm")]
    if router_fp32:  # DeepSeek-V3: router logits computed from an fp32 copy of the input
        saved.append(Saved("moe.router_input_fp32", FP32 * tokens * hidden, False, "moe"))
    saved += [
        Saved("moe.router_probs", FP32 * tokens * experts, False, "moe"),
        Saved("moe.topk_indices", INDEX * tokens * top_k, False, "moe"),
    ]
    if norm_topk:  # the top-k weights divided by their sum (fp32)
        saved += [
            Saved("moe.topk_weights", FP32 * tokens * top_k, False, "moe"),
            Saved("moe.topk_sum", FP32 * tokens, False, "moe"),
        ]
    # the routing weights stay fp32 when the router does not cast them back (DeepSeek-V3, Mixtral)
    weight_bytes = FP32 if (router_fp32 if weights_fp32 is None else weights_fp32) else beta
    saved += [
        Saved("moe.dispatch_indices", 2 * INDEX * routed, False, "moe"),
        Saved("moe.routed_input", beta * routed * hidden, False, "moe", MOE_GEMM),
    ]
    saved += swiglu_saved("moe.expert", routed, expert_ffn, beta, ew, "moe", "moe_act")
    saved += [
        Saved("moe.routing_weights", weight_bytes * routed, False, "moe"),
        Saved("moe.expert_output", beta * routed * hidden, False, "moe"),
        Saved("moe.combine_input", beta * routed * hidden, False, "moe"),
    ]
    if shared_ffn:
        saved += swiglu_saved("moe.shared", tokens, shared_ffn, beta, ew, "shared_experts")
        if shared_gate:  # Qwen3-Next: sigmoid(gate(x)) * shared output keeps both factors
            saved += [
                Saved("moe.shared_gate", beta * tokens, False, "shared_experts"),
                Saved("moe.shared_output", beta * tokens * hidden, False, "shared_experts"),
            ]
    return saved


def _moe_grouped(tokens, hidden, experts, expert_ffn, shared_ffn, routed, ew, beta):
    """Megatron-Core's MoE layer: fused router, token permutation, grouped GEMMs (see the module
    docstring for the files). ``routed``: the rows this rank's experts run."""
    saved = [
        Saved("moe.input", beta * tokens * hidden, False, "layernorm"),
        Saved("moe.router_scores", FP32 * tokens * experts, False, "moe"),
        Saved("moe.routing_map", MASK * tokens * experts, False, "moe"),
        Saved("moe.row_id_map", INT32 * tokens * (2 * experts + 1), False, "moe"),
        Saved("moe.routed_input", beta * routed * hidden, False, "moe", MOE_GEMM),
        Saved("moe.sort_chunks_map", INT32 * routed, False, "moe"),
        Saved("moe.permuted_probs", FP32 * routed, False, "moe"),
    ]
    saved += swiglu_saved("moe.expert", routed, expert_ffn, beta, ew, "moe", "moe_act")
    if shared_ffn:
        saved += swiglu_saved("moe.shared", tokens, shared_ffn, beta, ew, "shared_experts")
    return saved


def _freed(t: Saved, modules) -> bool:
    """Whether recomputing ``modules`` frees ``t``: its own module, or ``moe``, which recomputes
    the whole MoE layer (shared experts and the expert activation included) but its input."""
    if t.module in modules:
        return True
    return "moe" in modules and t.module in ("moe_act", "shared_experts")


def _fp8(saved: list[Saved], fp8_activations: str, beta) -> list[Saved]:
    """The tensors ``fp8_activations`` stores in FP8, at FP8_BYTES an element."""
    _check("fp8_activations", fp8_activations, FP8_ACTIVATIONS)
    if fp8_activations == "none":
        return saved
    return [
        replace(t, bytes=t.bytes * FP8_BYTES / beta) if fp8_activations in t.fp8 else t
        for t in saved
    ]


def _modules(recompute_modules) -> tuple[str, ...]:
    modules = DEFAULT_RECOMPUTE_MODULES if recompute_modules is None else tuple(recompute_modules)
    for module in modules:
        _check("recompute_modules", module, RECOMPUTE_MODULES)
    return modules


def layer_saved(
    kind: str = "attention",
    mlp: str = "dense",
    *,
    b,
    s,
    hidden,
    heads=0,
    kv_heads=None,
    head_dim=None,
    v_head_dim=None,
    ffn=0,
    mlp_activation: str = "swiglu",
    qk_norm: bool = False,
    q_lora_rank=0,
    kv_lora_rank=0,
    experts=0,
    top_k=0,
    moe_ffn=0,
    shared_ffn=0,
    router_fp32: bool = False,
    norm_topk: bool = False,
    routing_weights_fp32: bool | None = None,
    shared_gate: bool = False,
    output_gate: bool = False,
    norm_offset: bool = False,
    fused_qkv: bool = False,
    attention_output_copy: bool = False,
    expert_load=1,
    linear_key_heads=0,
    linear_value_heads=0,
    linear_key_head_dim=0,
    linear_value_head_dim=0,
    chunk=64,
    conv_kernel=4,
    linear_attention_kernel: str = "fla",
    attention_kernel: str = "flash",
    elementwise: str = "fused",
    moe: str = "loop",
    softmax_fp32: bool = True,
    dropout: bool = False,
    recompute: str = "none",
    recompute_modules=None,
    fp8_activations: str = "none",
    framework: str | None = None,
    cp=1,
    bytes_per_element=2,
) -> list[Saved]:
    """The ``Saved`` tensors of one decoder layer on one context-parallel rank, before tensor
    parallelism (see ``layer_activation_bytes`` for the arguments)."""
    if framework is not None:
        _check("framework", framework, tuple(FRAMEWORKS))
        options = FRAMEWORKS[framework].layer_options
        elementwise, moe, softmax_fp32, linear_attention_kernel = (
            options["elementwise"],
            options["moe"],
            options["softmax_fp32"],
            options["linear_attention_kernel"],
        )
    _check("kind", kind, MIXERS)
    _check("mlp", mlp, MLPS)
    _check("recompute", recompute, RECOMPUTE)
    _check("attention_kernel", attention_kernel, KERNELS)
    _check("elementwise", elementwise, ELEMENTWISE)
    _check("moe", moe, MOE_IMPLEMENTATIONS)
    _check("linear_attention_kernel", linear_attention_kernel, LINEAR_KERNELS)
    beta = bytes_per_element
    local = s / cp if cp != 1 else s
    tokens = b * local
    squares = b * local * s  # each rank's query rows against every key
    if recompute == "full":
        return [Saved("layer.input", beta * tokens * hidden, False)]
    o = _Options(
        attention_kernel,
        elementwise,
        softmax_fp32,
        dropout,
        beta,
        norm_offset=norm_offset,
        output_gate=output_gate,
        fused_qkv=fused_qkv,
        output_copy=attention_output_copy,
    )
    saved = rmsnorm_saved("attn_norm", tokens, hidden, beta, elementwise, offset=norm_offset)
    inputs: list[Saved] = []
    if kind == "attention":
        kv = heads if kv_heads is None else kv_heads
        hd = hidden // heads if head_dim is None else head_dim
        vd = hd if v_head_dim is None else v_head_dim
        mixer, inputs = _attention(o, tokens, squares, hidden, heads, kv, hd, vd, qk_norm)
    elif kind == "mla":
        mixer, inputs = _mla(
            o, tokens, squares, hidden, heads, head_dim, v_head_dim, q_lora_rank, kv_lora_rank
        )
    else:
        mixer = _gated_deltanet(
            tokens,
            hidden,
            linear_key_heads,
            linear_value_heads,
            linear_key_head_dim,
            linear_value_head_dim,
            chunk,
            beta,
            kernel=linear_attention_kernel,
            ew=elementwise,
            sequences=b,
            conv_kernel=conv_kernel,
        )
    saved += mixer
    saved += rmsnorm_saved("mlp_norm", tokens, hidden, beta, elementwise, offset=norm_offset)
    if mlp == "dense" and mlp_activation == "gelu":
        saved += gelu_mlp_saved("mlp", tokens, hidden, ffn, beta, elementwise)
    elif mlp == "dense":
        saved.append(Saved("mlp.input", beta * tokens * hidden, False, "layernorm", LINEAR))
        saved += swiglu_saved("mlp", tokens, ffn, beta, elementwise)
        if dropout:  # the dropout after the MLP (full hidden width)
            saved.append(Saved("mlp.dropout_mask", MASK * tokens * hidden, False))
    elif moe == "grouped":
        routed = top_k * tokens * expert_load
        saved += _moe_grouped(
            tokens, hidden, experts, moe_ffn, shared_ffn, routed, elementwise, beta
        )
    else:
        saved += _moe_loop(
            tokens,
            hidden,
            experts,
            top_k,
            moe_ffn,
            shared_ffn,
            router_fp32,
            norm_topk,
            expert_load,
            elementwise,
            beta,
            weights_fp32=routing_weights_fp32,
            shared_gate=shared_gate,
        )
    if recompute == "selective":
        modules = _modules(recompute_modules)
        kept = [t for t in saved if not _freed(t, modules)]
        if "core_attn" in modules:  # the core's inputs stay, to recompute it from
            names = {t.name for t in kept}
            at = next((i for i, t in enumerate(kept) if t.name == "attn.output"), len(kept))
            kept[at:at] = [t for t in inputs if t.name not in names and not _freed(t, modules)]
        saved = kept
    saved = _fp8(saved, fp8_activations, beta)
    names = [t.name for t in saved]
    assert len(names) == len(set(names)), names
    return saved


def per_gpu(saved: list[Saved], tp=1, sp: bool = True) -> dict[str, object]:
    """Bytes per tensor on one GPU: split tensors divide by ``tp``; the others only with
    sequence parallelism (``sp``)."""
    return {
        t.name: _number(t.bytes / tp if (t.split or sp) and tp != 1 else t.bytes) for t in saved
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
      linear_value_head_dim, chunk (the kernel's chunk size, 64), conv_kernel (the causal
      conv1d's width), linear_attention_kernel ``fla`` (flash-linear-attention's chunked kernel
      and the causal-conv1d kernel) or ``torch`` (transformers' PyTorch fallbacks);
    - attention_kernel ``eager``/``flash``/``math``, elementwise ``fused``/``eager`` (how
      RMSNorm and SwiGLU save), recompute ``none``/``selective``/``full``;
    - tp, sp (tensor parallelism and sequence parallelism), cp (context parallelism),
      bytes_per_element (2 for BF16).

    Plain numbers in, floats out (SymPy expressions in, expressions out).
    """
    return per_gpu(layer_saved(kind, mlp, **shape), tp=tp, sp=sp)


def model_activation_bytes(
    *,
    b,
    s,
    hidden,
    vocab,
    rope_head_dim=0,
    elementwise: str = "fused",
    norm_offset: bool = False,
    loss_fp32: bool = True,
    logits_chunks=1,
    output_logits: bool = True,
    checkpointed: bool = False,
    attention_kernel: str = "flash",
    tp=1,
    sp: bool = True,
    cp=1,
    bytes_per_element=2,
) -> dict[str, float]:
    """Bytes outside the decoder layers, per micro batch on one GPU: the token ids (int64, saved by
    the embedding and, as targets, by the loss), RoPE's cos and sin (computed once for the
    (1, s) positions and shared by every layer), the final norm, the lm_head input and the
    logits.

    Logits (``costmodel.derive.memory``): b·s·V·β for the model's output, held while the loss
    runs (not saved for backward: ``output_logits=False`` leaves it out), and b·s·V·4 for the fp32
    log-softmax the loss keeps when it upcasts (``loss_fp32``). Chunked cross-entropy keeps
    1/``logits_chunks`` of both; a vocabulary-parallel lm_head divides them by tp.

    ``checkpointed`` (every layer under ``torch.utils.checkpoint``, as transformers' gradient
    checkpointing runs it): the checkpoints also keep the keyword arguments transformers passes to
    every layer until the backward: the (1, s) int64 position ids and, for ``eager`` attention
    (``attention_kernel``), the b x 1 x s x s additive causal mask in the working dtype (SDPA's
    and flash kernels take no mask: is_causal).
    """
    beta = bytes_per_element
    local = s / cp if cp != 1 else s
    tokens = b * local
    saved = [Saved("embedding.token_ids", INDEX * tokens, False)]
    if rope_head_dim:
        saved += [
            Saved("rope.cos", beta * local * rope_head_dim, False),
            Saved("rope.sin", beta * local * rope_head_dim, False),
        ]
    saved += rmsnorm_saved("final_norm", tokens, hidden, beta, elementwise, offset=norm_offset)
    saved.append(Saved("lm_head.input", beta * tokens * hidden, False))
    if checkpointed:
        saved.append(Saved("checkpoint.position_ids", INDEX * local, False))
        if attention_kernel == "eager":
            saved.append(Saved("checkpoint.attention_mask", beta * tokens * s, False))
    saved += logits_saved(tokens, vocab, beta, loss_fp32, logits_chunks, output_logits)
    return per_gpu(saved, tp=tp, sp=sp)


def logits_saved(tokens, vocab, beta, loss_fp32=True, logits_chunks=1, output_logits=True):
    """The logits terms (split: a vocabulary-parallel lm_head divides them by tp)."""
    saved = []
    if output_logits:
        saved.append(Saved("logits", beta * tokens * vocab / logits_chunks, True))
    if loss_fp32:
        saved.append(Saved("logits_fp32", FP32 * tokens * vocab / logits_chunks, True))
    return saved


def loss_saved(
    tokens, vocab, beta=2, cross_entropy: str = "fused", chunks=1, framework: str = "megatron"
) -> list[Saved]:
    """What the cross-entropy keeps while the loss runs, over ``tokens`` rows of ``vocab``
    logits (split: a vocabulary-parallel lm_head divides them by tp); see ``CROSS_ENTROPY``."""
    _check("cross_entropy", cross_entropy, CROSS_ENTROPY)
    _check("framework", framework, tuple(FRAMEWORKS))
    logits = tokens * vocab
    if cross_entropy == "fused_linear":
        return []
    if cross_entropy == "fused":
        return [Saved("logits", beta * logits, True)]
    if cross_entropy == "chunked":
        return [Saved("logits_chunk", beta * logits / chunks, True)]
    saved = [Saved("logits", beta * logits, True), Saved("logits_fp32", FP32 * logits, True)]
    if FRAMEWORKS[framework].fp32_loss_copies > 1:
        saved.append(Saved("log_softmax_fp32", FP32 * logits, True))
    return saved


def in_flight_micro_batches(pp=1, num_micro_batches=None, virtual_stages=1):
    """Micro batches whose activations the first pipeline stage holds at the peak (1F1B).

    1F1B (Narayanan et al., arXiv:2104.04473) runs p forwards on the first stage before its first
    backward: p micro batches in flight (fewer if the step has fewer, m < p). The interleaved
    schedule with v model chunks per stage holds p + (p - 1)/v: Megatron-LM's
    ``interleaved_schedule_memory_penalty`` 1 + (p - 1)/(p·v), times p."""
    if pp == 1:
        return 1
    if virtual_stages and virtual_stages > 1:
        return pp + (pp - 1) / virtual_stages
    return pp if num_micro_batches is None else min(num_micro_batches, pp)


def stage_activation_bytes(
    layers: list[dict[str, float]],
    *,
    in_flight=1,
    recompute_working_set: dict[str, float] | None = None,
    extra: dict[str, float] | None = None,
) -> dict[str, float]:
    """Activation bytes of one pipeline stage: its layers' bytes (one dict per layer, from
    ``layer_activation_bytes``) times the micro batches in flight, plus, under full recompute,
    one layer's full set (``recompute_working_set``: the largest layer with recompute ``none``,
    rebuilt during that layer's backward, once), plus ``extra`` (``model_activation_bytes`` on
    the first or last stage) times the micro batches in flight."""
    per_micro_batch = sum(sum(layer.values()) for layer in layers)
    out = {"layers": per_micro_batch * in_flight}
    if recompute_working_set:
        out["recompute_working_set"] = sum(recompute_working_set.values())
    if extra:
        out["outside_layers"] = sum(extra.values()) * in_flight
    out["total"] = sum(out.values())
    return out


def symbolic_layer_bytes(
    kind: str = "attention",
    mlp: str = "dense",
    *,
    attention_kernel: str = "flash",
    elementwise: str = "fused",
    recompute: str = "none",
    sp: bool = True,
    **options,
) -> dict[str, object]:
    """``layer_activation_bytes`` in the symbols of ``costmodel.derive.symbols`` (b, s, h, n_h,
    n_kv, d_h, d_hv, d_ff, E, k_top, d_e, r_q, r_kv, the gated-DeltaNet widths and chunk C, β,
    t_p, c_p). ``options`` passes the flags (qk_norm, router_fp32, norm_topk) or overrides a
    symbol with a number (for example shared_ffn=0)."""
    import sympy

    from costmodel.derive.symbols import (
        C,
        E,
        b_micro,
        bytes_per_element,
        c_p,
        d_e,
        d_ff,
        d_head,
        d_hv,
        d_k,
        d_v,
        h,
        k_top,
        n_heads,
        n_k,
        n_kv,
        n_v,
        r_kv,
        r_q,
        s,
        t_p,
    )

    shape = {
        "b": b_micro,
        "s": s,
        "hidden": h,
        "heads": n_heads,
        "kv_heads": n_kv,
        "head_dim": d_head,
        "v_head_dim": d_hv,
        "ffn": d_ff,
        "q_lora_rank": r_q,
        "kv_lora_rank": r_kv,
        "experts": E,
        "top_k": k_top,
        "moe_ffn": d_e,
        "shared_ffn": 0,
        "linear_key_heads": n_k,
        "linear_value_heads": n_v,
        "linear_key_head_dim": d_k,
        "linear_value_head_dim": d_v,
        "chunk": C,
        "cp": c_p,
        "bytes_per_element": bytes_per_element,
    }
    shape.update(options)
    return {
        name: sympy.factor(value)
        for name, value in layer_activation_bytes(
            kind,
            mlp,
            tp=t_p,
            sp=sp,
            attention_kernel=attention_kernel,
            elementwise=elementwise,
            recompute=recompute,
            **shape,
        ).items()
    }


def total(terms: dict) -> object:
    """Sum of named terms (numbers or expressions)."""
    return sum(terms.values())


#: Closed forms derived on first use (each runs SymPy's factor over a layer's tensors; a cold
#: `costmodel report` needs only numbers): read them as module attributes.
#: dense_flash_layer_bytes: a GQA layer with a dense SwiGLU MLP, flash attention, fused RMSNorm
#:   and SwiGLU, no recompute, TP with sequence parallelism and CP: linear in s (no s x s term).
#: dense_eager_layer_bytes: the same layer with Hugging Face's eager attention: K and V expanded
#:   to the query heads, and (4 + β) bytes per score (the fp32 softmax output beside the
#:   probabilities in β).
#: eager_square_bytes: the s x s part of the eager layer, which selective recompute removes.
#: full_recompute_layer_bytes: full recompute keeps one tensor per layer, its input,
#:   β·b·s·h/(c_p·t_p) with SP.
#: logits_activation_bytes: logits per micro batch on one GPU, the output in β and the loss's
#:   fp32 log-softmax, split by a vocabulary-parallel lm_head (t_p), by CP (c_p) and by chunked
#:   cross-entropy (c).
#: rope_bytes: RoPE's cos and sin, computed once per forward for the (1, s) positions.
#: first_stage_dense_flash_bytes: the first pipeline stage of a dense model, L/p_p such layers
#:   for each of the n_f micro batches in flight (1F1B: n_f = p_p, so about the bytes of all L
#:   layers for one micro batch).
def _derive(name: str):
    """The closed form `name` of _FORMS (SymPy and the symbols imported here, on first use)."""
    import sympy

    from costmodel.derive.symbols import (
        L,
        V,
        b_micro,
        bytes_per_element,
        c_p,
        chunks,
        d_r,
        n_f,
        p_p,
        s,
        t_p,
    )

    forms = {
        "dense_flash_layer_bytes": lambda: sympy.factor(
            sympy.expand(total(symbolic_layer_bytes()))
        ),
        "dense_eager_layer_bytes": lambda: sympy.factor(
            sympy.expand(total(symbolic_layer_bytes(attention_kernel="eager")))
        ),
        "eager_square_bytes": lambda: sympy.factor(
            sympy.expand(_form("dense_eager_layer_bytes")).coeff(s, 2) * s**2
        ),
        "full_recompute_layer_bytes": lambda: sympy.factor(
            total(symbolic_layer_bytes(recompute="full"))
        ),
        "logits_activation_bytes": lambda: sympy.factor(
            (bytes_per_element + FP32) * b_micro * (s / c_p) * V / (t_p * chunks)
        ),
        "rope_bytes": lambda: 2 * bytes_per_element * (s / c_p) * d_r,
        "first_stage_dense_flash_bytes": lambda: n_f * (L / p_p) * _form("dense_flash_layer_bytes"),
    }
    return forms[name]()


_FORMS = (
    "dense_flash_layer_bytes",
    "dense_eager_layer_bytes",
    "eager_square_bytes",
    "full_recompute_layer_bytes",
    "logits_activation_bytes",
    "rope_bytes",
    "first_stage_dense_flash_bytes",
)
_forms: dict[str, object] = {}


def _form(name: str):
    if name not in _forms:
        _forms[name] = _derive(name)
    return _forms[name]


def __getattr__(name: str):
    if name in _FORMS:
        return _form(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
