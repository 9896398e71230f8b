"""What the sweep's tests compare a point with: a scenario file's path, and a figure of
`costmodel report --format json` by its column's dotted path."""

from __future__ import annotations

from pathlib import Path

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def scenario_path(file):
    """The path of a file of scenarios/, or None (the course)."""
    return None if file is None else SCENARIOS / file


def report_figure(acc, column):
    """The account's figure at a column's dotted path (`time.predicted_seconds`)."""
    for part in column.split("."):
        acc = acc[part]
    return acc
