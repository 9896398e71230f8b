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

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from costmodel.derive import numeric, plain
from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.inputs import hardware
from costmodel.inputs.fields import (  # noqa: F401 (the scenario's names, imported from here)
    ALLOWED,
    FIELDS,
    MAX_NAME_CHARACTERS,
    RECOMPUTE_POLICIES,
    WIDTH_KEYS,
    Field,
    allowed_text,
    check_value,
)
from costmodel.inputs.layout import (  # noqa: F401
    LAYOUT_KEYS,
    Layout,
    _layout,
    _layout_error,
    _memory_settings,
    recompute_fractions,
)
from costmodel.inputs.lengths import Lengths, summarize
from costmodel.inputs.model_shape import (
    MOE_SHAPE_KEYS,
    SHAPE_KEYS,
    matching_shape,
    query_heads,
    scenario_shape,
    shape_from_keys,
)
from costmodel.inputs.scenario_yaml import (  # noqa: F401
    MAX_YAML_DEPTH,
    MAX_YAML_INT_DIGITS,
    MAX_YAML_NODES,
    course_values,
    load_yaml,
    parse_set,
)
from costmodel.inputs.shape import ModelShape

#: Which symbol each (resolved) scenario key gives a value to (its name in
#: costmodel.derive.symbols).
SYMBOL_OF_KEY = {
    "activated_params": "N",
    "total_params": "N_total",
    "tokens_per_step": "D",
    "samples_per_step": "B",
    "mean_tokens_per_sample": "s_mean",
    "seq_len": "S",
    "step_time": "T",
    "num_gpus": "n_gpu",
    "peak_flops": "P",
    "hbm_bandwidth": "BW",
    "measured_tokens_per_s": "tau",
    "hidden_size": "h",
    "num_layers": "L",
    "num_full_attention_layers": "L_full",
    "attention_dim": "d_attn",
    "num_experts": "E",
    "experts_per_token": "k_top",
    "vocab_size": "V",
    "micro_batch": "b_micro",
    "sum_squared_lengths": "sum_sq",
}


#: The annotation each kind of FIELDS gives its keys on Scenario (` | None` added when nullable).
KIND_TYPES = {
    "count": "int",
    "count0": "int",
    "positive": "int | float",
    "fraction": "int | float",
    "efficiency": "int | float",
    "choice": "str",
    "modules": "list[str]",
    "flag": "bool",
    "gpu": "str",
    "text": "str",
    "path": "str",
    "file": "str",
}

#: The keys resolution derives (not in FIELDS), each an attribute of Scenario.
DERIVED_KEYS = (
    "num_mtp_layers",
    "attention_dim_from",
    "step_time_from",
    "tokens_per_step",
    "num_full_attention_layers",
    "sum_squared_lengths",
    "sum_squared_lengths_from",
    "data_parallel",
    "micro_batches_per_step",
    "recompute_weights_fraction",
    "recompute_core_fraction",
    "recompute_fraction_from",
)
#: Every key of a resolved scenario.
KEYS = (*FIELDS, *DERIVED_KEYS)
#: The keys of Scenario.conventions.
CONVENTION_KEYS = (
    "attention_flops",
    "attention_kernel",
    "recompute",
    "recompute_modules",
    "fp8",
    "fp8_activations",
    "framework",
    "batching",
    "cross_entropy",
    "ce_chunks",
)


@dataclass(frozen=True)
class Conventions:
    """How the scenario counts and runs: the choices a figure of the account rests on."""

    attention_flops: str
    attention_kernel: str
    recompute: str
    recompute_modules: list[str] | None
    fp8: str
    fp8_activations: str
    framework: str
    batching: str
    cross_entropy: str
    ce_chunks: int


@dataclass(frozen=True)
class Scenario:
    """Resolved inputs, frozen: one attribute per key of FIELDS and per derived key
    (DERIVED_KEYS), where each came from (`sources`), the lengths file summarized (`lengths`),
    and views resolved once: `layout`, `conventions`, `gpu_spec` (the GPU table's entry),
    `shape` and `shape_source` (the model shape). `values` is a read-only mapping of every key,
    in resolution order (the JSON report's `scenario`); `replace` makes a changed copy (not
    validated again: `resolve` does that)."""

    name: str
    model: str | None
    activated_params: int
    total_params: int
    samples_per_step: int
    mean_tokens_per_sample: int | float
    seq_len: int
    step_time: int | float | None
    num_gpus: int
    gpu: str
    peak_flops: int | float
    hbm_bandwidth: int | float
    recompute: str
    selective_recompute_fraction: int | float | None
    recompute_modules: list[str] | None
    recompute_num_layers: int | None
    recompute_method: str
    measured_tokens_per_s: int | float | None
    hidden_size: int
    num_layers: int
    full_attention_every: int
    num_heads: int | None
    head_dim: int | None
    attention_dim: int | None
    num_experts: int
    experts_per_token: int
    vocab_size: int
    ffn_hidden_size: int | None
    mlp_activation: str | None
    num_kv_heads: int | None
    moe_ffn_hidden_size: int | None
    shared_experts: int | None
    first_dense_layers: int | None
    micro_batch: int
    attention_flops: str
    attention_kernel: str
    framework: str
    cross_entropy: str | None
    fp8: str
    fp8_activations: str
    batching: str
    sequence_lengths: str | None
    count_mtp: bool
    tensor_parallel: int
    pipeline_parallel: int
    context_parallel: int
    expert_parallel: int
    sequence_parallel: bool
    gpus_per_node: int
    zero_stage: int
    grad_bytes: int
    memory_reserve: int
    cp_comm_type: str
    moe_router_max_nodes: int | None
    fp8_dispatch: bool
    tp_comm_overlap: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    ep_overlap: str
    pipeline_schedule: str
    virtual_pipeline: int | None
    gemm_efficiency: int | float | None
    attention_efficiency: int | float | None
    hbm_efficiency: int | float | None
    router_skew: int | float | None
    communication_share: int | float | None
    training_hours: int | float
    ce_chunks: int
    attention_kernel_speedup: int | float
    intra_node_bandwidth: int | float | None
    inter_node_bandwidth: int | float | None
    # derived by resolution
    num_mtp_layers: int
    attention_dim_from: str
    step_time_from: str
    tokens_per_step: int | float
    num_full_attention_layers: int
    sum_squared_lengths: int | float
    sum_squared_lengths_from: str
    data_parallel: int
    micro_batches_per_step: int | float
    recompute_weights_fraction: int | float
    recompute_core_fraction: int | float
    recompute_fraction_from: str
    #: Where each key came from: course, model, file, --set, gpu table, derived, predicted, ...
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    #: The lengths file of `sequence_lengths`, summarized (None without one).
    lengths: Lengths | None = field(default=None, repr=False)
    #: The order of the keys in `values` (the order resolution set them).
    key_order: tuple[str, ...] = field(default=(), repr=False, compare=False)
    values: Mapping[str, Any] = field(init=False, repr=False, compare=False)
    layout: Layout = field(init=False, repr=False, compare=False)
    conventions: Conventions = field(init=False, repr=False, compare=False)
    gpu_spec: hardware.GPU = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = self.key_order or KEYS
        values = {key: getattr(self, key) for key in order}
        setattr_ = object.__setattr__
        setattr_(self, "values", MappingProxyType(values))
        setattr_(self, "sources", MappingProxyType(dict(self.sources)))
        setattr_(self, "layout", Layout(**{key: values[key] for key in LAYOUT_KEYS}))
        conventions = {key: values[key] for key in CONVENTION_KEYS}
        setattr_(self, "conventions", Conventions(**conventions))
        setattr_(self, "gpu_spec", hardware.GPUS[self.gpu])

    @classmethod
    def from_values(
        cls,
        values: Mapping[str, Any],
        sources: Mapping[str, str] | None = None,
        lengths: Lengths | None = None,
    ) -> Scenario:
        """The Scenario of resolved `values` (every key of KEYS), keeping their order."""
        return cls(**values, sources=dict(sources or {}), lengths=lengths, key_order=tuple(values))

    def replace(self, sources: Mapping[str, str] | None = None, **changes: Any) -> Scenario:
        """A copy with some keys changed (and `sources` updated by the given ones), as a lever or
        a predicted step sets them; not resolved again (`resolve` validates)."""
        return dataclasses.replace(self, **changes, sources={**self.sources, **(sources or {})})

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @functools.cached_property
    def _shape(self) -> tuple[ModelShape, str]:
        return scenario_shape(self.values)

    @property
    def shape(self) -> ModelShape:
        """The model shape behind the scenario (`model_shape.scenario_shape`), built once."""
        return self._shape[0]

    @property
    def shape_source(self) -> str:
        """Where `shape` comes from: a model config, or the keys."""
        return self._shape[1]

    def numbers(self) -> dict[str, Any]:
        """{symbol name: number} for every symbol of the model that this scenario fixes (the
        names of costmodel.derive.symbols; no SymPy)."""
        out = {
            name: self.values[key]
            for key, name in SYMBOL_OF_KEY.items()
            if self.values.get(key) is not None
        }
        out["r"] = float(self.values["recompute_weights_fraction"])
        out["r_core"] = float(self.values["recompute_core_fraction"])
        out["a_sq"] = float(numeric.SQUARE_FRACTION[self.values["attention_flops"]])
        out["kappa"] = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[self.values["attention_kernel"]])
        return out

    def substitutions(self) -> dict:
        """{symbol: number} for every symbol of the model that this scenario fixes."""
        from costmodel.derive import symbols  # SymPy: only for the callers of expressions

        return {getattr(symbols, name): value for name, value in self.numbers().items()}

    @property
    def changed(self) -> list[str]:
        """Keys whose value differs from the course's."""
        course = resolve().values
        return [k for k in FIELDS if k != "name" and self.values.get(k) != course.get(k)]


def as_scenario(given: Scenario | Mapping[str, Any]) -> Scenario:
    """`given` if it is a Scenario; else a resolved scenario's `values` (or a copy of them with
    some keys changed: a notebook's, a test's) made a Scenario again, not validated again."""
    if isinstance(given, Scenario):
        return given
    return Scenario.from_values(given)


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
    return Scenario.from_values(values, sources, lengths)


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
        values["sum_squared_lengths"] = plain.sum_sq_of_mean(  # exact for integer inputs
            values["samples_per_step"], values["mean_tokens_per_sample"]
        )
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
