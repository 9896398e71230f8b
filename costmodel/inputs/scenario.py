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
from dataclasses import field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from costmodel.derive import numeric
from costmodel.derive.lanes import as_float
from costmodel.errors import CostModelError  # noqa: F401 (re-exported: callers catch it here)
from costmodel.inputs import attention_kernels, hardware, what_if
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
    check_layout,
    layout_error,
    memory_settings,
    recompute_fractions,
    shape_of,
)
from costmodel.inputs.lengths import Lengths
from costmodel.inputs.model_shape import scenario_shape
from costmodel.inputs.resolution import (  # noqa: F401
    check_mean_with_lengths,
    check_offload,
    check_shape_keys,
    cross_check,
    derive,
    gpu_figures,
    params_from_shape_keys,
    read_lengths,
)
from costmodel.inputs.scenario_layers import (  # noqa: F401 (re-exported)
    checked_layer,
    course_values,
    merged_layers,
    model_keys,
    model_keys_layer,
    model_reference,
    relative_to_file,
    shown_name,
    user_layers,
)
from costmodel.inputs.shape import ModelShape
from costmodel.records import frozen_dataclass

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
_KEY_SET = frozenset(KEYS)  # (`Scenario.from_values`: every key and no other)
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
    "attention_on_padding",
    "cross_entropy",
    "ce_chunks",
)
#: The keys `Scenario.relaid` changes: the layout's, its recompute and FP8 settings, and what
#: resolution derives from them.
RELAID_KEYS = frozenset(
    (
        *LAYOUT_KEYS,
        "recompute",
        "recompute_modules",
        "recompute_num_layers",
        "recompute_method",
        "selective_recompute_fraction",
        "recompute_weights_fraction",
        "recompute_core_fraction",
        "recompute_fraction_from",
        "fp8",
        "fp8_activations",
    )
)


@frozen_dataclass
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
    attention_on_padding: str
    cross_entropy: str
    ce_chunks: int


@frozen_dataclass
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
    dropout: bool
    fp8: str
    fp8_activations: str
    batching: str
    attention_on_padding: str
    sequence_lengths: str | None
    count_mtp: bool
    tensor_parallel: int
    pipeline_parallel: int
    first_stage_layers: int | None
    last_stage_layers: int | None
    embedding_in_pipeline_split: bool
    loss_in_pipeline_split: bool
    context_parallel: int
    expert_parallel: int
    expert_tensor_parallel: int | None
    sequence_parallel: bool
    gpus_per_node: int
    zero_stage: int
    grad_bytes: int
    optimizer_dtype: str
    main_params_dtype: str
    cpu_offload_layers: int
    memory_reserve: int
    cp_comm_type: str
    collective_latency: str
    moe_router_max_nodes: int | None
    moe_router_max_devices: int | None
    fp8_dispatch: bool
    tp_comm_overlap: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    ep_overlap: str
    ep_overlap_fraction: int | float
    moe_shared_expert_overlap: bool
    pipeline_schedule: str
    virtual_pipeline: int | None
    gemm_efficiency: int | float | None
    attention_efficiency: int | float | None
    kernel_launch_overhead: int | float
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
    #: The keys the team gave (a scenario file, `data`, --set, a what-if's changes), as resolve
    #: read them: what `what_if` takes as the scenario's inputs where a source alone cannot say
    #: (a GPU's figures filled under the team's GPU; a dense model's EP 1, derived either way).
    given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    values: Mapping[str, Any] = field(init=False, repr=False, compare=False)
    layout: Layout = field(init=False, repr=False, compare=False)
    conventions: Conventions = field(init=False, repr=False, compare=False)
    gpu_spec: hardware.GPU = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        order = self.key_order or KEYS
        self._finish({key: getattr(self, key) for key in order}, self.sources, self.given)

    def _finish(self, values: dict[str, Any], sources: Mapping[str, str], given: Any) -> None:
        """The fields made from the values (in order), sources and given keys; the GPU's."""
        state = self.__dict__
        state["values"] = MappingProxyType(values)
        state["sources"] = MappingProxyType(dict(sources))
        state["given"] = frozenset(given)
        state["layout"] = Layout(**{key: values[key] for key in LAYOUT_KEYS})
        state["conventions"] = Conventions(**{key: values[key] for key in CONVENTION_KEYS})
        state["gpu_spec"] = hardware.GPUS[values["gpu"]]

    @classmethod
    def from_values(
        cls,
        values: Mapping[str, Any],
        sources: Mapping[str, str] | None = None,
        lengths: Lengths | None = None,
        given: Any = (),
    ) -> Scenario:
        """The Scenario of resolved `values` (every key of KEYS), keeping their order; `given`:
        the keys the team gave. Its fields set at once (a sweep makes thousands), as
        `Scenario(**values, ...)` does, which a key missing or unknown is left to (its error)."""
        if cls is Scenario and values.keys() == _KEY_SET:
            new = object.__new__(cls)
            new.__dict__.update(values, lengths=lengths, key_order=tuple(values))
            new._finish(dict(values), sources or {}, given)
            return new
        return cls(
            **values,
            sources=dict(sources or {}),
            lengths=lengths,
            key_order=tuple(values),
            given=frozenset(given),
        )

    def replace(self, sources: Mapping[str, str] | None = None, **changes: Any) -> Scenario:
        """A copy with some keys changed (and `sources` updated by the given ones), as a lever or
        a predicted step sets them; not resolved again (`resolve` validates)."""
        return dataclasses.replace(self, **changes, sources={**self.sources, **(sources or {})})

    def what_if(self, **changes: Any) -> Scenario:
        """The scenario with `changes` (scenario keys), derived again from this one: equal to
        `resolve` of its inputs with the changes set, re-running only what they touch
        (costmodel.inputs.what_if.changed: the validator's one line where a key or the layout
        is refused)."""
        return what_if.changed(self, changes)

    def relaid(self, **changes: Any) -> Scenario:
        """`replace` of layout and recompute keys only (RELAID_KEYS), fast: the fields copied,
        the values, layout and conventions rebuilt, the model shape kept (it rests on the
        structure keys alone). The plan's search builds thousands of layouts this way: those
        its space proposes pass the layout's rules (evaluate.plan.plan_space asks inputs.layout's),
        and it times the scenario's own layout even where they refuse it (its `own` row), so
        nothing is refused here; `what_if` is the checked path."""
        unknown = changes.keys() - RELAID_KEYS
        if unknown:
            raise ValueError(f"relaid: {sorted(unknown)} are not layout keys")
        return self._copied(changes, relayout=True)

    def _copied(self, changes: Mapping[str, Any], relayout: bool = False, **fields) -> Scenario:
        """The fields copied with `changes` (and `fields`), the values rebuilt, the layout and
        conventions too where `relayout`, the model shape kept."""
        new = object.__new__(Scenario)
        fields = {**self.__dict__, **changes, **fields}
        values = {**self.values, **changes}
        fields["values"] = MappingProxyType(values)
        if relayout:
            fields["layout"] = Layout(**{key: values[key] for key in LAYOUT_KEYS})
            fields["conventions"] = Conventions(**{key: values[key] for key in CONVENTION_KEYS})
        new.__dict__.update(fields)
        return new

    def with_shape(self, shape: tuple[ModelShape, str] | None) -> Scenario:
        """This scenario, its model shape (`scenario_shape` of its values, where it is known
        already: the layout's rules built it, or a what-if kept it) kept as `shape`."""
        if shape is not None:
            self.__dict__["_shape"] = shape
        return self

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __reduce__(self):
        """Pickled and copied as its values, sources, lengths and given keys (a read-only mapping
        is not)."""
        state = (dict(self.values), dict(self.sources), self.lengths, self.given)
        return (Scenario.from_values, state)

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
        out["r"] = as_float(self.values["recompute_weights_fraction"])
        out["r_core"] = as_float(self.values["recompute_core_fraction"])
        out["a_sq"] = float(numeric.SQUARE_FRACTION[self.values["attention_flops"]])
        kind = attention_kernels.KIND[self.values["attention_kernel"]]
        out["kappa"] = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[kind])
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


def load_yaml(path: str | Path) -> dict[str, Any]:
    """A scenario file's keys (costmodel.inputs.scenario_yaml: PyYAML, imported here)."""
    from costmodel.inputs import scenario_yaml

    return scenario_yaml.load_yaml(path)


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs, each value read as a YAML scalar (costmodel.inputs.scenario_yaml:
    PyYAML, imported only when there is one)."""
    if not items:
        return {}
    from costmodel.inputs import scenario_yaml

    return scenario_yaml.parse_set(items)


def as_scenario(given: Scenario) -> Scenario:
    """`given`, checked to be a Scenario: the evaluate layer takes a resolved Scenario (`resolve`;
    a changed copy: `Scenario.replace`), never a mapping of keys."""
    if isinstance(given, Scenario):
        return given
    raise TypeError(
        f"expected a resolved Scenario (costmodel.inputs.scenario.resolve; a changed copy: "
        f"Scenario.replace), got {type(given).__name__}"
    )


def resolve(
    file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> Scenario:
    """Course defaults, then the model named by `model:`, then `data`/the file, then overrides."""
    user, sources = user_layers(file, overrides, data)
    model_layer, mtp_layers = model_keys_layer(user)
    set_only = overrides if file is None and not data else None  # the course's, a few keys set
    values = merged_layers(user, model_layer, sources, named_after=set_only)

    gpu_figures(values, sources)
    check_mean_with_lengths(values, user)
    values["num_mtp_layers"] = mtp_layers
    sources["num_mtp_layers"] = "derived"
    lengths = read_lengths(values, sources)
    derive(values, sources, lengths)
    check_shape_keys(values, sources)
    params_from_shape_keys(values, sources)
    cross_check(values)
    shape = shape_of(values)  # built once, for the layout's rules and the Scenario
    check_layout(values, sources, shape)
    memory_settings(values, sources, shape)
    check_offload(values)
    return Scenario.from_values(values, sources, lengths, given=user).with_shape(shape.built)
