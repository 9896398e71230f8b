"""Reading a model ``config.json`` and typed access to its fields, with one-line errors.

``load_config`` reads a file or a shipped preset (``PRESETS``), refusing what is too large, not
UTF-8, not JSON, not finite or not an object; ``Fields`` reads one field of the text model with
the bounds of ``FIELD_MAXIMA``. Pure Python (``json`` and the standard library only)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.formats import shown

PRESETS: dict[str, str] = {
    "qwen3.6-35b-a3b": "qwen3.6-35b-a3b.json",
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b.json",
    "qwen3-30b-a3b": "qwen3-30b-a3b.json",
    "qwen3-8b": "qwen3-8b.json",
    "llama-3.1-8b": "llama-3.1-8b.json",
    "llama-3.1-70b": "llama-3.1-70b.json",
    "llama-3.1-405b": "llama-3.1-405b.json",
    "deepseek-v3": "deepseek-v3.json",
}

_PRESET_DIR = Path(__file__).resolve().parent / "presets"

#: The largest input file read: a scenario YAML or a config.json (published configs are a few
#: KiB). Checked before reading, so that a huge file or a device such as /dev/zero is refused.
MAX_INPUT_BYTES = 1 << 20  # 1 MiB

#: Integers in a config.json longer than this many digits are refused (no real field is near it;
#: a float overflows at 309 digits, and Python refuses to parse more than 4300).
_MAX_JSON_DIGITS = 300


def read_bytes(path: Path, label: str, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, refused before it is read.

    ``label`` names the file in messages (``model config 'x.json'``). Raises ``CostModelError``
    with one line for a missing file, a directory, anything that is not a regular file (a FIFO,
    a socket or a device such as /dev/zero, which could hang or never end: checked with
    ``os.stat``, following symlinks, before the file is opened, and again on the open file), an
    unreadable or an oversized file. Every input file is read here."""
    try:
        _regular(os.stat(path).st_mode, label)
        # O_NONBLOCK: a FIFO put in the path's place since the check cannot block the open
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(descriptor, "rb") as stream:
            info = os.fstat(stream.fileno())
            _regular(info.st_mode, label)
            if info.st_size > limit:
                raise _too_large(label, info.st_size, limit)
            data = stream.read(limit + 1)
    except CostModelError:
        raise
    except FileNotFoundError:
        raise CostModelError(f"{label}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        raise CostModelError(f"{label}: cannot be read ({reason})") from None
    if len(data) > limit:  # the file grew while it was read
        raise _too_large(label, limit, limit, "more than ")
    return data


def _regular(mode: int, label: str) -> None:
    if stat.S_ISDIR(mode):
        raise CostModelError(f"{label}: is a directory; expected a file")
    if not stat.S_ISREG(mode):
        raise CostModelError(f"{label}: is not a regular file; expected a file")


def read_input(path: Path, label: str) -> str:
    """The UTF-8 text of an input file (a scenario YAML, a config.json) of at most
    ``MAX_INPUT_BYTES``, read by ``read_bytes``."""
    data = read_bytes(path, label, MAX_INPUT_BYTES)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CostModelError(f"{label}: cannot be read (not UTF-8 at byte {exc.start})") from None


def _too_large(label: str, size: int, limit: int, more: str = "") -> CostModelError:
    allowed = f"at most {limit:,} bytes ({limit >> 20} MiB)"
    return CostModelError(f"{label}: {more}{size:,} bytes is not allowed; expected {allowed}")


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
    if not text_arg:  # Path("") is the current folder
        raise CostModelError(
            "config: '' is not allowed; expected a config.json path or a preset name"
        )
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


#: Largest value of a config field read by ``Fields.int`` (default ``_DEFAULT_MAXIMUM``). They
#: match the scenario's bounds (``costmodel.inputs.scenario.FIELDS``) and are checked before any
#: per-layer list is built, so that ``num_hidden_layers: 1e9`` is refused at once.
FIELD_MAXIMA: dict[str, int] = {
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
    "max_position_embeddings": 10**8,
    "sliding_window": 10**8,
    "sliding_window_pattern": 100_000,
}
_DEFAULT_MAXIMUM = 10**9
#: The characters of a name (an activation function's); at most 100 of them.
_NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


#: Field names a family's config.json spells its own way, as transformers' ``attribute_map``
#: reads them: the families read the common names, errors name the config's own.
FIELD_ALIASES: dict[str, dict[str, str]] = {
    "gpt2": {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "max_position_embeddings": "n_positions",
        "intermediate_size": "n_inner",
    },
}


class Fields:
    """Typed access to a config dict; errors name the field, the value and what is allowed.
    A family's own spelling of a field (``FIELD_ALIASES``, GPT-2's ``n_embd``) is read for the
    common name and named in the messages."""

    def __init__(self, cfg: dict, model_type: str):
        self.cfg = cfg
        self.model_type = model_type
        self.aliases = FIELD_ALIASES.get(model_type, {})

    def name(self, key: str) -> str:
        """The config's own name of the field ``key``."""
        return self.aliases.get(key, key)

    def has(self, key: str) -> bool:
        """The config states ``key`` (even as null)."""
        return self.name(key) in self.cfg

    def get(self, key: str):
        return self.cfg.get(self.name(key))

    def _missing(self, key: str) -> CostModelError:
        return CostModelError(
            f"config field '{self.name(key)}' is missing (required for model_type "
            f"'{self.model_type}')"
        )

    @staticmethod
    def _refuse(key: str, value, allowed: str) -> CostModelError:
        return CostModelError(
            f"config field '{key}': {shown(value)} is not allowed; expected {allowed}"
        )

    def int(self, key: str, default=None, *, minimum: int = 1):
        value = self.get(key)
        if value is None:
            if default is None:
                raise self._missing(key)
            return default
        maximum = FIELD_MAXIMA.get(key, _DEFAULT_MAXIMUM)
        allowed = f"an integer from {minimum} to {maximum:,}"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._refuse(self.name(key), value, allowed)
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            raise self._refuse(self.name(key), value, allowed)
        if not minimum <= value <= maximum:
            raise self._refuse(self.name(key), value, allowed)
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._refuse(self.name(key), value, "true or false")
        return value

    def name_field(self, key: str, default: str) -> str:
        """A name (an activation function's: letters, digits, ``_``, ``.``, ``-``, at most 100),
        ``default`` when absent. Shown in GEMM names, so nothing else is let through."""
        value = self.get(key)
        if value is None:
            return default
        if not (
            isinstance(value, str) and 0 < len(value) <= 100 and set(value) <= _NAME_CHARACTERS
        ):
            allowed = "a name of letters, digits, '_', '.' or '-' (at most 100 characters)"
            raise self._refuse(self.name(key), value, allowed)
        return value

    def int_list(self, key: str) -> list[int]:
        value = self.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self._refuse(self.name(key), value, "a list of integers")
        return list(value)
