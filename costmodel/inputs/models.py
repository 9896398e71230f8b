"""Model shapes and parameter counts read from a Hugging Face ``config.json``.

This module is pure Python (``json`` and the standard library only) so that ``costmodel params``
starts fast; it imports neither sympy, numpy nor torch.

Reading a config
----------------
``load_config`` accepts a file path or a preset name (``PRESETS``), ``shape_from_config`` turns
the dict into a frozen ``ModelShape`` and ``load_shape`` does both. A config may be flat (the
usual ``config.json`` of a causal LM) or a multimodal wrapper whose language model sits under
``text_config`` (``qwen3_5_moe``); only the language model is counted: no vision tower, no
multi-token-prediction (MTP) layers (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``).
Optional fields take the default that ``transformers`` gives them (``num_key_value_heads`` =
``num_attention_heads``, ``head_dim`` = ``hidden_size // num_attention_heads``,
``tie_word_embeddings`` false, ``full_attention_interval`` 4 for the hybrids, ...). Bad input
(missing file, bad JSON, a missing or malformed required field, an unsupported ``model_type``)
raises ``CostModelError`` with a one-line message.

Layer layout
------------
Full attention vs linear attention (gated DeltaNet) per layer comes from ``layer_types`` when the
config has it, else from ``full_attention_interval`` (layer ``i`` is full when
``(i + 1) % interval == 0``), else every layer is full attention. Dense MLP vs MoE per layer:
``qwen3_moe``/``qwen3_next``: MoE unless ``i in mlp_only_layers`` or
``(i + 1) % decoder_sparse_step != 0``; ``deepseek_v3``: MoE when ``i >= first_k_dense_replace``
and ``i % moe_layer_freq == 0``; ``mixtral`` and ``qwen3_5_moe``: every layer is MoE.

Which tensor counts where
-------------------------
Every parameter tensor of the model falls in exactly one component of ``ModelShape.breakdown``:

=======================  ========================================================================
component                tensors
=======================  ========================================================================
attention                weight matrices of the full-attention layers: q/k/v/o projections (q is
                         doubled when there is an output gate: ``attn_output_gate``, qwen3_next);
                         MLA: q_a, q_b (or q), kv_a_proj_with_mqa, kv_b, o
linear_attention         weight matrices of the gated-DeltaNet layers: in_proj_qkvz + in_proj_ba
                         (qwen3_next) or in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
                         (qwen3_5_moe), out_proj
router                   the MoE gate (router) matrix, num_experts x hidden_size per MoE layer
routed_experts_total     all routed experts (gate, up and down matrices), every MoE layer
routed_experts_active    routed_experts_total x experts_per_token / num_experts (not a tensor of
                         its own: the share of routed experts one token uses)
shared_experts           shared expert(s) (gate, up, down) and the 1 x hidden shared-expert gate
dense_mlp                gate/up/down of the dense MLP layers
norms_and_other          every vector and non-matmul tensor: RMSNorm weights (per layer, final,
                         q/k norms, MLA q_a/kv_a norms, DeltaNet gated norm), biases (qwen2 q/k/v
                         biases, ``attention_bias``, ``mlp_bias``), the DeltaNet depthwise conv1d
                         kernel, A_log and dt_bias
embedding                the input embedding, vocab_size x hidden_size
lm_head                  the output projection, vocab_size x hidden_size, always listed, also
                         when it is tied to the embedding (it is still a matmul per token)
=======================  ========================================================================

From these components:

- ``total_params`` (as published; tied weights counted once) = every component except
  ``routed_experts_active``, with ``lm_head`` left out when ``tie_word_embeddings`` is true.
- ``activated_params_published`` = ``total_params - routed_experts_total +
  routed_experts_active``: every parameter except the routed experts, plus the routed experts
  times k/E. It includes the input embedding, the norms and the lm_head (once, if tied). This is
  what model cards call "active" (e.g. "A3B").
- ``activated_params`` = the project's N in 6ND: the parameters taking part in a matrix multiply
  for each token = attention + linear_attention + router + routed_experts_active +
  shared_experts + dense_mlp + lm_head (counted even when tied). The input embedding is a lookup
  (no FLOPs) and ``norms_and_other`` are not matmul weights, so both are left out. This is the N
  for which ``torch.utils.flop_counter.FlopCounterMode`` counts exactly 6·N·tokens of weight
  matmuls in a forward+backward pass (see ``costmodel.validate``).

Buffers are not parameters: DeepSeek-V3's ``e_score_correction_bias`` (a buffer in
``transformers``, 256 values per MoE layer) is not counted.

Attention width
---------------
``attention_dim`` is the width the attention core (QKᵀ and AV) works on: ``num_heads *
head_dim`` (not ``hidden_size``: Qwen3.6-35B-A3B has 16 x 256 = 4096 with hidden_size 2048). For
MLA (deepseek_v3), QKᵀ runs on ``qk_head_dim = qk_nope_head_dim + qk_rope_head_dim`` and AV on
``v_head_dim``, so the forward core costs ``2·s²·num_heads·(qk_head_dim + v_head_dim)``; to keep
the ``4·s²·attention_dim`` form we set ``attention_dim = num_heads * (qk_head_dim + v_head_dim) /
2`` and ``head_dim = (qk_head_dim + v_head_dim) / 2`` (DeepSeek-V3: 128 x 160 = 20480), with the
real ``qk_head_dim`` and ``v_head_dim`` kept as fields of their own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.formats import human_count, num, shown

__all__ = [
    "PRESETS",
    "SUPPORTED_MODEL_TYPES",
    "ModelShape",
    "load_config",
    "shape_from_config",
    "load_shape",
    "scenario_keys",
    "params_json",
    "params_text",
    "linear_attention_flops_per_token",
    "linear_attention_conv_flops_per_token",
    "linear_attention_training_flops",
]

PRESETS: dict[str, str] = {
    "qwen3.6-35b-a3b": "qwen3.6-35b-a3b.json",
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b.json",
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",
    "qwen3-8b": "qwen3-8b.json",
    "llama-3.1-8b": "llama-3.1-8b.json",
}

SUPPORTED_MODEL_TYPES: tuple[str, ...] = (
    "llama",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "qwen3_5_moe",
    "mixtral",
    "deepseek_v3",
)

# model_type of a text sub-config -> the family it belongs to
_TEXT_MODEL_TYPE_ALIASES = {"qwen3_5_moe_text": "qwen3_5_moe"}

_PRESET_DIR = Path(__file__).resolve().parent / "presets"

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"

BREAKDOWN_KEYS: tuple[str, ...] = (
    "attention",
    "linear_attention",
    "router",
    "routed_experts_total",
    "routed_experts_active",
    "shared_experts",
    "dense_mlp",
    "norms_and_other",
    "embedding",
    "lm_head",
)

# components whose sum is activated_params (the N of 6ND)
_MATMUL_KEYS = (
    "attention",
    "linear_attention",
    "router",
    "routed_experts_active",
    "shared_experts",
    "dense_mlp",
    "lm_head",
)


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only LM and its parameter counts (see the module docstring)."""

    name: str
    model_type: str
    hidden_size: int
    num_layers: int
    layer_types: tuple[str, ...]
    num_full_attention_layers: int
    num_linear_attention_layers: int
    full_attention_every: int | None
    num_heads: int
    num_kv_heads: int
    head_dim: int
    qk_head_dim: int
    v_head_dim: int
    attention_dim: int
    attention_output_gate: bool
    mla: bool
    q_lora_rank: int
    kv_lora_rank: int
    vocab_size: int
    tie_word_embeddings: bool
    intermediate_size: int
    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    moe_layer_flags: tuple[bool, ...]
    num_moe_layers: int
    num_dense_layers: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    num_mtp_layers_excluded: int
    total_params: int
    embedding_params: int
    lm_head_params: int
    activated_params: int
    activated_params_published: int
    breakdown_items: tuple[tuple[str, int], ...]

    @property
    def breakdown(self) -> dict[str, int]:
        """Parameter count per component, keys as in ``BREAKDOWN_KEYS``."""
        return dict(self.breakdown_items)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_hybrid(self) -> bool:
        return self.num_linear_attention_layers > 0


# ---------------------------------------------------------------------------------------------
# loading


#: The largest input file read: a scenario YAML or a config.json (published configs are a few
#: KiB). Checked before reading, so that a huge file or a device such as /dev/zero is refused.
MAX_INPUT_BYTES = 1 << 20  # 1 MiB

#: Integers in a config.json longer than this many digits are refused (no real field is near it;
#: a float overflows at 309 digits, and Python refuses to parse more than 4300).
_MAX_JSON_DIGITS = 300


def read_input(path: Path, label: str) -> str:
    """The UTF-8 text of an input file, refused above ``MAX_INPUT_BYTES`` before it is read.

    ``label`` names the file in messages (``model config 'x.json'``). Raises ``CostModelError``
    for a missing file, a directory, an unreadable or oversized file."""
    try:
        if path.is_dir():
            raise CostModelError(f"{label}: is a directory; expected a file")
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise _too_large(label, size)
        with path.open("rb") as stream:  # a device or a pipe may say size 0 and never end
            data = stream.read(MAX_INPUT_BYTES + 1)
    except FileNotFoundError:
        raise CostModelError(f"{label}: no such file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise CostModelError(f"{label}: cannot be read ({reason})") from None
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(label, MAX_INPUT_BYTES, "more than ")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CostModelError(f"{label}: cannot be read (not UTF-8 at byte {exc.start})") from None


def _too_large(label: str, size: int, more: str = "") -> CostModelError:
    limit = f"{MAX_INPUT_BYTES:,} bytes (1 MiB)"
    return CostModelError(f"{label}: {more}{size:,} bytes is not allowed; expected at most {limit}")


class _NotFinite(str):
    """The JSON text of a number that is no finite float: Infinity, NaN, 1e400, a huge integer."""


def _parse_float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


def _parse_int(text: str):
    return int(text) if len(text.lstrip("-")) <= _MAX_JSON_DIGITS else _NotFinite(text)


def _first_not_finite(cfg) -> tuple[str, str] | None:
    """(dotted field name, JSON text) of the first number that is not finite, else None."""
    stack = [("", cfg)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, _NotFinite):
            return where or "(top level)", value
        if isinstance(value, dict):
            items = list(value.items())
        elif isinstance(value, list):
            items = [(f"[{i}]", v) for i, v in enumerate(value)]
        else:
            continue
        for key, item in reversed(items):
            name = key if key.startswith("[") and isinstance(value, list) else f".{key}"
            stack.append(((where + name).lstrip("."), item))
    return None


def load_config(path_or_preset: str) -> dict:
    """Read a ``config.json`` from a file path, or the one shipped for a preset name.

    Refused with ``CostModelError``: a missing file, a directory, a file over
    ``MAX_INPUT_BYTES``, invalid JSON, ``Infinity``/``NaN`` or a number that overflows a float
    (``1e400``), JSON that is not an object."""
    text_arg = str(path_or_preset)
    name = repr(text_arg)[1:-1]  # escapes a line break or a NUL byte
    label = f"model config '{name if len(name) <= 200 else name[:200] + '…'}'"
    if text_arg in PRESETS:
        path = _PRESET_DIR / PRESETS[text_arg]
    else:
        path = Path(text_arg)
        try:
            exists = path.exists()
        except (OSError, ValueError):  # a name too long for the file system, a NUL byte
            exists = False
        if not exists:
            known = ", ".join(sorted(PRESETS))
            raise CostModelError(f"{label}: no such file, and not a preset (presets: {known})")
        if path.is_dir():
            raise CostModelError(
                f"{label}: is a directory; expected a config.json file or a preset name"
            )
    text = read_input(path, label)
    try:
        cfg = json.loads(
            text, parse_constant=_NotFinite, parse_float=_parse_float, parse_int=_parse_int
        )
    except json.JSONDecodeError as exc:
        raise CostModelError(
            f"{label}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise CostModelError(
            f"{label}: JSON nested too deeply is not allowed; expected a "
            "config.json object of fields"
        ) from None
    if not isinstance(cfg, dict):
        raise CostModelError(f"{label}: expected a JSON object, got {type(cfg).__name__}")
    bad = _first_not_finite(cfg)
    if bad is not None:
        where, number = bad
        raise CostModelError(
            f"{label}: field '{where}': {shown(str(number))[1:-1]} is not allowed; expected a "
            "finite number (JSON has no Infinity or NaN)"
        )
    return cfg


def load_shape(path_or_preset: str) -> ModelShape:
    """``shape_from_config(load_config(path_or_preset))``, named after the file or preset."""
    cfg = load_config(path_or_preset)
    text_arg = str(path_or_preset)
    name = text_arg if text_arg in PRESETS else Path(text_arg).stem
    return shape_from_config(cfg, name=name)


# ---------------------------------------------------------------------------------------------
# field access with one-line errors


#: Largest value of a config field read by ``_Fields.int`` (default ``_DEFAULT_MAXIMUM``). They
#: match the scenario's bounds (``costmodel.inputs.scenario.FIELDS``) and are checked before any
#: per-layer list is built, so that ``num_hidden_layers: 1e9`` is refused at once.
_FIELD_MAXIMA: dict[str, int] = {
    "num_hidden_layers": 100_000,
    "full_attention_interval": 100_000,
    "decoder_sparse_step": 100_000,
    "moe_layer_freq": 100_000,
    "first_k_dense_replace": 100_000,
    "num_nextn_predict_layers": 100_000,
    "mtp_num_hidden_layers": 100_000,
    "hidden_size": 10**7,
    "num_attention_heads": 100_000,
    "num_key_value_heads": 100_000,
    "head_dim": 10**6,
    "vocab_size": 10**9,
    "num_experts": 10**6,
    "num_local_experts": 10**6,
    "n_routed_experts": 10**6,
    "num_experts_per_tok": 10**6,
}
_DEFAULT_MAXIMUM = 10**9


class _Fields:
    """Typed access to a config dict; errors name the field, the value and what is allowed."""

    def __init__(self, cfg: dict, model_type: str):
        self.cfg = cfg
        self.model_type = model_type

    def _missing(self, key: str) -> CostModelError:
        return CostModelError(
            f"config field '{key}' is missing (required for model_type '{self.model_type}')"
        )

    @staticmethod
    def _refuse(key: str, value, allowed: str) -> CostModelError:
        return CostModelError(
            f"config field '{key}': {shown(value)} is not allowed; expected {allowed}"
        )

    def int(self, key: str, default=None, *, minimum: int = 1):
        value = self.cfg.get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        maximum = _FIELD_MAXIMA.get(key, _DEFAULT_MAXIMUM)
        allowed = f"an integer from {minimum} to {maximum:,}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._refuse(key, value, allowed)
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise self._refuse(key, value, allowed)
        if not minimum <= value <= maximum:
            raise self._refuse(key, value, allowed)
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._refuse(key, value, "true or false")
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.cfg.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self._refuse(key, value, "a list of integers")
        return list(value)


# ---------------------------------------------------------------------------------------------
# config -> shape


def _resolve(cfg: dict) -> tuple[str, dict, dict]:
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


def _layer_types(f: _Fields, family: str, num_layers: int) -> tuple[str, ...]:
    cfg = f.cfg
    raw = cfg.get("layer_types")
    if raw is not None:
        allowed = (FULL_ATTENTION, LINEAR_ATTENTION)
        if not isinstance(raw, list) or len(raw) != num_layers:
            raise CostModelError(
                f"config field 'layer_types' has {len(raw) if isinstance(raw, list) else repr(raw)} "
                f"entries; expected a list of num_hidden_layers = {num_layers}"
            )
        for value in raw:
            if value not in allowed:
                raise CostModelError(
                    f"config field 'layer_types' has value {value!r}; allowed: {', '.join(allowed)}"
                )
        if family not in ("qwen3_next", "qwen3_5_moe") and LINEAR_ATTENTION in raw:
            raise CostModelError(
                f"config field 'layer_types' has value 'linear_attention' but model_type '{family}' "
                "has no linear-attention layers; hybrids: qwen3_next, qwen3_5_moe"
            )
        return tuple(raw)
    if family in ("qwen3_next", "qwen3_5_moe"):
        interval = f.int("full_attention_interval", 4)
        return tuple(
            FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION
            for i in range(num_layers)
        )
    return tuple(FULL_ATTENTION for _ in range(num_layers))


def _period(layer_types: tuple[str, ...]) -> int | None:
    """p such that the full-attention layers are exactly those with (i + 1) % p == 0, else None."""
    n = len(layer_types)
    full = {i for i, t in enumerate(layer_types) if t == FULL_ATTENTION}
    if not full:
        return None
    p = min(full) + 1  # the only candidate: the first layer i with (i + 1) % p == 0 is p - 1
    return p if full == set(range(p - 1, n, p)) else None


def _moe_flags(f: _Fields, family: str, num_layers: int, num_experts: int) -> tuple[bool, ...]:
    if num_experts == 0:
        return tuple(False for _ in range(num_layers))
    if family in ("qwen3_moe", "qwen3_next"):
        only_mlp = set(f.int_list("mlp_only_layers"))
        step = f.int("decoder_sparse_step", 1)
        return tuple(i not in only_mlp and (i + 1) % step == 0 for i in range(num_layers))
    if family == "deepseek_v3":
        first_dense = f.int("first_k_dense_replace", 0, minimum=0)
        freq = f.int("moe_layer_freq", 1)
        return tuple(i >= first_dense and i % freq == 0 for i in range(num_layers))
    return tuple(True for _ in range(num_layers))  # mixtral, qwen3_5_moe


def shape_from_config(cfg: dict, name: str = "") -> ModelShape:
    """Derive a ``ModelShape`` (layout and parameter counts) from a config dict."""
    family, inner, outer = _resolve(cfg)
    f = _Fields(inner, family)

    hidden = f.int("hidden_size")
    num_layers = f.int("num_hidden_layers")
    vocab = f.int("vocab_size")
    num_heads = f.int("num_attention_heads")
    num_kv_heads = f.int("num_key_value_heads", num_heads)
    tie_default = outer.get("tie_word_embeddings", False) if inner is not outer else False
    tie = f.bool("tie_word_embeddings", bool(tie_default))
    qk_norm = family in ("qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_moe")

    layer_types = _layer_types(f, family, num_layers)
    n_full = sum(1 for t in layer_types if t == FULL_ATTENTION)
    n_linear = num_layers - n_full

    # ---- attention (per full-attention layer) ----
    mla = family == "deepseek_v3"
    q_lora = kv_lora = 0
    gate = False
    if mla:
        nope = f.int("qk_nope_head_dim")
        rope = f.int("qk_rope_head_dim")
        v_dim = f.int("v_head_dim")
        kv_lora = f.int("kv_lora_rank")
        q_lora = f.int("q_lora_rank", 0, minimum=0)
        qk_dim = nope + rope
        bias = f.bool("attention_bias", False)
        if q_lora:
            attn_w = hidden * q_lora + q_lora * num_heads * qk_dim
            attn_other = q_lora + (q_lora if bias else 0)  # q_a_layernorm (+ q_a bias)
        else:
            attn_w = hidden * num_heads * qk_dim
            attn_other = 0
        attn_w += hidden * (kv_lora + rope) + kv_lora * num_heads * (nope + v_dim)
        attn_w += num_heads * v_dim * hidden
        attn_other += kv_lora  # kv_a_layernorm
        if bias:
            attn_other += (kv_lora + rope) + hidden
        if (num_heads * (qk_dim + v_dim)) % 2:
            raise CostModelError(
                f"config fields 'num_attention_heads' x ('qk_nope_head_dim' + 'qk_rope_head_dim' + "
                f"'v_head_dim') = {num_heads * (qk_dim + v_dim)} is odd; expected an even MLA width"
            )
        attention_dim = num_heads * (qk_dim + v_dim) // 2
        head_dim = (
            (qk_dim + v_dim) // 2 if (qk_dim + v_dim) % 2 == 0 else attention_dim // num_heads
        )
        num_kv_heads = num_heads
    else:
        head_dim = f.int("head_dim", hidden // num_heads if hidden % num_heads == 0 else None)
        qk_dim = v_dim = head_dim
        if family == "qwen3_next":
            gate = True
        elif family == "qwen3_5_moe":
            gate = f.bool("attn_output_gate", True)
        q_out = num_heads * head_dim * (2 if gate else 1)
        kv_out = num_kv_heads * head_dim
        attn_w = hidden * q_out + 2 * hidden * kv_out + num_heads * head_dim * hidden
        attn_other = 0
        if family == "qwen2":
            attn_other += q_out + 2 * kv_out  # q/k/v biases, always present in qwen2
        elif f.bool("attention_bias", False):
            attn_other += q_out + 2 * kv_out + hidden
        if qk_norm:
            attn_other += 2 * head_dim
        attention_dim = num_heads * head_dim

    # ---- linear attention (per gated-DeltaNet layer) ----
    lin_nk = lin_nv = lin_dk = lin_dv = lin_kernel = 0
    lin_w = lin_other = 0
    if n_linear:
        lin_nk = f.int("linear_num_key_heads")
        lin_nv = f.int("linear_num_value_heads")
        lin_dk = f.int("linear_key_head_dim")
        lin_dv = f.int("linear_value_head_dim")
        lin_kernel = f.int("linear_conv_kernel_dim", 4)
        key_dim, value_dim = lin_nk * lin_dk, lin_nv * lin_dv
        conv_dim = 2 * key_dim + value_dim
        lin_w = hidden * (2 * key_dim + 2 * value_dim) + hidden * 2 * lin_nv + value_dim * hidden
        lin_other = conv_dim * lin_kernel + 2 * lin_nv + lin_dv  # conv1d, A_log + dt_bias, norm

    # ---- MLP / MoE ----
    if family == "mixtral":
        num_experts = f.int("num_local_experts")
    elif family == "deepseek_v3":
        num_experts = f.int("n_routed_experts", 0, minimum=0)
    elif family in ("qwen3_moe", "qwen3_next", "qwen3_5_moe"):
        num_experts = f.int("num_experts")
    else:
        num_experts = 0
    k = f.int("num_experts_per_tok") if num_experts else 0
    if k > num_experts:
        raise CostModelError(
            f"config field 'num_experts_per_tok' has value {k}; expected at most the {num_experts} experts"
        )
    moe_flags = _moe_flags(f, family, num_layers, num_experts)
    n_moe = sum(moe_flags)
    n_dense = num_layers - n_moe

    intermediate = (
        f.int("intermediate_size") if n_dense else f.int("intermediate_size", 0, minimum=0)
    )
    if family == "mixtral":
        moe_inter = f.int("intermediate_size")
    elif n_moe:
        moe_inter = f.int("moe_intermediate_size")
    else:
        moe_inter = 0
    if family == "deepseek_v3" and n_moe:
        shared_inter = f.int("n_shared_experts", 0, minimum=0) * moe_inter
    elif family in ("qwen3_next", "qwen3_5_moe") and n_moe:
        shared_inter = f.int("shared_expert_intermediate_size", 0, minimum=0)
    else:
        shared_inter = 0
    mlp_bias = family == "llama" and f.bool("mlp_bias", False)

    # ---- totals per component ----
    parts = dict.fromkeys(BREAKDOWN_KEYS, 0)
    parts["attention"] = n_full * attn_w
    parts["linear_attention"] = n_linear * lin_w
    parts["router"] = n_moe * num_experts * hidden
    parts["routed_experts_total"] = n_moe * num_experts * 3 * hidden * moe_inter
    parts["routed_experts_active"] = n_moe * k * 3 * hidden * moe_inter
    shared_per_layer = 3 * hidden * shared_inter
    if family in ("qwen3_next", "qwen3_5_moe") and shared_inter:
        shared_per_layer += hidden  # shared_expert_gate: Linear(hidden, 1)
    parts["shared_experts"] = n_moe * shared_per_layer
    parts["dense_mlp"] = n_dense * 3 * hidden * intermediate
    other = n_full * attn_other + n_linear * lin_other
    other += num_layers * 2 * hidden + hidden  # input/post-attention norms, final norm
    if mlp_bias:
        other += n_dense * (2 * intermediate + hidden)
    parts["norms_and_other"] = other
    parts["embedding"] = vocab * hidden
    parts["lm_head"] = vocab * hidden

    total = sum(v for key, v in parts.items() if key not in ("routed_experts_active", "lm_head"))
    if not tie:
        total += parts["lm_head"]
    activated = sum(parts[key] for key in _MATMUL_KEYS)
    published = total - parts["routed_experts_total"] + parts["routed_experts_active"]

    mtp = 0
    if family == "deepseek_v3":
        mtp = f.int("num_nextn_predict_layers", 0, minimum=0)
    elif family == "qwen3_5_moe":
        mtp = f.int("mtp_num_hidden_layers", 0, minimum=0)

    return ModelShape(
        name=name,
        model_type=family,
        hidden_size=hidden,
        num_layers=num_layers,
        layer_types=layer_types,
        num_full_attention_layers=n_full,
        num_linear_attention_layers=n_linear,
        full_attention_every=_period(layer_types),
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        qk_head_dim=qk_dim,
        v_head_dim=v_dim,
        attention_dim=attention_dim,
        attention_output_gate=gate,
        mla=mla,
        q_lora_rank=q_lora,
        kv_lora_rank=kv_lora,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        intermediate_size=intermediate,
        num_experts=num_experts,
        experts_per_token=k,
        moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared_inter,
        moe_layer_flags=moe_flags,
        num_moe_layers=n_moe,
        num_dense_layers=n_dense,
        linear_num_key_heads=lin_nk,
        linear_num_value_heads=lin_nv,
        linear_key_head_dim=lin_dk,
        linear_value_head_dim=lin_dv,
        linear_conv_kernel_dim=lin_kernel,
        num_mtp_layers_excluded=mtp,
        total_params=total,
        embedding_params=parts["embedding"],
        lm_head_params=parts["lm_head"],
        activated_params=activated,
        activated_params_published=published,
        breakdown_items=tuple(parts.items()),
    )


# ---------------------------------------------------------------------------------------------
# gated DeltaNet (linear attention) core FLOPs


def linear_attention_flops_per_token(shape: ModelShape, chunk_size: int = 64) -> int:
    """Forward FLOPs per token of one gated-DeltaNet layer's core (state read/update), chunked form.

    This is the linear-attention analogue of the s² attention term: it is NOT in 6·N·D (the
    in/out projections are; see ``activated_params``) and it grows linearly in s.

    Formula, per token and per value head (query/key heads are repeated to the
    ``linear_num_value_heads`` value heads), with chunk size C, key dim dk, value dim dv::

        4·C·dk          (β·K)Kᵀ and QKᵀ inside each chunk (two C×dk×C matmuls per chunk)
      + 2·C·dv          intra-chunk attention (C×C) times the new values (C×dv)
      + 6·dk·dv         per chunk: read the state twice (decayed keys·S and Q·S, C×dk×dv each)
                        and write it once (Kᵀ·V_new, dk×C×dv)
      + (C-1)·(dk+dv)   two unit-lower-triangular solves (C×C) with dv and dk right-hand sides
                        (the UT transform), C·(C-1)·d FLOPs each per chunk

    times ``linear_num_value_heads``. Qwen3.6-35B-A3B (32 heads, dk = dv = 128, C = 64): 32 x
    (32768 + 16384 + 98304 + 16128) = 5,234,688 FLOPs per token per layer.

    Assumptions: the chunked algorithm of the reference implementation
    (``torch_chunk_gated_delta_rule`` in transformers, same structure as the FLA kernels); the
    sequence length is a multiple of C (the kernel pads to one, and the padding costs the same);
    elementwise work (decays, gating, L2 norms, exp) is not counted, like softmax for full
    attention; the depthwise causal conv1d before the core is a separate small term
    (``linear_attention_conv_flops_per_token``). Training (forward + backward) takes 3x this, the
    same convention as for matmuls (``linear_attention_training_flops``).
    """
    if shape.num_linear_attention_layers == 0:
        raise CostModelError(
            f"model '{shape.name or shape.model_type}' has no linear-attention layers; "
            "linear_attention_flops_per_token applies to qwen3_next and qwen3_5_moe"
        )
    c = int(chunk_size)
    if c < 1:
        raise CostModelError(f"chunk_size has value {chunk_size!r}; expected an integer >= 1")
    dk, dv = shape.linear_key_head_dim, shape.linear_value_head_dim
    per_head = 4 * c * dk + 2 * c * dv + 6 * dk * dv + (c - 1) * (dk + dv)
    return shape.linear_num_value_heads * per_head


def linear_attention_conv_flops_per_token(shape: ModelShape) -> int:
    """Forward FLOPs per token of one gated-DeltaNet layer's depthwise causal conv1d.

    ``2 · conv_dim · kernel`` with ``conv_dim = 2·key_heads·dk + value_heads·dv`` (one multiply-add
    per channel and tap). Its weights are in ``norms_and_other``, not in ``activated_params``.
    Returns 0 for models without linear-attention layers.
    """
    if shape.num_linear_attention_layers == 0:
        return 0
    conv_dim = (
        2 * shape.linear_num_key_heads * shape.linear_key_head_dim
        + shape.linear_num_value_heads * shape.linear_value_head_dim
    )
    return 2 * conv_dim * shape.linear_conv_kernel_dim


def linear_attention_training_flops(shape: ModelShape, tokens: int, chunk_size: int = 64) -> int:
    """Forward+backward FLOPs of all gated-DeltaNet cores for ``tokens`` tokens:
    ``3 · linear_attention_flops_per_token · tokens · num_linear_attention_layers`` (0 for a model
    without linear-attention layers)."""
    if shape.num_linear_attention_layers == 0:
        return 0
    return (
        3
        * linear_attention_flops_per_token(shape, chunk_size)
        * int(tokens)
        * shape.num_linear_attention_layers
    )


# ---------------------------------------------------------------------------------------------
# outputs


def scenario_keys(shape: ModelShape) -> dict:
    """The scenario keys a model config fills in.

    ``full_attention_every`` is the period of the full-attention layers; when they are not
    periodic, the value chosen is the smallest p with ``num_layers // p ==
    num_full_attention_layers`` (so the scenario's count of full layers is right), and
    ``CostModelError`` is raised when no p gives that.
    """
    every = shape.full_attention_every
    if every is None:
        n, full = shape.num_layers, shape.num_full_attention_layers
        every = next((p for p in range(1, n + 2) if n // p == full), None)
        if every is None:
            raise CostModelError(
                f"model '{shape.name or shape.model_type}': its {full} full-attention layers out of "
                f"{n} cannot be written as num_layers // full_attention_every"
            )
    return {
        "activated_params": shape.activated_params,
        "total_params": shape.total_params,
        "hidden_size": shape.hidden_size,
        "num_layers": shape.num_layers,
        "full_attention_every": every,
        "num_heads": shape.num_heads,
        "head_dim": shape.head_dim,
        "attention_dim": shape.attention_dim,
        "num_experts": shape.num_experts,
        "experts_per_token": shape.experts_per_token,
        "vocab_size": shape.vocab_size,
    }


def params_json(shape: ModelShape) -> dict:
    """A JSON-ready dict of the counts, the layout and the per-component breakdown."""
    return {
        "name": shape.name,
        "model_type": shape.model_type,
        "total_params": shape.total_params,
        "activated_params": shape.activated_params,
        "activated_params_published": shape.activated_params_published,
        "embedding_params": shape.embedding_params,
        "lm_head_params": shape.lm_head_params,
        "tie_word_embeddings": shape.tie_word_embeddings,
        "hidden_size": shape.hidden_size,
        "num_layers": shape.num_layers,
        "num_full_attention_layers": shape.num_full_attention_layers,
        "num_linear_attention_layers": shape.num_linear_attention_layers,
        "full_attention_every": shape.full_attention_every,
        "num_heads": shape.num_heads,
        "num_kv_heads": shape.num_kv_heads,
        "head_dim": shape.head_dim,
        "attention_dim": shape.attention_dim,
        "vocab_size": shape.vocab_size,
        "num_experts": shape.num_experts,
        "experts_per_token": shape.experts_per_token,
        "num_moe_layers": shape.num_moe_layers,
        "num_dense_layers": shape.num_dense_layers,
        "num_mtp_layers_excluded": shape.num_mtp_layers_excluded,
        "breakdown": shape.breakdown,
    }


def params_text(shape: ModelShape) -> str:
    """A readable table of the counts, saying which N is which."""
    title = shape.name or shape.model_type
    layout = (
        f"{shape.num_layers} layers: {shape.num_full_attention_layers} full attention"
        + (f", {shape.num_linear_attention_layers} linear attention" if shape.is_hybrid else "")
        + (
            f" (every {shape.full_attention_every})"
            if shape.full_attention_every not in (None, 1)
            else ""
        )
    )
    lines = [
        f"model {title} ({shape.model_type})",
        f"  {layout}",
        f"  hidden_size {shape.hidden_size}; attention: {shape.num_heads} heads x head_dim "
        f"{shape.head_dim} = attention_dim {shape.attention_dim}, {shape.num_kv_heads} KV heads"
        + (", MLA" if shape.mla else "")
        + (", output gate" if shape.attention_output_gate else ""),
    ]
    if shape.is_moe:
        lines.append(
            f"  MoE: {shape.num_experts} experts, top-{shape.experts_per_token}, on "
            f"{shape.num_moe_layers} layers ({shape.num_dense_layers} dense)"
        )
    lines.append(
        f"  vocab {shape.vocab_size}, embeddings {'tied' if shape.tie_word_embeddings else 'untied'}"
        + (
            f"; {shape.num_mtp_layers_excluded} MTP layer(s) not counted"
            if shape.num_mtp_layers_excluded
            else ""
        )
    )
    rows = [
        ("total_params", shape.total_params, "all parameters as published (tied weights once)"),
        (
            "activated_params",
            shape.activated_params,
            "matmul parameters per token, the N of 6ND, input embedding excluded",
        ),
        (
            "activated_params_published",
            shape.activated_params_published,
            "published active count, includes the input embedding",
        ),
        ("embedding_params", shape.embedding_params, "input embedding (a lookup, no FLOPs)"),
        ("lm_head_params", shape.lm_head_params, "output projection (in N even when tied)"),
    ]
    rows += [(f"  {key}", value, "") for key, value in shape.breakdown_items]
    name_w = max(len(r[0]) for r in rows)
    num_w = max(len(num(r[1])) for r in rows)
    hum_w = max(len(human_count(r[1])) for r in rows)
    lines.append("")
    for label, value, note in rows:
        if label.startswith("  ") and label.strip() == BREAKDOWN_KEYS[0]:
            lines.append("breakdown:")
        line = f"{label:<{name_w}}  {num(value):>{num_w}}  {human_count(value):>{hum_w}}"
        lines.append(f"{line}  {note}".rstrip())
    return "\n".join(lines) + "\n"
