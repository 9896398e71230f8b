"""The course's own material, shipped as package data: the notebooks of section 06 (in a
checkout `notebooks/` at the top, NN_name.py sources and their executed .ipynb; the wheel maps
them into course/notebooks/), the FLOP-counter CSV, and
figures.yaml, the figures the course states, quoted as it writes them."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import yaml


@cache
def figures() -> dict:
    """The course's quoted figures (figures.yaml), each with the course section it comes from."""
    text = resources.files(__name__).joinpath("figures.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def number(text: str) -> float:
    """A figure as the course writes it, as a number: "41.3%" -> 0.413, "1.70×" -> 1.7,
    "5.70e16" -> 5.7e16."""
    text = text.strip()
    if text.endswith("%"):
        return float(text[:-1]) / 100
    return float(text.rstrip("×x"))


def claim(key: str) -> str:
    """A course figure as the notebooks quote it in a claims table: its text (or range) and the
    section it comes from, e.g. "41.3%（课程 06.4）"."""
    entry = figures()[key]
    if "text" in entry:
        shown = entry["text"]
    elif "range" in entry:
        shown = "–".join(entry["range"])
    else:
        raise KeyError(f"{key}: a figure with rows; quote one row's field instead")
    return f"{shown}（课程 {entry['section'].split(' (')[0]}）"


def agrees(value: float, key: str) -> bool:
    """Whether `value` is the course's figure `key` at the precision the course writes it:
    rounded to as many decimals as the figure shows, as a percentage for "%" (0.413 -> 41.3),
    in GB for "GB" (bytes), as it is otherwise ("1.70×", "1,024")."""
    text = figures()[key]["text"]
    scientific = re.fullmatch(r"\d+(?:\.(\d+))?e[+-]?\d+", text)
    if scientific:  # "2.42e9": as many significant digits as the figure shows
        return float(f"{value:.{len(scientific.group(1) or '')}e}") == float(text)
    written = re.search(r"[\d,]+(?:\.(\d+))?", text)
    scale = 100 if "%" in text else 1e-9 if "GB" in text else 1
    return round(value * scale, len(written.group(1) or "")) == float(
        written.group(0).replace(",", "")
    )
