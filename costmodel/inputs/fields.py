"""The scenario keys: each key's kind, bounds and help (FIELDS), and the check of one value
(`check_value`), whose refusal is one line naming the key, the value and what is allowed.

Size: FIELDS is the one table of every scenario key (each key's definition in one place);
splitting it would split the table."""

from __future__ import annotations

import functools
import math
from typing import Any

from costmodel.derive import activations as act
from costmodel.derive import numeric
from costmodel.errors import CostModelError
from costmodel.formats import limits, shown
from costmodel.inputs import attention_kernels, hardware
from costmodel.records import frozen_dataclass

RECOMPUTE_POLICIES = tuple(numeric.RECOMPUTE_POLICIES)
#: How the EP all-to-all overlaps compute (evaluate.communication.comm_overlap.ep_hide): none;
#: partial, at most ep_overlap_fraction of it behind the adjacent micro batch's compute
#: (Megatron-LM's combined 1F1B); all of it, DeepSeek-V3's DualPipe.
EP_OVERLAPS = ("none", "partial", "dualpipe")
#: The moments' dtypes (optimizer_dtype) and the master copy's (main_params_dtype; none: no
#: copy), each first the course's (derive.plain.optimizer_state_bytes counts their bytes).
OPTIMIZER_DTYPES = ("fp32", "bf16", "fp16")
MAIN_PARAMS_DTYPES = ("fp32", "fp16", "none")
WIDTH_KEYS = ("attention_dim", "num_heads", "head_dim", "hidden_size")
COURSE_WIDTH_KEYS = WIDTH_KEYS[:3]  # the course's, which a team's own width drops
#: The longest scenario name: it heads every page, index entry and report.
MAX_NAME_CHARACTERS = 200


@frozen_dataclass
class Field:
    """One scenario key: its kind, help text, whether it may be null, its choices and bounds."""

    kind: str  # count | count0 | positive | fraction | choice | modules | flag | gpu | text | ...
    help: str
    nullable: bool = False
    #: The values a `choice` accepts, the first the course's (`modules`: the names a list may hold).
    choices: tuple[str, ...] = ()
    #: Inclusive bounds of a number (None: the kind's own bound). They keep every figure of the
    #: account finite and every notebook runnable; the README's scenario table states them.
    #: For `text`, `maximum` is the most characters.
    minimum: float | None = None
    maximum: float | None = None
    #: The only integers a `count` accepts, when they are a set rather than a range.
    values: tuple[int, ...] = ()


FIELDS: dict[str, Field] = {
    "name": Field("text", "title of the scenario", maximum=MAX_NAME_CHARACTERS),
    "model": Field(
        "path", "a config.json path or a preset name; fills the model-shape keys", nullable=True
    ),
    "activated_params": Field(
        "count", "N of 6ND: matmul parameters per token, no input embedding", maximum=10**15
    ),
    "total_params": Field("count", "all parameters, every expert", maximum=10**15),
    "samples_per_step": Field("count", "samples (sequences) per optimizer step", maximum=10**9),
    "mean_tokens_per_sample": Field(
        "positive", "mean real tokens per sample (1 to seq_len)", minimum=1, maximum=10**8
    ),
    "seq_len": Field("count", "configured (padded) sequence length, tokens", maximum=10**8),
    "step_time": Field(
        "positive",
        "measured seconds per optimizer step (null: the step-time model's prediction)",
        nullable=True,
        minimum=1e-06,
        maximum=10**9,
    ),
    "num_gpus": Field("count", "GPUs in the job", maximum=10**7),
    "gpu": Field("gpu", "GPU model (sets peak_flops and hbm_bandwidth)"),
    "peak_flops": Field(
        "positive", "dense BF16 peak of one GPU, FLOP/s", minimum=10**9, maximum=10**18
    ),
    "hbm_bandwidth": Field(
        "positive", "HBM bandwidth of one GPU, byte/s", minimum=10**6, maximum=10**16
    ),
    "recompute": Field(
        "choice", "activation recompute: none | selective | full", choices=RECOMPUTE_POLICIES
    ),
    "selective_recompute_fraction": Field(
        "fraction",
        "share of the weight GEMMs' forward FLOPs redone by selective recompute (null: derived "
        "from recompute_modules)",
        nullable=True,
    ),
    "recompute_modules": Field(
        "modules",
        "modules selective recompute redoes, Megatron-LM's names (null: its default, core_attn)",
        nullable=True,
        choices=act.RECOMPUTE_MODULES,
    ),
    "recompute_num_layers": Field(
        "count",
        "layers full recompute redoes per pipeline stage (null: every layer, one at a time)",
        nullable=True,
        maximum=10**5,
    ),
    "recompute_method": Field(
        "choice",
        "how full recompute picks them: uniform (groups of recompute_num_layers) | block (the "
        "first recompute_num_layers of each stage)",
        choices=("uniform", "block"),
    ),
    "measured_tokens_per_s": Field(
        "positive",
        "measured cluster throughput, tokens/s",
        nullable=True,
        minimum=1e-06,
        maximum=10**15,
    ),
    "hidden_size": Field("count", "hidden size", maximum=10**7),
    "num_layers": Field("count", "transformer layers", maximum=10**5),
    "full_attention_every": Field(
        "count",
        "one full-attention layer every k layers (1 = all; at most num_layers)",
        maximum=10**5,
    ),
    "num_heads": Field(
        "count", "query heads of a full-attention layer", nullable=True, maximum=10**5
    ),
    "head_dim": Field("count", "width of one attention head", nullable=True, maximum=10**6),
    "attention_dim": Field(
        "count", "attention width (overrides num_heads x head_dim)", nullable=True, maximum=10**8
    ),
    "num_experts": Field("count0", "routed experts per MoE layer (0 = dense)", maximum=10**6),
    "experts_per_token": Field(
        "count0", "routed experts per token (top-k; 0 = dense)", maximum=10**6
    ),
    "vocab_size": Field("count", "vocabulary size", maximum=10**9),
    # A model given by numbers (a paper's table) rather than a config: null = the config's, or
    # the shape built from the keys assumes it (costmodel.inputs.model_shape.shape_from_keys)
    "ffn_hidden_size": Field(
        "count", "dense MLP width (Megatron-LM's --ffn-hidden-size)", nullable=True, maximum=10**9
    ),
    "mlp_activation": Field(
        "choice",
        "MLP: swiglu (gate, up, down) | gelu (up, down: GPT-2/3, GPT-NeoX, Megatron's GPT)",
        nullable=True,
        choices=("swiglu", "gelu"),
    ),
    "num_kv_heads": Field(
        "count", "key/value heads (GQA; divides the query heads)", nullable=True, maximum=10**5
    ),
    "moe_ffn_hidden_size": Field(
        "count", "one routed expert's width (MoE only)", nullable=True, maximum=10**9
    ),
    "shared_experts": Field(
        "count0",
        "shared experts per MoE layer, each moe_ffn_hidden_size wide (MoE only)",
        nullable=True,
        maximum=10**6,
    ),
    "first_dense_layers": Field(
        "count0",
        "dense layers before the MoE ones (DeepSeek's first_k_dense_replace; MoE only)",
        nullable=True,
        maximum=10**5,
    ),
    "micro_batch": Field("count", "sequences per micro batch", maximum=10**6),
    "attention_flops": Field(
        "choice",
        "attention-core count: full (the s x s square, the course's) | causal (half, Megatron-LM)",
        choices=("full", "causal"),
    ),
    "attention_kernel": Field(
        "choice",
        "eager (2x backward, scores kept) | flash (2.5x; the GPU's family) | flash2 | flash3 | cudnn",
        choices=tuple(attention_kernels.KIND),
    ),
    "framework": Field(
        "choice",
        "what the team trains with: megatron (Megatron-LM / NeMo) | torchtitan | huggingface "
        "(Trainer + DeepSpeed) | huggingface_fsdp (Trainer + FSDP) | huggingface_sp (DeepSpeed + "
        "sequence parallelism: XTuner, EasyContext) | composer (llm-foundry, FSDP): what its "
        "layers save for backward and the options the plan and the levers offer "
        "(inputs.frameworks)",
        choices=tuple(act.FRAMEWORKS),
    ),
    "cross_entropy": Field(
        "choice",
        "logits kept by the loss: fp32 | fused (BF16, in place) | chunked (ce_chunks pieces) | "
        "fused_linear (none; null: the framework's)",
        nullable=True,
        choices=act.CROSS_ENTROPY,
    ),
    "dropout": Field(
        "flag",
        "dropout in the layers (Megatron-LM's --hidden-dropout and --attention-dropout, 0.1 by "
        "default; most current pretraining recipes set both to 0): the masks the backward keeps "
        "and their memory-bound passes",
    ),
    "fp8": Field(
        "choice",
        "FP8 training: none | hybrid (Transformer Engine's E4M3 forward, E5M2 gradients)",
        choices=("none", "hybrid"),
    ),
    "fp8_activations": Field(
        "choice",
        "saved activations stored in FP8: none | moe_inputs (DeepSeek-V3) | linear_inputs",
        choices=act.FP8_ACTIVATIONS,
    ),
    "batching": Field(
        "choice",
        "padded (every sample padded to seq_len, the course's) | packed (no padding; varlen "
        "attention per document)",
        choices=("padded", "packed"),
    ),
    "attention_on_padding": Field(
        "choice",
        "with batching: padded, what the attention kernel does with a row's pad slots: computed "
        "(each padded row attended whole under its causal mask, as a dense or causal mask over "
        "seq_len runs it: the course's premise) | skipped (a varlen kernel given the real lengths, "
        "cu_seqlens, attends the real tokens only; the weight GEMMs still run the pads)",
        choices=("computed", "skipped"),
    ),
    "sequence_lengths": Field(
        "file",
        "file of real sample lengths (one per line, .npy, or .csv with a length column), "
        "relative to the scenario file; gives mean_tokens_per_sample and the sum of squares",
        nullable=True,
    ),
    "count_mtp": Field(
        "flag", "count the config's multi-token-prediction layers in N (needs model)"
    ),
    # The parallel layout (data_parallel is derived: num_gpus / (TP x PP x CP))
    "tensor_parallel": Field("count", "tensor-parallel size (divides the heads)", maximum=10**4),
    "pipeline_parallel": Field(
        "count",
        "pipeline-parallel stages (at most num_layers; the most loaded stage counts)",
        maximum=10**4,
    ),
    # Uneven first and last pipeline stages (Megatron-LM's num_layers_in_first/last_pipeline_stage)
    "first_stage_layers": Field(
        "count",
        "layers of the first pipeline stage (Megatron-LM's --decoder-first-pipeline-num-layers); "
        "the other stages split the rest evenly; null: every stage ceil(num_layers / PP)",
        nullable=True,
        maximum=10**5,
    ),
    "last_stage_layers": Field(
        "count",
        "layers of the last pipeline stage, MTP layers besides (Megatron-LM's "
        "--decoder-last-pipeline-num-layers); null: as first_stage_layers says",
        nullable=True,
        maximum=10**5,
    ),
    "embedding_in_pipeline_split": Field(
        "flag",
        "the pipeline split counts the input embedding as a layer of the first stage (Megatron-LM's "
        "--account-for-embedding-in-pipeline-split): the first stage holds one layer fewer",
    ),
    "loss_in_pipeline_split": Field(
        "flag",
        "the pipeline split counts the lm_head and loss as a layer of the last stage (Megatron-LM's "
        "--account-for-loss-in-pipeline-split): the last stage holds one layer fewer",
    ),
    "context_parallel": Field(
        "count", "context-parallel size (splits the sequence)", maximum=10**4
    ),
    "expert_parallel": Field(
        "count",
        "expert-parallel size (divides the experts and DP; 1 for a dense model)",
        maximum=10**6,
    ),
    # MoE parallel folding (Megatron-Core's --expert-tensor-parallel-size): the expert layers'
    # own TP, their ranks ETP x EP x EDP per stage (inputs.layout.check_expert_layout)
    "expert_tensor_parallel": Field(
        "count",
        "expert TP: the routed experts' TP size, EP folded over TP x CP x DP (null: TP, EP "
        "inside DP)",
        nullable=True,
        maximum=10**6,
    ),
    "sequence_parallel": Field("flag", "sequence parallelism with TP (norms and residuals split)"),
    "gpus_per_node": Field(
        "count", "GPUs per node (TP and EP inside a node are fast)", maximum=10**3
    ),
    "zero_stage": Field(
        "count0",
        "ZeRO stage: 0 (replicated), 1 (optimizer sharded: the distributed optimizer), 2 "
        "(+ gradients), 3 (+ weights)",
        maximum=3,
    ),
    "grad_bytes": Field(
        "count", "bytes per gradient element: 4 (fp32 main gradients) or 2", values=(2, 4)
    ),
    # Adam's states and activation offloading (issue 34; docs/conventions.md, "Optimizer
    # precision" and "Activation offloading")
    "optimizer_dtype": Field(
        "choice",
        "dtype of Adam's two moments (Megatron-LM --exp-avg-dtype/--exp-avg-sq-dtype with "
        "--use-precision-aware-optimizer): fp32 | bf16 (DeepSeek-V3) | fp16",
        choices=OPTIMIZER_DTYPES,
    ),
    "main_params_dtype": Field(
        "choice",
        "the optimizer's master copy of the weights (Megatron-LM --main-params-dtype): fp32 | "
        "fp16 | none (no copy: Adam updates the BF16 weights)",
        choices=MAIN_PARAMS_DTYPES,
    ),
    "cpu_offload_layers": Field(
        "count0",
        "layers whose saved activations go to host memory (Megatron-LM --cpu-offloading-num-"
        "layers; 0: none; fewer than the layers, with recompute none and pipeline_parallel 1)",
        maximum=10**6,
    ),
    "memory_reserve": Field(
        "count0",
        "bytes per GPU kept for the CUDA context, NCCL buffers and the allocator (taken from the "
        "card's CUDA total)",
        maximum=10**12,
    ),
    # Communication: how the collectives run and what hides them (evaluate.communication.communication)
    "cp_comm_type": Field(
        "choice",
        "context-parallel communication (Megatron-LM --cp-comm-type): p2p (K/V ring) | "
        "all_gather (K/V gathered) | a2a (Ulysses all-to-all of Q, K, V, O)",
        choices=tuple(numeric.CP_COLLECTIVES),  # derive.communication's, generated
    ),
    "collective_latency": Field(
        "choice",
        "each collective call's latency: nccl (NCCL's cost model: a base and one term per "
        "ring step, so a ring over thousands of ranks waits milliseconds a call) | none (the "
        "links' bandwidth alone: large messages)",
        choices=("nccl", "none"),
    ),
    "moe_router_max_nodes": Field(
        "count",
        "node-limited routing: a token's experts on at most this many nodes (DeepSeek-V3: 4; "
        "null: not limited)",
        nullable=True,
        maximum=10**6,
    ),
    "moe_router_max_devices": Field(
        "count",
        "device-limited routing: a token's experts on at most this many GPUs, sent once to each "
        "(DeepSeek-V2: 3; null: once per expert)",
        nullable=True,
        maximum=10**6,
    ),
    "fp8_dispatch": Field(
        "flag", "EP dispatch in FP8 (1 byte + an fp32 scale per 128; combine stays BF16)"
    ),
    "tp_comm_overlap": Field(
        "flag", "TP collectives overlapped with the GEMMs (userbuffers; with sequence_parallel)"
    ),
    "overlap_grad_reduce": Field(
        "flag", "DP gradient reduction overlapped with the backward (Megatron-LM's flag)"
    ),
    "overlap_param_gather": Field(
        "flag", "DP weight all-gather overlapped with the forward (Megatron-LM's flag)"
    ),
    "ep_overlap": Field(
        "choice",
        "EP all-to-all overlap: none | partial (ep_overlap_fraction of it behind the adjacent "
        "micro batch's compute: Megatron-LM's --overlap-moe-expert-parallel-comm) | dualpipe "
        "(all of it behind the other micro batch's compute)",
        choices=EP_OVERLAPS,
    ),
    "ep_overlap_fraction": Field(
        "fraction",
        "with ep_overlap partial: the most of each EP all-to-all that hides behind compute, "
        "the rest exposed (0.5: an assumption, no published measurement)",
    ),
    "moe_shared_expert_overlap": Field(
        "flag",
        "the EP all-to-all behind the shared expert's compute (Megatron-LM's "
        "--moe-shared-expert-overlap; with ep_overlap none)",
    ),
    # The step-time model (costmodel.evaluate.simulate.step_time)
    "pipeline_schedule": Field(
        "choice",
        "pipeline schedule: 1f1b | interleaved (with virtual_pipeline) | zero_bubble | dualpipe",
        choices=numeric.SCHEDULES,  # the schedules the step-time model derives a bubble for
    ),
    "virtual_pipeline": Field(
        "count",
        "model chunks per GPU of interleaved 1F1B (Megatron-LM's "
        "--num-virtual-stages-per-pipeline-rank), at least 2; null otherwise",
        nullable=True,
        minimum=2,
        maximum=10**5,
    ),
    "gemm_efficiency": Field(
        "efficiency",
        "a large GEMM's share of the dense peak (null: the GPU generation's)",
        nullable=True,
        minimum=1e-3,
        maximum=1,
    ),
    "attention_efficiency": Field(
        "efficiency",
        "the attention kernel's share of the peak, forward and backward (null: the generation's)",
        nullable=True,
        minimum=1e-3,
        maximum=1,
    ),
    "kernel_launch_overhead": Field(
        "positive",
        "fixed seconds each kernel adds beyond its roofline time (launch and dispatch: 4e-6, "
        "an assumption; evaluate.simulate.kernels counts the kernels); 0: none",
        minimum=0,
        maximum=1,
    ),
    "hbm_efficiency": Field(
        "efficiency",
        "achieved share of the HBM bandwidth for memory-bound work (null: the generation's)",
        nullable=True,
        minimum=1e-3,
        maximum=1,
    ),
    "router_skew": Field(
        "positive",
        "Zipf exponent of the experts' popularity behind the load-balance lever's simulated "
        "router (0: a balanced router; null: no load-balance estimate)",
        nullable=True,
        minimum=0,
        maximum=4,
    ),
    # Values the course assumed, each a key (null: the course's value, labelled as such)
    "communication_share": Field(
        "fraction",
        "measured share of the step spent in communication not hidden by compute (null: the "
        "layout's estimate, an upper bound, with the course's 'under 3%' beside it)",
        nullable=True,
    ),
    "training_hours": Field(
        "positive", "wall time of the whole run, hours (the course's: 12)", maximum=10**6
    ),
    "ce_chunks": Field(
        "count", "pieces of a chunked cross-entropy (the course's 15 GB -> 2 GB: 8)", maximum=10**6
    ),
    "attention_kernel_speedup": Field(
        "positive",
        "speedup of a faster attention kernel on the attention core (the course's guess: 1.5)",
        minimum=1,
        maximum=100,
    ),
    "intra_node_bandwidth": Field(
        "positive",
        "per-GPU bandwidth inside a node, one direction, byte/s (null: the GPU table's)",
        nullable=True,
        minimum=10**6,
        maximum=10**15,
    ),
    "inter_node_bandwidth": Field(
        "positive",
        "per-GPU bandwidth across nodes, one direction, byte/s (null: the GPU table's default)",
        nullable=True,
        minimum=10**6,
        maximum=10**15,
    ),
}

ALLOWED = {
    "count": "a positive integer",
    "count0": "a non-negative integer",
    "positive": "a positive number",
    "fraction": "a number between 0 and 1",
    "efficiency": "a number from 0.001 to 1",
    "choice": "one of",
    "modules": "a list (or comma-separated text) of",
    "flag": "true or false",
    "gpu": "one of " + ", ".join(hardware.GPUS),
    "text": "a string",
    "path": "a config.json path or a preset name",
    "file": "a path to a lengths file",
}


@functools.cache  # FIELDS does not change; check_value asks for every key it checks
def allowed_text(key: str) -> str:
    """What a key accepts, bounds included: 'a positive integer up to 100,000,000'."""
    spec = FIELDS[key]
    text = ALLOWED[spec.kind]
    if spec.kind in ("choice", "modules"):
        text += " " + ", ".join(spec.choices)
    if spec.values:
        return (", ".join(map(str, spec.values[:-1])) + " or " + str(spec.values[-1])) + (
            " or null" if spec.nullable else ""
        )
    if spec.kind == "text" and spec.maximum is not None:
        text += f" of at most {spec.maximum:,} characters"
    elif spec.kind in ("count", "count0", "positive"):
        if spec.minimum is not None and spec.maximum is not None:
            low, high = limits(spec.minimum, spec.maximum)
            text += f" from {low} to {high}"
        elif spec.maximum is not None:
            text += f" up to {limits(spec.maximum)[0]}"
        elif spec.minimum is not None:
            text += f" of at least {limits(spec.minimum)[0]}"
    return text + (" or null" if spec.nullable else "")


def _fail(key: str, value: Any, allowed: str) -> CostModelError:
    return CostModelError(f"{key}: {shown(value)} is not allowed; expected {allowed}")


def _number(key: str, value: Any, allowed: str) -> int | float:
    """A finite real number from YAML or --set text (PyYAML reads '3e9' as a string). Integers
    stay exact: 10**400 is compared with the bounds, never turned into a float."""
    if isinstance(value, bool):
        raise _fail(key, value, allowed)
    if isinstance(value, str):
        try:
            number = float(value.replace("_", ""))
        except ValueError:
            raise _fail(key, value, allowed) from None
        if not math.isfinite(number):  # '1e400' and 'inf': show what was written
            raise _fail(key, value, allowed)
        return number
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(key, value, allowed)
    if not isinstance(value, (int, float)):
        raise _fail(key, value, allowed)
    return value


def check_value(key: str, value: Any) -> Any:
    """Validate one key's value; return it in canonical form (int for counts).

    Numbers must lie within the key's bounds (FIELDS[key].minimum/maximum, inclusive); the
    message states them, e.g. `seq_len: 1e+308 is not allowed; expected a positive integer up to
    100,000,000`."""
    if not isinstance(key, str) or key not in FIELDS:
        import difflib  # only for a misspelt key: not on a valid scenario's path

        hint = difflib.get_close_matches(str(key)[:100], FIELDS, n=1)
        suggestion = f"did you mean '{hint[0]}'?" if hint else "valid keys: " + ", ".join(FIELDS)
        raise CostModelError(f"unknown scenario key {shown(str(key))} ({suggestion})")
    spec = FIELDS[key]
    allowed = allowed_text(key)
    if value is None:
        if spec.nullable:
            return None
        raise _fail(key, value, allowed)
    if spec.kind in ("count", "count0", "positive"):
        number = _number(key, value, allowed)
        if spec.kind == "positive":
            low, above = (spec.minimum or 0), spec.minimum is None  # positive: strictly above 0
        else:
            low, above = (
                (spec.minimum if spec.minimum is not None else 1 if spec.kind == "count" else 0),
                False,
            )
        if spec.kind != "positive" and isinstance(number, float) and not number.is_integer():
            raise _fail(key, number, allowed)
        if (
            number < low
            or (above and number <= low)
            or (spec.maximum is not None and number > spec.maximum)
        ):
            raise _fail(key, number, allowed)
        if spec.values and number not in spec.values:
            raise _fail(key, number, allowed)
        return number if spec.kind == "positive" else int(number)
    if spec.kind in ("fraction", "efficiency"):
        number = _number(key, value, allowed)
        if not (spec.minimum or 0) <= number <= 1:
            raise _fail(key, number, allowed)
        return number
    if spec.kind == "choice":
        if not isinstance(value, str) or value.lower() not in spec.choices:
            raise _fail(key, value, allowed)
        return value.lower()
    if spec.kind == "modules":
        return _modules(key, value, spec, allowed)
    if spec.kind == "flag":
        if not isinstance(value, bool):
            raise _fail(key, value, allowed)
        return value
    if spec.kind == "gpu":
        gpu = hardware.lookup(value) if isinstance(value, str) else None
        if gpu is None:
            raise _fail(key, value, allowed)
        return gpu.name
    return _text(key, value, spec, allowed)


def _modules(key: str, value: Any, spec: Field, allowed: str) -> list[str]:
    """A list of module names (YAML list, or comma-separated text as --set gives it), each
    once, in the order of `spec.choices`."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items or len(items) > len(spec.choices):
        raise _fail(key, value, allowed)
    names = [item.strip().lower() if isinstance(item, str) else item for item in items]
    if any(name not in spec.choices for name in names):
        raise _fail(key, value, allowed)
    return [name for name in spec.choices if name in names]


def _has_surrogate(text: str) -> bool:
    """Whether `text` holds a lone surrogate (U+D800 to U+DFFF): the one thing UTF-8 cannot
    encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _text(key: str, value: Any, spec: Field, allowed: str) -> str:
    """A text, path or file value: a string of valid Unicode (a lone surrogate, from YAML's
    "\\ud800" or an argument that is not UTF-8, could not be printed or written), within the
    key's length."""
    if not isinstance(value, str) or (spec.maximum is not None and len(value) > spec.maximum):
        raise _fail(key, value, allowed)
    if _has_surrogate(value):
        raise _fail(key, value, f"{allowed}, in valid Unicode (no lone surrogate)")
    return value
