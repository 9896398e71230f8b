"""The keys resolution derives from the others (the lengths file's figures, the attention width,
tokens per step, the full-attention layers, the sum of squared lengths) and the checks of the
keys against each other (relations, the shape keys, the parameters of a model given by numbers),
on the mutable mapping `costmodel.inputs.scenario.resolve` fills before it makes the Scenario."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from costmodel.derive import plain
from costmodel.errors import CostModelError
from costmodel.formats import input_value, shown
from costmodel.inputs import hardware
from costmodel.inputs.fields import check_value
from costmodel.inputs.layout import layout_error
from costmodel.inputs.lengths import Lengths, summarize
from costmodel.inputs.model_shape import (
    MOE_SHAPE_KEYS,
    SHAPE_KEYS,
    matching_shape,
    query_heads,
    scenario_shape,
    shape_from_keys,
)


def read_lengths(values: dict[str, Any], sources: dict[str, str]) -> Lengths | None:
    """Read and summarize the lengths file; its mean becomes mean_tokens_per_sample."""
    if values.get("sequence_lengths") is None:
        return None
    lengths = summarize(values["sequence_lengths"], values["seq_len"], values["samples_per_step"])
    values["mean_tokens_per_sample"] = lengths.mean
    sources["mean_tokens_per_sample"] = "sequence_lengths"
    return lengths


def gpu_figures(values: dict[str, Any], sources: dict[str, str]) -> None:
    """`peak_flops` and `hbm_bandwidth` the scenario leaves null: the GPU table's figures of
    `gpu` (source `gpu table` for the course's GPU, else where the GPU came from)."""
    gpu = hardware.GPUS[values["gpu"]]
    for key, figure in (("peak_flops", gpu.bf16_flops), ("hbm_bandwidth", gpu.hbm_bandwidth)):
        if values.get(key) is None:
            values[key] = figure
            sources[key] = "gpu table" if sources.get("gpu") == "course" else sources["gpu"]


def check_mean_with_lengths(values: dict[str, Any], given: Any) -> None:
    """A lengths file gives the mean: a mean_tokens_per_sample the team gives beside one is
    refused (`given`: the keys the team gave)."""
    if values.get("sequence_lengths") is not None and "mean_tokens_per_sample" in given:
        raise CostModelError(
            f"mean_tokens_per_sample: {shown(values['mean_tokens_per_sample'])} is not allowed "
            "with sequence_lengths; expected one of the two (the lengths file gives the mean)"
        )


def derive(values: dict[str, Any], sources: dict[str, str], lengths: Lengths | None) -> None:
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


def cross_check(values: dict[str, Any]) -> None:
    for key, other, ok, allowed in _RELATIONS:
        if not ok(values[key], values[other]):
            raise CostModelError(
                f"{key}: {values[key]!r} is not allowed; expected {allowed} ({values[other]!r})"
            )
    _check_memory_reserve(values)
    if (values["num_experts"] == 0) != (values["experts_per_token"] == 0):
        raise CostModelError(
            f"experts_per_token: {values['experts_per_token']!r} is not allowed; expected 0 "
            f"exactly when num_experts is 0 (num_experts = {values['num_experts']!r})"
        )


def _check_memory_reserve(values: dict[str, Any]) -> None:
    """memory_reserve is taken from the card's memory as the CUDA runtime reports it: a reserve
    of all of it or more leaves no capacity (a negative one, printed as such, before)."""
    gpu = hardware.GPUS[values["gpu"]]
    if values["memory_reserve"] >= gpu.cuda_memory_bytes:
        raise CostModelError(
            f"memory_reserve: {input_value(values['memory_reserve'])} is not allowed; expected "
            f"less than {input_value(int(gpu.cuda_memory_bytes))}, the memory of one "
            f"{gpu.name} (gpu; its total as {gpu.cuda_memory_kind} gives it) the reserve is "
            "taken from"
        )


def _team(sources: dict[str, str], key: str) -> bool:
    """The team gave `key` (a scenario file or --set), not the course or a model config."""
    return sources.get(key) in ("file", "--set")


def check_shape_keys(values: dict[str, Any], sources: dict[str, str]) -> None:
    """The keys of a model given by numbers agree with the rest: K/V heads divide the query
    heads; the MoE keys only with experts; at least one MoE layer after the dense ones. A value
    the team gave and that does not agree is refused; one a model config filled, made stale by a
    structure key the team changed (a notebook's other hidden size, say), goes back to the
    course's null, so the shape built from the keys assumes it instead."""
    for key, allowed in _shape_key_conflicts(values):
        if _team(sources, key):
            raise layout_error(key, values[key], allowed)
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


def params_from_shape_keys(values: dict[str, Any], sources: dict[str, str]) -> None:
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


#: How far `activated_params` may lie from the N of the model shape whose GEMMs the step-time
#: model times (`scenario_shape`) when the predicted step stands for the step (step_time null):
#: the course rounds its N to 3.0e9, 1.8% above its shape's 2,945,269,760; a paper's table
#: rounds to two figures (at most 5% off); the published runs and the shipped scenarios take the
#: shape's own count (0%). A shape that is not the run's model is further off: the README's
#: dense 8B without its vocabulary and GQA keys, on the course's 248,320 tokens and no GQA, is
#: 22% off its N. Beyond it the predicted step times other GEMMs than 6ND counts, and MFU may
#: pass 100% (a one-layer shape under the course's N: 120.72%).
PARAMS_TOLERANCE = 0.10


def shape_params(values: Mapping[str, Any]) -> tuple[int, str]:
    """The N of the scenario's model shape (`scenario_shape`), with the MTP layers when they are
    counted, as a model config fills activated_params in (`models.scenario_keys`), and where
    the shape comes from."""
    shape, origin = scenario_shape(values)
    mtp = values["num_mtp_layers"] > 0
    return shape.activated_params + (shape.mtp_activated_params if mtp else 0), origin


def params_contradiction(
    values: Mapping[str, Any],
    use: str = "a predicted step",
    remedy: str = "give the measured step_time",
) -> str | None:
    """The one-line refusal of a predicted step (step_time null; `use`, a plan's search, whose
    every layout's step is predicted) whose activated_params lies more than PARAMS_TOLERANCE
    from the N of the model shape the step-time model times (`shape_params`), else None: MFU
    would divide 6ND by the time of other GEMMs."""
    expected, origin = shape_params(values)
    given = values["activated_params"]
    off = abs(given / expected - 1) if expected > 0 else math.inf
    if off <= PARAMS_TOLERANCE:
        return None
    if origin.startswith("config of "):
        where = f"{origin.removeprefix('config of ')}'s config"
    else:
        where = f"built from the {origin}"
    return (
        f"activated_params: {input_value(given)} is not allowed for {use}; expected "
        f"within {PARAMS_TOLERANCE:.0%} of {input_value(expected)} ({off:.1%} off), the N of "
        f"the model shape whose GEMMs the step-time model times ({where}): set activated_params "
        f"to it, set the shape keys or model: to the run's model{', or ' + remedy if remedy else ''}"
    )


def check_offload(values: dict[str, Any]) -> None:
    """cpu_offload_layers as Megatron-LM's TransformerConfig allows --cpu-offloading-num-layers:
    fewer than the model's layers, without recompute and without a pipeline."""
    n = values["cpu_offload_layers"]
    if not n:
        return
    if n >= values["num_layers"]:
        allowed = (
            f"fewer than the model's {values['num_layers']} layers (the last stays on the GPU)"
        )
        raise layout_error("cpu_offload_layers", n, allowed)
    for key, only in (("recompute", "none"), ("pipeline_parallel", 1)):
        if values[key] != only:
            allowed = f"0 with {key} {values[key]} (Megatron-LM offloads only with {key} {only})"
            raise layout_error("cpu_offload_layers", n, allowed)
