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

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

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


@dataclass(frozen=True)
class Scenario:
    """Resolved inputs: every key of FIELDS plus the derived ones, and where each came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    #: The lengths file of `sequence_lengths`, summarized (None without one).
    lengths: Lengths | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __getattr__(self, key: str) -> Any:
        """A resolved key as an attribute (`sc.seq_len`)."""
        values = self.__dict__.get("values")
        if values is None or key not in values:
            raise AttributeError(key)
        return values[key]

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
