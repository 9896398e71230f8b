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

The package's modules: ``tables`` (the options, ``Saved``, ``FRAMEWORKS``), ``ops`` (what one
operation saves: RMSNorm, the attention core, SwiGLU, a GELU MLP), ``mixers`` (attention, MLA,
gated DeltaNet), ``mlp`` (dense and MoE), ``layer`` (one decoder layer, recompute and FP8, bytes
per GPU), ``model`` (outside the layers, the loss, pipeline stages) and ``symbolic`` (the SymPy
forms). Import the names from here: ``from costmodel.derive import activations as act``.
"""

from __future__ import annotations

from costmodel.derive.activations.layer import (
    layer_activation_bytes,
    layer_saved,
    per_gpu,
)
from costmodel.derive.activations.model import (
    in_flight_micro_batches,
    logits_saved,
    loss_saved,
    model_activation_bytes,
    stage_activation_bytes,
)
from costmodel.derive.activations.ops import (
    attention_core_saved,
    gelu_mlp_saved,
    rmsnorm_saved,
    swiglu_saved,
)
from costmodel.derive.activations.symbolic import FORMS, derived_form, symbolic_layer_bytes, total
from costmodel.derive.activations.tables import (
    CROSS_ENTROPY,
    DEFAULT_RECOMPUTE_MODULES,
    ELEMENTWISE,
    FP8_ACTIVATIONS,
    FP8_BYTES,
    FP32,
    FRAMEWORKS,
    INDEX,
    INT32,
    KERNELS,
    LINEAR,
    LINEAR_KERNELS,
    MASK,
    MIXERS,
    MLPS,
    MOE_GEMM,
    MOE_IMPLEMENTATIONS,
    RECOMPUTE,
    RECOMPUTE_CHEAPEST_FIRST,
    RECOMPUTE_MODULES,
    Framework,
    Saved,
    recompute_modules_of,
)

__all__ = [
    "CROSS_ENTROPY",
    "DEFAULT_RECOMPUTE_MODULES",
    "ELEMENTWISE",
    "FP8_ACTIVATIONS",
    "FP8_BYTES",
    "FP32",
    "FRAMEWORKS",
    "INDEX",
    "INT32",
    "KERNELS",
    "LINEAR",
    "LINEAR_KERNELS",
    "MASK",
    "MIXERS",
    "MLPS",
    "MOE_GEMM",
    "MOE_IMPLEMENTATIONS",
    "RECOMPUTE",
    "RECOMPUTE_CHEAPEST_FIRST",
    "RECOMPUTE_MODULES",
    "Framework",
    "Saved",
    "attention_core_saved",
    "gelu_mlp_saved",
    "in_flight_micro_batches",
    "layer_activation_bytes",
    "layer_saved",
    "logits_saved",
    "loss_saved",
    "model_activation_bytes",
    "per_gpu",
    "recompute_modules_of",
    "rmsnorm_saved",
    "stage_activation_bytes",
    "swiglu_saved",
    "symbolic_layer_bytes",
    "total",
]


def __getattr__(name: str):
    """The closed forms of ``symbolic._FORMS``, derived on first use."""
    if name in FORMS:
        return derived_form(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
