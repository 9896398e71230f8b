"""Per-family shape resolution: ``resolve_family`` finds a config's family, and
``FAMILIES[family](fields, base)`` reads that family's blocks (attention, linear attention,
MLP/MoE, MTP layers left out), which ``common.build_shape`` sums into a ``ModelShape``."""

from __future__ import annotations

from collections.abc import Callable

from costmodel.errors import CostModelError
from costmodel.inputs.config import Fields
from costmodel.inputs.families import (
    deepseek,
    gemma,
    gpt2,
    gpt_neox,
    gpt_oss,
    llama,
    mixtral,
    nemotron,
    qwen_moe,
)
from costmodel.inputs.families.common import Base, Parts

#: model_type -> the function that reads its blocks (the order is that of the error messages)
FAMILIES: dict[str, Callable[[Fields, Base], Parts]] = {
    "llama": llama.resolve,
    "qwen2": llama.resolve,
    "qwen3": llama.resolve,
    "qwen3_moe": qwen_moe.resolve,
    "qwen3_next": qwen_moe.resolve,
    "qwen3_5_moe": qwen_moe.resolve,
    "mixtral": mixtral.resolve,
    "deepseek_v3": deepseek.resolve,
    "gpt2": gpt2.resolve,
    "gpt_neox": gpt_neox.resolve,
    "mistral": llama.resolve,
    "gemma2": gemma.resolve,
    "gemma3_text": gemma.resolve,
    "nemotron": nemotron.resolve,
    "deepseek_v2": deepseek.resolve,
    "gpt_oss": gpt_oss.resolve,
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(FAMILIES)

# model_type of a text sub-config -> the family it belongs to
_TEXT_MODEL_TYPE_ALIASES = {"qwen3_5_moe_text": "qwen3_5_moe"}


def resolve_family(cfg: dict) -> tuple[str, dict, dict]:
    """Return (family, text-model fields, outer config) for a flat or wrapped config."""
    if not isinstance(cfg, dict):
        raise CostModelError(f"model config: expected a JSON object, got {type(cfg).__name__}")
    supported = ", ".join(SUPPORTED_MODEL_TYPES)
    outer_type = cfg.get("model_type")
    text = cfg.get("text_config")
    if text is not None and not isinstance(text, dict):
        raise CostModelError(f"config field 'text_config' has value {text!r}; expected an object")
    inner = text if isinstance(text, dict) else cfg
    candidates = [outer_type]
    if text is not None:
        candidates.append(text.get("model_type"))
    for candidate in candidates:
        family = _TEXT_MODEL_TYPE_ALIASES.get(candidate, candidate)
        if family in SUPPORTED_MODEL_TYPES:
            return family, inner, cfg
    if outer_type is None:
        raise CostModelError(f"config field 'model_type' is missing; supported: {supported}")
    raise CostModelError(
        f"config field 'model_type' has value {outer_type!r}; supported: {supported}"
    )
