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

import difflib
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import yaml

from costmodel import hardware, symbols as sym
from costmodel.errors import CostModelError
from costmodel.recompute import POLICIES

RECOMPUTE_POLICIES = ("none", "selective", "full")
WIDTH_KEYS = ("attention_dim", "num_heads", "head_dim", "hidden_size")


@dataclass(frozen=True)
class Field:
    kind: str  # count | count0 | positive | fraction | choice | gpu | text | path
    help: str
    nullable: bool = False


FIELDS: dict[str, Field] = {
    "name": Field("text", "title of the scenario"),
    "model": Field("path", "a config.json path or a preset name; fills the model-shape keys",
                   nullable=True),
    "activated_params": Field("count", "N of 6ND: matmul parameters per token, no input embedding"),
    "total_params": Field("count", "all parameters, every expert"),
    "samples_per_step": Field("count", "samples (sequences) per optimizer step"),
    "mean_tokens_per_sample": Field("positive", "mean real tokens per sample"),
    "seq_len": Field("count", "configured (padded) sequence length, tokens"),
    "step_time": Field("positive", "seconds per optimizer step"),
    "num_gpus": Field("count", "GPUs in the job"),
    "gpu": Field("gpu", "GPU model (sets peak_flops and hbm_bandwidth)"),
    "peak_flops": Field("positive", "dense BF16 peak of one GPU, FLOP/s"),
    "hbm_bandwidth": Field("positive", "HBM bandwidth of one GPU, byte/s"),
    "recompute": Field("choice", "activation recompute: none | selective | full"),
    "selective_recompute_fraction": Field(
        "fraction", "share of forward FLOPs redone by selective recompute"),
    "measured_tokens_per_s": Field("positive", "measured cluster throughput, tokens/s",
                                   nullable=True),
    "hidden_size": Field("count", "hidden size"),
    "num_layers": Field("count", "transformer layers"),
    "full_attention_every": Field(
        "count", "one full-attention layer every k layers (1 = all; above num_layers = none)"),
    "num_heads": Field("count", "query heads of a full-attention layer", nullable=True),
    "head_dim": Field("count", "width of one attention head", nullable=True),
    "attention_dim": Field("count", "attention width (overrides num_heads x head_dim)",
                           nullable=True),
    "num_experts": Field("count0", "routed experts per MoE layer (0 = dense)"),
    "experts_per_token": Field("count0", "routed experts per token (top-k; 0 = dense)"),
    "vocab_size": Field("count", "vocabulary size"),
    "micro_batch": Field("count", "sequences per micro batch"),
}

ALLOWED = {
    "count": "a positive integer",
    "count0": "a non-negative integer",
    "positive": "a positive finite number",
    "fraction": "a number between 0 and 1",
    "choice": "one of " + ", ".join(RECOMPUTE_POLICIES),
    "gpu": "one of " + ", ".join(hardware.GPUS),
    "text": "a string",
    "path": "a config.json path or a preset name",
}


def _fail(key: str, value: Any, allowed: str) -> CostModelError:
    return CostModelError(f"{key}: {value!r} is not allowed; expected {allowed}")


def _number(key: str, value: Any, allowed: str) -> float:
    """A real number from YAML or --set text (PyYAML reads '3e9' as a string)."""
    if isinstance(value, bool):
        raise _fail(key, value, allowed)
    if isinstance(value, str):
        try:
            value = float(value.replace("_", ""))
        except ValueError:
            raise _fail(key, value, allowed) from None
    if not isinstance(value, (int, float)):
        raise _fail(key, value, allowed)
    if not math.isfinite(value):
        raise _fail(key, value, allowed)
    return value


def check_value(key: str, value: Any) -> Any:
    """Validate one key's value; return it in canonical form (int for counts)."""
    if key not in FIELDS:
        hint = difflib.get_close_matches(key, FIELDS, n=1)
        suggestion = f"did you mean '{hint[0]}'?" if hint else "valid keys: " + ", ".join(FIELDS)
        raise CostModelError(f"unknown scenario key '{key}' ({suggestion})")
    spec = FIELDS[key]
    allowed = ALLOWED[spec.kind] + (" or null" if spec.nullable else "")
    if value is None:
        if spec.nullable:
            return None
        raise _fail(key, value, allowed)
    if spec.kind in ("count", "count0"):
        number = _number(key, value, allowed)
        if number != int(number) or number < (1 if spec.kind == "count" else 0):
            raise _fail(key, value, allowed)
        return int(number)
    if spec.kind == "positive":
        number = _number(key, value, allowed)
        if number <= 0:
            raise _fail(key, value, allowed)
        return number
    if spec.kind == "fraction":
        number = _number(key, value, allowed)
        if not 0 <= number <= 1:
            raise _fail(key, value, allowed)
        return number
    if spec.kind == "choice":
        if str(value).lower() not in RECOMPUTE_POLICIES:
            raise _fail(key, value, allowed)
        return str(value).lower()
    if spec.kind == "gpu":
        gpu = hardware.lookup(str(value))
        if gpu is None:
            raise _fail(key, value, allowed)
        return gpu.name
    if not isinstance(value, str):
        raise _fail(key, value, allowed)
    return value


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a scenario file: a YAML mapping, with a safe loader."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CostModelError(f"scenario file '{path}': no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or type(error).__name__
        raise CostModelError(f"scenario file '{path}': cannot be read ({reason})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise CostModelError(f"scenario file '{path}': malformed YAML{where} ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CostModelError(
            f"scenario file '{path}': expected a mapping of keys to values, got {type(data).__name__}")
    return {str(key): value for key, value in data.items()}


def parse_set(items: list[str] | None) -> dict[str, Any]:
    """--set KEY=VALUE pairs; each value read as a YAML scalar."""
    result: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise CostModelError(f"--set: {item!r} is not allowed; expected KEY=VALUE")
        key, _, text = item.partition("=")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            value = text
        result[key.strip()] = value
    return result


def course_values() -> dict[str, Any]:
    source = resources.files("costmodel").joinpath("scenarios/course.yaml")
    return yaml.safe_load(source.read_text(encoding="utf-8"))


#: Which symbol each (resolved) scenario key gives a value to.
SYMBOL_OF_KEY = {
    "activated_params": sym.N, "total_params": sym.N_total, "tokens_per_step": sym.D,
    "samples_per_step": sym.B, "mean_tokens_per_sample": sym.s_mean, "seq_len": sym.S,
    "step_time": sym.T, "num_gpus": sym.n_gpu, "peak_flops": sym.P, "hbm_bandwidth": sym.BW,
    "measured_tokens_per_s": sym.tau, "hidden_size": sym.h, "num_layers": sym.L,
    "num_full_attention_layers": sym.L_full, "attention_dim": sym.d_attn,
    "num_experts": sym.E, "experts_per_token": sym.k, "vocab_size": sym.V,
    "micro_batch": sym.b_micro,
}


@dataclass(frozen=True)
class Scenario:
    """Resolved inputs: every key of FIELDS plus the derived ones, and where each came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def substitutions(self) -> dict:
        """{symbol: number} for every symbol of the model that this scenario fixes."""
        subs = {symbol: self.values[key] for key, symbol in SYMBOL_OF_KEY.items()
                if self.values.get(key) is not None}
        policy = self.values["recompute"]
        subs[sym.r] = (self.values["selective_recompute_fraction"] if policy == "selective"
                       else float(POLICIES[policy]))
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
    if not path.is_absolute() and (Path(base) / path).exists():
        return str((Path(base) / path).resolve())
    return reference


def _model_keys(reference: str) -> dict[str, Any]:
    from costmodel import models  # only when a scenario names a model

    return models.scenario_keys(models.load_shape(reference))


def resolve(file: str | Path | None = None, overrides: dict[str, Any] | None = None,
            data: dict[str, Any] | None = None) -> Scenario:
    """Course defaults, then the model named by `model:`, then `data`/the file, then overrides."""
    layers: list[tuple[str, dict[str, Any]]] = []
    if file is not None:
        layer = load_yaml(file)
        if isinstance(layer.get("model"), str):  # a path in a file is relative to the file
            layer["model"] = model_reference(layer["model"], Path(file).parent)
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
    model_layer = _checked(_model_keys(model_ref)) if model_ref else {}

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

    _derive(values, sources)
    _cross_check(values)
    return Scenario(values, sources)


def _checked(layer: dict[str, Any]) -> dict[str, Any]:
    return {key: check_value(key, value) for key, value in layer.items()}


def _derive(values: dict[str, Any], sources: dict[str, str]) -> None:
    if values.get("attention_dim") is not None:
        origin = "attention_dim"
    elif values.get("num_heads") is not None and values.get("head_dim") is not None:
        values["attention_dim"] = values["num_heads"] * values["head_dim"]
        origin = "num_heads x head_dim"
    else:
        values["attention_dim"] = values["hidden_size"]
        origin = "hidden_size"
    values["attention_dim_from"] = origin
    values["tokens_per_step"] = values["samples_per_step"] * values["mean_tokens_per_sample"]
    values["num_full_attention_layers"] = values["num_layers"] // values["full_attention_every"]
    for key in ("attention_dim_from", "tokens_per_step", "num_full_attention_layers"):
        sources[key] = "derived"


_RELATIONS: list[tuple[str, str, Callable[[Any, Any], bool], str]] = [
    ("mean_tokens_per_sample", "seq_len", lambda a, b: a <= b, "at most seq_len"),
    ("experts_per_token", "num_experts", lambda a, b: a <= b, "at most num_experts"),
    ("activated_params", "total_params", lambda a, b: a <= b, "at most total_params"),
]


def _cross_check(values: dict[str, Any]) -> None:
    for key, other, ok, allowed in _RELATIONS:
        if not ok(values[key], values[other]):
            raise CostModelError(
                f"{key}: {values[key]!r} is not allowed; expected {allowed} ({values[other]!r})")
    if (values["num_experts"] == 0) != (values["experts_per_token"] == 0):
        raise CostModelError(
            f"experts_per_token: {values['experts_per_token']!r} is not allowed; expected 0 "
            f"exactly when num_experts is 0 (num_experts = {values['num_experts']!r})")
