"""The tensors single operations save for backward: RMSNorm, the attention core by kernel, a
SwiGLU MLP and a two-matrix (GELU) MLP."""

from __future__ import annotations

from costmodel.derive.activations.tables import (
    ELEMENTWISE,
    FP32,
    KERNELS,
    LINEAR,
    MASK,
    MOE_GEMM,
    Saved,
    check,
)


def rmsnorm_saved(
    prefix: str, rows, width, beta, elementwise: str, split: bool = False, offset: bool = False
):
    """RMSNorm over ``rows`` rows of ``width``: fused saves its input and the fp32 rstd; the
    PyTorch composite (eager) saves the fp32 copy of the input, the rstd and the normalised
    tensor in the working dtype. Its output is saved by the op that reads it (not here).

    ``offset``: the scale is ``1 + weight`` applied in fp32 before the cast back (Gemma,
    Qwen3-Next, Qwen3.5 in transformers): the eager composite keeps the normalised tensor in
    fp32 and the fp32 ``1 + weight`` vector (``width`` values, once per norm)."""
    check("elementwise", elementwise, ELEMENTWISE)
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
    check("attention_kernel", kernel, KERNELS)
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
    check("elementwise", elementwise, ELEMENTWISE)
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
    check("elementwise", elementwise, ELEMENTWISE)
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
