"""Scenarios: every input of the cost account, validated and resolved.

A scenario is a flat mapping of the keys in FIELDS. The course's run ships with the package
(costmodel/scenarios/course.yaml); a team's YAML file sets any subset of the keys and the rest
come from the course; `--set KEY=VALUE` overrides both. Resolution order, lowest first:
course < model (a config.json or preset named by `model:`) < file < --set.

Two groups of keys resolve together:
- the GPU: `peak_flops` and `hbm_bandwidth` default to the figures of `gpu`;
- the attention width: `attention_dim` if given, else `num_heads * head_dim` if both are
  given, else `hidden_size`. When a team's layers set any of these four keys, the course's
  values of the other width keys are not mixed in (a team that gives only hidden_size gets
  attention width = hidden_size, not the course's 16 x 256).
"""

from __future__ import annotations

import copy
import difflib
import functools
import math
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import yaml

from costmodel.derive import activations as act
from costmodel.derive import attention, communication, recompute
from costmodel.derive import symbols as sym
from costmodel.errors import CostModelError
from costmodel.formats import limits, shown
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import fitted_expert_parallel
from costmodel.inputs.lengths import Lengths, summarize
from costmodel.inputs.model_shape import (
    MOE_SHAPE_KEYS,
    SHAPE_KEYS,
    matching_shape,
    query_heads,
    scenario_shape,
    shape_from_keys,
    tensor_parallel_widths,
)
from costmodel.inputs.models import read_input

RECOMPUTE_POLICIES = tuple(recompute.POLICIES)
WIDTH_KEYS = ("attention_dim", "num_heads", "head_dim", "hidden_size")
#: The longest scenario name: it heads every page, index entry and report.
MAX_NAME_CHARACTERS = 200


@dataclass(frozen=True)
class Field:
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
        "attention kernel: eager (backward 2x forward, scores kept) | flash (2.5x, recomputed)",
        choices=("eager", "flash"),
    ),
    "framework": Field(
        "choice",
        "what the layers save for backward: megatron (Megatron-Core with Transformer Engine) | "
        "huggingface (transformers)",
        choices=tuple(act.FRAMEWORKS),
    ),
    "cross_entropy": Field(
        "choice",
        "logits kept by the loss: fp32 | fused (BF16, in place) | chunked (ce_chunks pieces) | "
        "fused_linear (none; null: the framework's)",
        nullable=True,
        choices=act.CROSS_ENTROPY,
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
    "context_parallel": Field(
        "count", "context-parallel size (splits the sequence)", maximum=10**4
    ),
    "expert_parallel": Field(
        "count",
        "expert-parallel size (divides the experts and DP; 1 for a dense model)",
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
    "memory_reserve": Field(
        "count0",
        "bytes per GPU kept for the CUDA context, NCCL buffers and the allocator (taken from the "
        "card's CUDA total)",
        maximum=10**12,
    ),
    # Communication: how the collectives run and what hides them (evaluate.communication)
    "cp_comm_type": Field(
        "choice",
        "context-parallel communication (Megatron-LM --cp-comm-type): p2p (K/V ring) | "
        "all_gather (K/V gathered) | a2a (Ulysses all-to-all of Q, K, V, O)",
        choices=("p2p", "all_gather", "a2a"),
    ),
    "moe_router_max_nodes": Field(
        "count",
        "node-limited routing: a token's experts on at most this many nodes (DeepSeek-V3: 4; "
        "null: not limited)",
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
        "EP all-to-all overlap: none | dualpipe (behind the other micro batch's compute)",
        choices=("none", "dualpipe"),
    ),
    # The step-time model (costmodel.evaluate.step_time)
    "pipeline_schedule": Field(
        "choice",
        "pipeline schedule: 1f1b | interleaved (with virtual_pipeline) | zero_bubble | dualpipe",
        choices=("1f1b", "interleaved", "zero_bubble", "dualpipe"),
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

#: Limits on a scenario's YAML (a file, or the value of one --set), checked while it is read and
#: before any Python object is built: a billion-laughs alias bomb or a deeply nested document is
#: refused in well under a second. Scenario values are flat scalars, so real scenarios are far
#: below them. The file itself may have at most MAX_INPUT_BYTES (1 MiB).
MAX_YAML_NODES = 10_000  #: scalars, lists and mappings, every alias counted as a full copy
MAX_YAML_DEPTH = 50  #: lists and mappings nested in one another
MAX_YAML_INT_DIGITS = 1_000  #: an integer literal longer than this is refused as it is read


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(key: str, value: Any, spec: Field, allowed: str) -> str:
    """A text, path or file value: a string of valid Unicode (a lone surrogate, from YAML's
    "\\ud800" or an argument that is not UTF-8, could not be printed or written), within the
    key's length."""
    if not isinstance(value, str) or (spec.maximum is not None and len(value) > spec.maximum):
        raise _fail(key, value, allowed)
    if _SURROGATE.search(value):
        raise _fail(key, value, f"{allowed}, in valid Unicode (no lone surrogate)")
    return value


# ---------------------------------------------------------------- reading YAML safely


class _Refused(yaml.YAMLError):
    """YAML beyond the limits above; the message is '<what> is not allowed; expected <limit>'."""

    def __init__(self, what: str, allowed: str, mark: Any = None):
        where = f" (line {mark.line + 1})" if mark is not None else ""
        super().__init__(f"{what}{where} is not allowed; expected {allowed}")


class _ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader (the pure-Python one: libyaml's composer crashes on deep nesting)
    with the limits above and no duplicate keys."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D102 (PyYAML hook)
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _Refused(
                f"more than {MAX_YAML_NODES:,} YAML nodes",
                f"at most {MAX_YAML_NODES:,}",
                self.peek_event().start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _Refused(
                    f"nesting deeper than {MAX_YAML_DEPTH} levels",
                    f"at most {MAX_YAML_DEPTH}",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):  # noqa: D102
        node = super().compose_document()
        _check_expanded_size(node)
        return node

    def construct_mapping(self, node, deep=False):  # noqa: D102
        if isinstance(node, yaml.MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                    key_node, yaml.ScalarNode
                ):
                    continue
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise _Refused(
                        f"key {shown(key)} twice (lines {first_line[key]} and {line})",
                        "each key once",
                    )
                first_line[key] = line
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):  # noqa: D102
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_YAML_INT_DIGITS:
            raise _Refused(
                f"an integer of {digits:,} digits",
                f"at most {MAX_YAML_INT_DIGITS:,} digits",
                node.start_mark,
            )
        return super().construct_yaml_int(node)


_ScenarioLoader.add_constructor("tag:yaml.org,2002:int", _ScenarioLoader.construct_yaml_int)


def _check_expanded_size(root: Any) -> None:
    """Refuse a document whose size, with every alias expanded, exceeds MAX_YAML_NODES.

    Counted on the composed node graph (an alias is the same node object as its anchor), with a
    memo per node, so a billion-laughs document costs a few hundred steps, not 9**9."""
    if root is None:
        return
    limit = MAX_YAML_NODES
    memo: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        ident = id(node)
        if ident in memo:
            return memo[ident]
        if ident in open_nodes:
            raise _Refused(
                "an alias inside its own anchor", "aliases to finished values", node.start_mark
            )
        open_nodes.add(ident)
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        total = 1
        for child in children:
            total += size(child)
            if total > limit:
                break
        open_nodes.discard(ident)
        memo[ident] = min(total, limit + 1)
        return memo[ident]

    if size(root) > limit:
        raise _Refused(
            f"more than {limit:,} YAML nodes with aliases expanded", f"at most {limit:,}"
        )


def _load(text: str) -> Any:
    """YAML text to Python objects through _ScenarioLoader (raises yaml.YAMLError)."""
    loader = _ScenarioLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a scenario file: a YAML mapping, with a safe loader and the limits above."""
    path = Path(path)
    label = f"scenario file '{path}'"
    text = read_input(path, label)
    try:
        data = _load(text)
    except _Refused as error:
        raise CostModelError(f"{label}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise CostModelError(f"{label}: malformed YAML{where} ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CostModelError(
            f"{label}: expected a mapping of keys to values, got {type(data).__name__}"
        )
    return {key if isinstance(key, str) else shown(key): value for key, value in data.items()}


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; each value read as a YAML scalar (same loader and limits)."""
    result: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise CostModelError(f"--set: {shown(item)} is not allowed; expected KEY=VALUE")
        key, _, text = item.partition("=")
        try:
            value = _load(text) if text.strip() else None
        except _Refused as error:
            raise CostModelError(f"--set {key.strip()}: {error}") from None
        except yaml.YAMLError:
            value = text
        result[key.strip()] = value
    return result


def course_values() -> dict[str, Any]:
    """The course's scenario file, parsed once per process (every scenario resolves on top of
    it); each caller gets its own copy."""
    return copy.deepcopy(_course_values())


@functools.cache
def _course_values() -> dict[str, Any]:
    source = resources.files("costmodel.inputs").joinpath("scenarios/course.yaml")
    return _load(source.read_text(encoding="utf-8"))


#: Which symbol each (resolved) scenario key gives a value to.
SYMBOL_OF_KEY = {
    "activated_params": sym.N,
    "total_params": sym.N_total,
    "tokens_per_step": sym.D,
    "samples_per_step": sym.B,
    "mean_tokens_per_sample": sym.s_mean,
    "seq_len": sym.S,
    "step_time": sym.T,
    "num_gpus": sym.n_gpu,
    "peak_flops": sym.P,
    "hbm_bandwidth": sym.BW,
    "measured_tokens_per_s": sym.tau,
    "hidden_size": sym.h,
    "num_layers": sym.L,
    "num_full_attention_layers": sym.L_full,
    "attention_dim": sym.d_attn,
    "num_experts": sym.E,
    "experts_per_token": sym.k_top,
    "vocab_size": sym.V,
    "micro_batch": sym.b_micro,
    "sum_squared_lengths": sym.sum_sq,
}


@dataclass(frozen=True)
class Scenario:
    """Resolved inputs: every key of FIELDS plus the derived ones, and where each came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    #: The lengths file of `sequence_lengths`, summarized (None without one).
    lengths: Lengths | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def substitutions(self) -> dict:
        """{symbol: number} for every symbol of the model that this scenario fixes."""
        subs = {
            symbol: self.values[key]
            for key, symbol in SYMBOL_OF_KEY.items()
            if self.values.get(key) is not None
        }
        subs[sym.r] = float(self.values["recompute_weights_fraction"])
        subs[sym.r_core] = float(self.values["recompute_core_fraction"])
        subs[sym.a_sq] = float(attention.SQUARE_FRACTION[self.values["attention_flops"]])
        subs[sym.kappa] = float(
            attention.KERNEL_BACKWARD_OVER_FORWARD[self.values["attention_kernel"]]
        )
        return subs

    @property
    def changed(self) -> list[str]:
        """Keys whose value differs from the course's."""
        course = resolve().values
        return [k for k in FIELDS if k != "name" and self.values.get(k) != course.get(k)]


def model_reference(reference: str, base: str | Path) -> str:
    """A model path given relative to `base` (a scenario file's folder), made absolute; a
    preset name or an absolute path is returned as it is."""
    path = Path(reference)
    try:
        if not path.is_absolute() and (Path(base) / path).exists():
            return str((Path(base) / path).resolve())
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        pass
    return reference


def relative_to_file(layer: dict[str, Any], base: str | Path) -> dict[str, Any]:
    """Make a scenario file's paths absolute, in place: `model` (a path, not a preset name) and
    `sequence_lengths` are relative to the file's folder `base`."""
    if isinstance(layer.get("model"), str):
        layer["model"] = model_reference(layer["model"], base)
    if isinstance(layer.get("sequence_lengths"), str):
        layer["sequence_lengths"] = os.path.abspath(os.path.join(base, layer["sequence_lengths"]))
    return layer


def _model_keys(reference: str, count_mtp: bool) -> tuple[dict[str, Any], int]:
    """The scenario keys a model fills in, and its MTP layers counted (count_mtp)."""
    from costmodel.inputs import models  # only when a scenario names a model

    shape = models.load_shape(reference)
    if count_mtp and not shape.num_mtp_layers:
        raise CostModelError(
            f"count_mtp: true is not allowed; model {shown(shape.name or reference, 200)} has no "
            "multi-token-prediction layers (num_nextn_predict_layers, mtp_num_hidden_layers)"
        )
    return models.scenario_keys(shape, count_mtp), shape.num_mtp_layers if count_mtp else 0


def shown_name(text: str, limit: int = 120) -> str:
    """A scenario name made from its keys, cut at `limit` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def resolve(
    file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> Scenario:
    """Course defaults, then the model named by `model:`, then `data`/the file, then overrides."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if file is not None:
        layer = load_yaml(file)
        relative_to_file(layer, Path(file).parent)
        layers.append(("file", layer))
    if data:
        layers.append(("file", dict(data)))
    if overrides:
        layers.append(("--set", dict(overrides)))
    user: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for origin, layer in layers:
        for key, value in layer.items():
            user[key] = check_value(key, value)
            sources[key] = origin

    model_ref = user.get("model")
    count_mtp = bool(user.get("count_mtp"))
    if count_mtp and not model_ref:
        raise CostModelError(
            "count_mtp: true is not allowed without model; expected a model config with "
            "multi-token-prediction layers (set model: to a config.json or a preset)"
        )
    mtp_layers = 0
    try:
        if model_ref:
            model_layer, mtp_layers = _model_keys(model_ref, count_mtp)
            model_layer = _checked(model_layer)
        else:
            model_layer = {}
    except CostModelError as error:  # say which model a refused shape key comes from
        message = str(error)
        raise (
            error
            if message.startswith(("model config ", "count_mtp: "))
            else CostModelError(f"model {shown(model_ref, 200)}: {message}")
        ) from None

    values = {key: check_value(key, value) for key, value in course_values().items()}
    values.setdefault("model", None)
    for key in values:
        sources.setdefault(key, "course")
    # A team that sets any width key gets none of the course's other width keys.
    team_width = set(WIDTH_KEYS) & (set(user) | set(model_layer))
    if team_width:
        for key in ("attention_dim", "num_heads", "head_dim"):
            values[key] = None
    if "name" not in user and (user or model_layer):
        # the course's scenario with a few keys set (--set, a notebook's overrides) is named
        # after what changed; a scenario file without a name is the team's
        if file is None and not data and overrides:
            changed = ", ".join(f"{key}={value}" for key, value in overrides.items())
            values["name"] = shown_name(f"课程场景 + {changed}")
        else:
            values["name"] = "Team scenario"
    for key, value in model_layer.items():
        values[key] = value
        sources[key] = "model"
    values.update(user)

    gpu = hardware.GPUS[values["gpu"]]
    for key, figure in (("peak_flops", gpu.bf16_flops), ("hbm_bandwidth", gpu.hbm_bandwidth)):
        if values.get(key) is None:
            values[key] = figure
            sources[key] = "gpu table" if sources.get("gpu") == "course" else sources["gpu"]

    if values.get("sequence_lengths") is not None and "mean_tokens_per_sample" in user:
        raise CostModelError(
            f"mean_tokens_per_sample: {shown(user['mean_tokens_per_sample'])} is not allowed "
            "with sequence_lengths; expected one of the two (the lengths file gives the mean)"
        )
    values["num_mtp_layers"] = mtp_layers
    sources["num_mtp_layers"] = "derived"
    lengths = _lengths(values, sources)
    _derive(values, sources, lengths)
    _check_shape_keys(values, sources)
    _params_from_shape_keys(values, sources)
    _cross_check(values)
    _layout(values, sources)
    _memory_settings(values, sources)
    return Scenario(values, sources, lengths)


def _checked(layer: dict[str, Any]) -> dict[str, Any]:
    return {key: check_value(key, value) for key, value in layer.items()}


def _lengths(values: dict[str, Any], sources: dict[str, str]) -> Lengths | None:
    """Read and summarize the lengths file; its mean becomes mean_tokens_per_sample."""
    if values.get("sequence_lengths") is None:
        return None
    lengths = summarize(values["sequence_lengths"], values["seq_len"], values["samples_per_step"])
    values["mean_tokens_per_sample"] = lengths.mean
    sources["mean_tokens_per_sample"] = "sequence_lengths"
    return lengths


def _derive(values: dict[str, Any], sources: dict[str, str], lengths: Lengths | None) -> None:
    if values.get("attention_dim") is not None:
        origin = "attention_dim"
    elif values.get("num_heads") is not None and values.get("head_dim") is not None:
        values["attention_dim"] = values["num_heads"] * values["head_dim"]
        origin = "num_heads x head_dim"
    else:
        values["attention_dim"] = values["hidden_size"]
        origin = "hidden_size"
    values["attention_dim_from"] = origin
    # measured, or null: the account fills it with the step-time model's prediction
    values["step_time_from"] = "measured" if values.get("step_time") is not None else "predicted"
    values["tokens_per_step"] = values["samples_per_step"] * values["mean_tokens_per_sample"]
    if lengths is not None and lengths.exact_step:  # the file's own sum, no rounding
        values["tokens_per_step"] = int(lengths.truncated.sum())
    # Full-attention layers, with the MTP layers when they are counted (each has one).
    values["num_full_attention_layers"] = (
        values["num_layers"] // values["full_attention_every"] + values["num_mtp_layers"]
    )
    # The attention core's sum of squared lengths: the file's, else the course's B x mean^2.
    if lengths is not None:
        values["sum_squared_lengths"] = lengths.sum_of_squares_per_step
        values["sum_squared_lengths_from"] = "sequence_lengths"
    else:
        mean_only = {
            sym.B: values["samples_per_step"],
            sym.s_mean: values["mean_tokens_per_sample"],
        }
        square = attention.sum_sq_of_mean.subs(mean_only)  # exact for integer inputs
        values["sum_squared_lengths"] = int(square) if square.is_Integer else float(square)
        values["sum_squared_lengths_from"] = "samples_per_step x mean_tokens_per_sample^2"
    for key in (
        "attention_dim_from",
        "step_time_from",
        "tokens_per_step",
        "num_full_attention_layers",
        "sum_squared_lengths",
        "sum_squared_lengths_from",
    ):
        sources[key] = "derived"


_RELATIONS: list[tuple[str, str, Callable[[Any, Any], bool], str]] = [
    ("mean_tokens_per_sample", "seq_len", lambda a, b: a <= b, "at most seq_len"),
    ("experts_per_token", "num_experts", lambda a, b: a <= b, "at most num_experts"),
    ("activated_params", "total_params", lambda a, b: a <= b, "at most total_params"),
    ("full_attention_every", "num_layers", lambda a, b: a <= b, "at most num_layers"),
    ("num_heads", "attention_dim", lambda a, b: a is None or a <= b, "at most attention_dim"),
]


def _cross_check(values: dict[str, Any]) -> None:
    for key, other, ok, allowed in _RELATIONS:
        if not ok(values[key], values[other]):
            raise CostModelError(
                f"{key}: {values[key]!r} is not allowed; expected {allowed} ({values[other]!r})"
            )
    if (values["num_experts"] == 0) != (values["experts_per_token"] == 0):
        raise CostModelError(
            f"experts_per_token: {values['experts_per_token']!r} is not allowed; expected 0 "
            f"exactly when num_experts is 0 (num_experts = {values['num_experts']!r})"
        )


def _team(sources: dict[str, str], key: str) -> bool:
    """The team gave `key` (a scenario file or --set), not the course or a model config."""
    return sources.get(key) in ("file", "--set")


def _check_shape_keys(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The keys of a model given by numbers agree with the rest: K/V heads divide the query
    heads; the MoE keys only with experts; at least one MoE layer after the dense ones. A value
    the team gave and that does not agree is refused; one a model config filled, made stale by a
    structure key the team changed (a notebook's other hidden size, say), goes back to the
    course's null, so the shape built from the keys assumes it instead."""
    for key, allowed in _shape_key_conflicts(values):
        if _team(sources, key):
            raise _layout_error(key, values[key], allowed)
        values[key], sources[key] = None, "course"


def _shape_key_conflicts(values: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, what is allowed) for each shape key that does not agree with the rest."""
    found = []
    kv = values.get("num_kv_heads")
    if kv is not None:
        heads = query_heads(values)[0]
        if heads % kv:
            found.append(("num_kv_heads", f"a divisor of the query heads ({heads}; num_heads)"))
    if not values["num_experts"]:
        dense = "null for a dense model (num_experts = 0)"
        return found + [(key, dense) for key in MOE_SHAPE_KEYS if values.get(key) is not None]
    first = values.get("first_dense_layers")
    if first is not None and first >= values["num_layers"]:
        most = f"less than num_layers ({values['num_layers']}): at least one MoE layer"
        found.append(("first_dense_layers", most))
    return found


def _params_from_shape_keys(values: dict[str, Any], sources: dict[str, str]) -> None:
    """A model given by numbers: when the team sets any key of SHAPE_KEYS and its shape is built
    from the keys (no model config describes it), activated_params and total_params the team
    did not give are that shape's (source `derived`), not the course's or another model's."""
    if not any(_team(sources, key) for key in SHAPE_KEYS):
        return
    todo = [k for k in ("activated_params", "total_params") if not _team(sources, k)]
    if not todo or matching_shape(values) is not None:
        return
    shape, _ = shape_from_keys(values)
    for key in todo:
        value = int(getattr(shape, key))
        try:
            values[key] = check_value(key, value)
        except CostModelError as error:
            raise CostModelError(f"{error} (derived from the shape keys)") from None
        sources[key] = "derived"


def _layout_error(key: str, value: Any, allowed: str) -> CostModelError:
    return CostModelError(f"{key}: {shown(value)} is not allowed; expected {allowed}")


def _check_tensor_parallel(values: dict[str, Any], tp: int) -> None:
    """TP divides every width of the model that the GEMM list splits (the heads, the MLP and
    expert widths, the vocabulary, ...), of the shape the list uses: the model config, or the
    shape built from the keys (whose heads, with num_heads unset, are attention_dim / head_dim).
    So no GEMM of `costmodel gemms` has a fraction of a column or a head."""
    shape, source = scenario_shape(values)
    for what, width in tensor_parallel_widths(shape, values["num_mtp_layers"]):
        if width % tp:
            raise _layout_error(
                "tensor_parallel", tp, f"a divisor of {what} ({width:,}; shape from {source})"
            )


def _check_node_links(values: dict[str, Any]) -> None:
    """A node larger than the GPU's NVLink domain needs a bandwidth between its GPUs: the GPU
    table's PCIe figure where it has one, else the scenario's intra_node_bandwidth."""
    gpu, per_node = hardware.GPUS[values["gpu"]], values["gpus_per_node"]
    if values.get("intra_node_bandwidth") is None and gpu.intra_node_bandwidth(per_node) is None:
        raise _layout_error(
            "gpus_per_node",
            per_node,
            f"at most {gpu.nvlink_gpus} for {gpu.name} (its NVLink domain; the GPU table has no "
            "bandwidth for more GPUs in a node), or intra_node_bandwidth set",
        )


def _layout(values: dict[str, Any], sources: dict[str, str]) -> None:
    """Check the parallel layout and derive data_parallel, the effective expert_parallel and
    the micro batches per step: one line naming the keys when it does not divide.

    expert_parallel the team did not set is the course's 8, brought down to the largest size
    that divides the experts and DP (source `derived`); one the team set must divide them.
    A dense model has EP = 1."""
    tp, pp, cp = (values[k] for k in ("tensor_parallel", "pipeline_parallel", "context_parallel"))
    gpus = values["num_gpus"]
    if gpus % (tp * pp * cp):
        raise _layout_error(
            "num_gpus",
            gpus,
            f"a multiple of tensor_parallel x pipeline_parallel x context_parallel "
            f"({tp} x {pp} x {cp} = {tp * pp * cp})",
        )
    dp = gpus // (tp * pp * cp)
    values["data_parallel"] = dp
    sources["data_parallel"] = "derived"
    _check_node_links(values)
    heads = values.get("num_heads")
    if heads is not None and heads % tp:
        raise _layout_error("tensor_parallel", tp, f"a divisor of num_heads ({heads})")
    if tp > 1:
        _check_tensor_parallel(values, tp)
    if pp > values["num_layers"]:  # an uneven split is allowed (as Megatron-LM's layouts)
        raise _layout_error("pipeline_parallel", pp, f"at most num_layers ({values['num_layers']})")
    if values["seq_len"] % cp:
        raise _layout_error("context_parallel", cp, f"a divisor of seq_len ({values['seq_len']})")
    if values["sequence_parallel"] and tp == 1 and sources.get("sequence_parallel") != "course":
        raise _layout_error("sequence_parallel", True, "false when tensor_parallel is 1")
    if values["sequence_parallel"] and (values["seq_len"] // cp) % tp:
        raise _layout_error(
            "tensor_parallel",
            tp,
            f"a divisor of seq_len / context_parallel ({values['seq_len'] // cp:,}) with "
            "sequence_parallel (each TP rank holds its share of the tokens)",
        )
    experts, ep = values["num_experts"], values["expert_parallel"]
    team_ep = sources.get("expert_parallel") != "course"
    if experts == 0:
        if team_ep and ep != 1:
            raise _layout_error("expert_parallel", ep, "1 for a dense model (num_experts = 0)")
        values["expert_parallel"], sources["expert_parallel"] = 1, "derived"
    elif team_ep:
        if experts % ep or dp % ep:  # the EP ranks are data-parallel ranks
            raise _layout_error(
                "expert_parallel",
                ep,
                f"a divisor of num_experts ({experts}) and of data_parallel ({dp})",
            )
    else:
        fitted = fitted_expert_parallel(experts, dp, ep)
        if fitted != ep:
            values["expert_parallel"], sources["expert_parallel"] = fitted, "derived"
    # rows of seq_len slots per pipeline: padded, one sample a row; packed, documents fill rows
    values["micro_batches_per_step"] = communication.micro_batches(
        values["batching"],
        samples=values["samples_per_step"],
        tokens=values["tokens_per_step"],
        seq_len=values["seq_len"],
        dp=dp,
        micro_batch=values["micro_batch"],
    )
    sources["micro_batches_per_step"] = "derived"


def _module_params(values: dict[str, Any]) -> tuple[dict[str, float], float]:
    """Matmul parameters per token of each module whose recompute redoes weight GEMMs
    (`recompute.WEIGHT_MODULES`), from the scenario's shape, and the N they are a share of."""
    shape, _ = scenario_shape(values)
    parts = {key: float(value) for key, value in shape.breakdown.items()}
    up = 0.0
    if shape.mla:  # MLA's up-projections: q_b (from the query latent) and kv_b, per MLA layer
        nope = shape.qk_head_dim - shape.qk_rope_head_dim
        query = shape.q_lora_rank * shape.num_heads * shape.qk_head_dim if shape.q_lora_rank else 0
        kv = shape.kv_lora_rank * shape.num_heads * (nope + shape.v_head_dim)
        up = float(query + kv) * values["num_full_attention_layers"]
    params = float(shape.activated_params)
    if values["num_mtp_layers"]:
        params += float(shape.mtp_activated_params)
    modules = {
        "mlp": parts["dense_mlp"],
        "moe": parts["routed_experts_active"] + parts["router"] + parts["shared_experts"],
        "shared_experts": parts["shared_experts"],
        "mla_up_proj": up,
    }
    return modules, params


def recompute_fractions(
    values: dict[str, Any], policy: str | None = None, modules=None
) -> dict[str, Any]:
    """The weights and attention-core fractions recompute redoes (`recompute.fractions`) for the
    scenario's policy, or another (`policy`, with `modules` for selective: the scenario's, else
    Megatron-LM's default set), and where r comes from."""
    policy = policy or values["recompute"]
    if policy == "selective" and modules is None:
        modules = values.get("recompute_modules") or list(act.DEFAULT_RECOMPUTE_MODULES)
    stage_layers = math.ceil(values["num_layers"] / values["pipeline_parallel"])
    params, n = _module_params(values) if policy == "selective" else ({}, 1.0)
    full = policy == "full" and values["recompute"] == "full"
    return recompute.fractions(
        policy,
        modules or (),
        params,
        n,
        selective_fraction=values.get("selective_recompute_fraction"),
        layers_share=recompute.recomputed_layers(
            stage_layers,
            values.get("recompute_num_layers") if full else None,
            values["recompute_method"],
        ),
    )


def _schedule(values: dict[str, Any]) -> None:
    """virtual_pipeline goes with the interleaved schedule (at least 2 chunks, at most the
    stage's layers: chunks of unequal size are counted as equal)."""
    schedule, chunks = values["pipeline_schedule"], values.get("virtual_pipeline")
    if schedule == "interleaved" and chunks is None:
        raise _layout_error(
            "virtual_pipeline",
            chunks,
            "an integer of at least 2 with pipeline_schedule interleaved",
        )
    if schedule != "interleaved" and chunks is not None:
        raise _layout_error(
            "virtual_pipeline", chunks, "null unless pipeline_schedule is interleaved"
        )
    stage_layers = math.ceil(values["num_layers"] / values["pipeline_parallel"])
    if chunks is not None and chunks > stage_layers:
        raise _layout_error(
            "virtual_pipeline",
            chunks,
            f"at most the layers of a pipeline stage ({stage_layers}: num_layers / "
            "pipeline_parallel, rounded up)",
        )


def _memory_settings(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The memory and recompute keys that go together: recompute_modules only with selective
    recompute (null: Megatron-LM's default set), recompute_num_layers (more than a stage's layers:
    all of them) and a team's recompute_method only with full, FP8 storage only with FP8 training, cross_entropy null
    the framework's; then the recompute fractions of the weights and of the attention core
    (`recompute.fractions`), derived."""
    policy = values["recompute"]
    if values.get("recompute_modules") is not None and policy != "selective":
        raise _layout_error(
            "recompute_modules", values["recompute_modules"], "null unless recompute is selective"
        )
    for key in ("recompute_num_layers", "recompute_method"):
        given = values.get(key) is not None and sources.get(key) != "course"
        if given and policy != "full":
            raise _layout_error(key, values[key], "unset unless recompute is full")
    if values["fp8_activations"] != "none" and values["fp8"] == "none":
        raise _layout_error(
            "fp8_activations", values["fp8_activations"], "none unless fp8 is hybrid"
        )
    if values.get("cross_entropy") is None:
        values["cross_entropy"] = act.FRAMEWORKS[values["framework"]].cross_entropy
        sources["cross_entropy"] = "derived"
    if policy == "selective" and values.get("recompute_modules") is None:
        values["recompute_modules"] = list(act.DEFAULT_RECOMPUTE_MODULES)
        sources["recompute_modules"] = "derived"
    _schedule(values)
    got = recompute_fractions(values)
    values["recompute_weights_fraction"] = got["weights"]
    values["recompute_core_fraction"] = got["core"]
    values["recompute_fraction_from"] = got["from"]
    for key in ("recompute_weights_fraction", "recompute_core_fraction", "recompute_fraction_from"):
        sources[key] = "derived"
