"""The resolved Scenario is a frozen, typed object: one annotated attribute per key (FIELDS and
the derived keys), read-only `values` and `sources`, typed views (layout, conventions, GPU,
shape); and the evaluate, present and publish layers read its keys as attributes, never by a
string subscript or `.get("key")` (an AST scan)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle
import types
import typing
from pathlib import Path

import pytest

from costmodel.evaluate.account import account
from costmodel.evaluate.simulate import run
from costmodel.inputs import hardware, scenario
from costmodel.inputs.fields import FIELDS
from costmodel.inputs.layout import LAYOUT_KEYS, Layout
from costmodel.inputs.scenario import DERIVED_KEYS, KIND_TYPES, Scenario

REPO = Path(__file__).resolve().parents[2]

#: The views and bookkeeping of Scenario that are not scenario keys.
NOT_KEYS = {
    "sources",
    "lengths",
    "key_order",
    "given",
    "values",
    "layout",
    "conventions",
    "gpu_spec",
}


def test_the_fields_are_the_keys_of_fields_and_the_derived_ones():
    """Drift: a key added to FIELDS (or derived by resolution) is an attribute of Scenario."""
    names = [f.name for f in dataclasses.fields(Scenario) if f.name not in NOT_KEYS]
    assert names == [*FIELDS, *DERIVED_KEYS]
    assert set(scenario.resolve().values) == set(names)


def test_the_annotations_agree_with_the_kinds():
    annotations = {f.name: f.type for f in dataclasses.fields(Scenario)}
    for key, spec in FIELDS.items():
        expected = KIND_TYPES[spec.kind] + (" | None" if spec.nullable else "")
        assert annotations[key] == expected, key


def _is(value, annotation) -> bool:
    """isinstance for the annotations of Scenario (unions, list[str])."""
    if annotation is type(None):
        return value is None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_is(value, arg) for arg in typing.get_args(annotation))
    if origin is list:
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, annotation)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"model": "deepseek-v3", "count_mtp": True, "num_gpus": 64},
        {"recompute": "selective", "step_time": None},
        {"pipeline_parallel": 2, "pipeline_schedule": "interleaved", "virtual_pipeline": 2},
    ],
)
def test_each_resolved_value_has_its_annotated_type(overrides):
    sc = scenario.resolve(overrides=overrides)
    hints = typing.get_type_hints(Scenario)
    for key in (*FIELDS, *DERIVED_KEYS):
        assert _is(getattr(sc, key), hints[key]), (key, getattr(sc, key), hints[key])


def test_a_scenario_cannot_be_changed_in_place():
    sc = scenario.resolve()
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.seq_len = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        sc.values["seq_len"] = 1  # type: ignore[index]
    with pytest.raises(TypeError):
        sc.sources["seq_len"] = "file"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.layout.tensor_parallel = 2  # type: ignore[misc]
    changed = sc.replace(seq_len=1024, sources={"seq_len": "--set"})
    assert (changed.seq_len, changed.values["seq_len"], changed.sources["seq_len"]) == (
        1024,
        1024,
        "--set",
    )
    assert (sc.seq_len, sc.sources["seq_len"]) == (49152, "course")
    assert list(changed.values) == list(sc.values)  # the order of the JSON's keys
    again = pickle.loads(pickle.dumps(changed))
    assert again == changed and again.values == changed.values
    assert again.sources == changed.sources and copy.deepcopy(changed) == changed


def test_the_views_are_the_keys():
    sc = scenario.resolve(overrides={"model": "llama-3.1-8b", "num_gpus": 16})
    assert sc.layout == Layout(**{key: getattr(sc, key) for key in LAYOUT_KEYS})
    assert sc.layout.data_parallel == 16 and sc.layout.tensor_parallel == 1
    assert sc.gpu_spec is hardware.GPUS[sc.gpu]
    assert sc.conventions.attention_kernel == sc.attention_kernel
    assert sc.shape.name == "llama-3.1-8b" and sc.shape_source.startswith("config of ")
    assert sc.shape is sc.shape  # built once


#: The course's keys in the order resolution set them before Scenario was typed (the order of
#: the JSON report's `scenario`).
COURSE_ORDER = (
    "name",
    "activated_params",
    "total_params",
    "samples_per_step",
    "mean_tokens_per_sample",
    "seq_len",
    "step_time",
    "num_gpus",
    "gpu",
    "recompute",
    "recompute_num_layers",
    "recompute_method",
    "recompute_modules",
    "selective_recompute_fraction",
    "measured_tokens_per_s",
    "hidden_size",
    "num_layers",
    "full_attention_every",
    "num_heads",
    "head_dim",
    "num_experts",
    "experts_per_token",
    "vocab_size",
    "ffn_hidden_size",
    "mlp_activation",
    "num_kv_heads",
    "moe_ffn_hidden_size",
    "shared_experts",
    "first_dense_layers",
    "micro_batch",
    "attention_flops",
    "attention_kernel",
    "framework",
    "cross_entropy",
    "dropout",
    "fp8",
    "fp8_activations",
    "batching",
    "attention_on_padding",
    "sequence_lengths",
    "count_mtp",
    "tensor_parallel",
    "pipeline_parallel",
    "first_stage_layers",
    "last_stage_layers",
    "embedding_in_pipeline_split",
    "loss_in_pipeline_split",
    "context_parallel",
    "expert_parallel",
    "expert_tensor_parallel",
    "sequence_parallel",
    "gpus_per_node",
    "zero_stage",
    "grad_bytes",
    "optimizer_dtype",
    "main_params_dtype",
    "cpu_offload_layers",
    "memory_reserve",
    "cp_comm_type",
    "collective_latency",
    "moe_router_max_nodes",
    "moe_router_max_devices",
    "fp8_dispatch",
    "tp_comm_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "ep_overlap",
    "ep_overlap_fraction",
    "moe_shared_expert_overlap",
    "pipeline_schedule",
    "virtual_pipeline",
    "gemm_efficiency",
    "attention_efficiency",
    "kernel_launch_overhead",
    "hbm_efficiency",
    "router_skew",
    "communication_share",
    "training_hours",
    "ce_chunks",
    "attention_kernel_speedup",
    "intra_node_bandwidth",
    "inter_node_bandwidth",
    "model",
    "peak_flops",
    "hbm_bandwidth",
    "num_mtp_layers",
    "attention_dim",
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
#: Derived and filled values of the course, as resolution gave them before Scenario was typed.
COURSE_DERIVED = {
    "tokens_per_step": 2310000,
    "num_full_attention_layers": 10,
    "sum_squared_lengths": 66701250000,
    "data_parallel": 40,
    "micro_batches_per_step": 2.0,
    "recompute_weights_fraction": 1.0,
    "recompute_core_fraction": 1.0,
    "attention_dim": 4096,
    "expert_parallel": 8,
    "peak_flops": 148000000000000.0,
    "hbm_bandwidth": 4000000000000.0,
    "cross_entropy": "fused",
}


def test_resolving_gives_the_values_it_always_gave():
    """The course, resolved: the keys in the order and the derived values resolution gave before
    Scenario was typed (each example scenario's values and sources were compared with the old
    resolution's when it was; the golden outputs of `costmodel report` cover them since)."""
    sc = scenario.resolve()
    assert tuple(sc.values) == COURSE_ORDER == sc.key_order
    assert {key: sc.values[key] for key in COURSE_DERIVED} == COURSE_DERIVED
    assert sc["seq_len"] == sc.seq_len == sc.values["seq_len"] == 49152
    assert sc.values == {key: getattr(sc, key) for key in sc.key_order}
    assert sc.sources["data_parallel"] == "derived" and sc.sources["seq_len"] == "course"


def test_a_predicted_step_is_a_new_scenario():
    """fill_step_time returns a Scenario with the predicted step; the one given is unchanged."""
    sc = scenario.resolve(overrides={"step_time": None})
    filled = account.fill_step_time(sc)
    assert sc.step_time is None and filled.step_time > 0
    assert filled.sources["step_time"] == "predicted" and filled.step_time_from == "predicted"
    assert account.account(sc)["scenario"]["step_time"] == filled.step_time
    assert sc.step_time is None


def test_a_variant_is_a_scenario_resolved_again():
    sc = scenario.resolve()
    changed = run.variant(sc, {"tensor_parallel": 2})
    assert isinstance(changed, Scenario)
    assert changed.layout.tensor_parallel == 2 and changed.data_parallel == sc.data_parallel // 2


# ------------------------------------------------------------------ no key read by a string

#: The scanned layers: none reads a scenario key by a string.
SCANNED = ("costmodel/evaluate", "costmodel/present", "costmodel/publish")
#: The names a Scenario (or, before it was typed, its values dict) goes by in those layers; an
#: expression rooted in one of them, or reached through an attribute `.values`, `.sc` or
#: `.scenario` (`base.sc`, `scene.sc`, `hsc.values`), is a scenario. Other dicts (the account
#: and its JSON, a lever's changes, a GEMM row) are output data and may hold keys of the same
#: names; `sources` (where each key came from) is read by key.
SCENARIO_NAMES = {"sc", "scenario", "values", "v", "hsc", "base", "again", "changed"}
SCENARIO_ATTRIBUTES = {"values", "sc", "scenario"}
SCENARIO_KEYS = set(FIELDS) | set(DERIVED_KEYS)


def _chain(node: ast.expr) -> tuple[str | None, list[str]]:
    """(the name an expression is rooted in, the attributes on the way: `base.sc.values` is
    ("base", ["values", "sc"]))."""
    attributes = []
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            attributes.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    return (node.id if isinstance(node, ast.Name) else None), attributes


def _string_reads(source: str, path: str = "<text>") -> list[str]:
    """`path:line key` for each `x["key"]` or `x.get("key", ...)` whose string is a scenario key
    and whose `x` is a scenario (SCENARIO_NAMES, SCENARIO_ATTRIBUTES; not its `sources`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            target, key = node.func.value, node.args[0]
        else:
            continue
        if not (isinstance(key, ast.Constant) and key.value in SCENARIO_KEYS):
            continue
        root, attributes = _chain(target)
        if "sources" in attributes:
            continue
        if root in SCENARIO_NAMES or SCENARIO_ATTRIBUTES & set(attributes):
            found.append(f"{path}:{node.lineno} {key.value}")
    return found


def test_no_layer_reads_a_scenario_key_by_a_string():
    found = []
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            found += _string_reads(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    assert found == []


@pytest.mark.parametrize(
    "code",
    [
        'x = values["seq_len"]',
        'x = sc.values.get("step_time_from")',
        'x = scenario["batching"]',
        'x = v.get("recompute_modules", None)',
        'x = base.sc.values["num_mtp_layers"]',
        'x = scene.sc["name"]',
    ],
)
def test_the_scan_finds_a_string_read(code):
    """The scan is not blind: each way the evaluate layer read keys before is found."""
    assert _string_reads(code) == [f"<text>:1 {code.split(chr(34))[1]}"]


def test_the_scan_leaves_output_and_attribute_reads():
    code = (
        'out["seq_len"] = sc.seq_len\nx = sc.values[key]\ny = acc["padding"]["batching"]\n'
        'z = sc.sources.get("expert_parallel")\nw = changes["recompute"]'
    )
    assert _string_reads(code) == []
