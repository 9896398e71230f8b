"""Write the generated modules the commands evaluate instead of SymPy and NumPy: `make numeric`,
or `python -m costmodel.numeric_build`.

- costmodel/derive/numeric.py, the numeric forms of the SymPy derivations
  (costmodel.derive.numeric_forms.source); tests/derive/test_numeric.py fails when it is stale;
- costmodel/evaluate/router_table.py, the router simulation's results (costmodel.evaluate.router)
  that the report's load-balance lever needs (costmodel.evaluate.levers), for the experts of the
  course and of every scenario in scenarios/, so that `costmodel report` of a MoE scenario
  imports no NumPy (a combination not in the table is simulated at run time, the same numbers);
  tests/evaluate/test_router_table.py fails when it is stale;
- costmodel/inputs/course_scenario.py, the course's scenario file
  (costmodel/inputs/scenarios/course.yaml) as its safe YAML loader reads it, so that the course's
  report imports no PyYAML; tests/inputs/test_course_scenario.py fails when it is stale.

Each is overwritten only if this command wrote it (it begins with its generated header),
atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from costmodel.errors import CostModelError

TARGET = Path(__file__).resolve().parent / "derive" / "numeric.py"
HEADER = '"""GENERATED from the SymPy derivations'
ROUTER_TARGET = Path(__file__).resolve().parent / "evaluate" / "router_table.py"
ROUTER_HEADER = '"""GENERATED from the router simulation'
COURSE_TARGET = Path(__file__).resolve().parent / "inputs" / "course_scenario.py"
COURSE_HEADER = '"""GENERATED from costmodel/inputs/scenarios/course.yaml'
#: The scenarios whose report the router table serves: the course's and these files'.
SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


def write(path: Path = TARGET) -> bool:
    """Write the generated source to `path`; returns whether the file changed. Refuses a file
    there that is not a generated one (it was not written by this command)."""
    from costmodel.derive import numeric_forms  # SymPy: only when writing

    return write_generated(path, numeric_forms.source(), HEADER, "numeric.py")


def write_router_table(path: Path = ROUTER_TARGET, scenarios: Path = SCENARIOS) -> bool:
    """Write the generated router table to `path`; returns whether the file changed."""
    return write_generated(path, router_source(scenarios), ROUTER_HEADER, "router_table.py")


def write_course_scenario(path: Path = COURSE_TARGET) -> bool:
    """Write the generated course scenario to `path`; returns whether the file changed."""
    return write_generated(path, course_source(), COURSE_HEADER, "course_scenario.py")


def course_source() -> str:
    """The generated module: `values()` returns the course file's mapping, as a new dict (and
    new lists) at each call, every value written as Python writes it back (repr)."""
    from costmodel.inputs import scenario_yaml

    data = scenario_yaml.course_file_values()
    rows = "".join(f"        {key!r}: {value!r},\n" for key, value in data.items())
    return (
        f"{COURSE_HEADER} by costmodel.numeric_build: do not\n"
        "edit. Regenerate with `make numeric` (`python -m costmodel.numeric_build`);\n"
        'tests/inputs/test_course_scenario.py fails when this file is stale."""\n\n'
        "# ruff: noqa: E501\n\n\n"
        "def values() -> dict:\n"
        '    """The course\'s scenario file as the safe YAML loader reads it; a new dict (and\n'
        '    new lists) at each call."""\n'
        "    return {\n" + rows + "    }\n"
    )


def router_keys(scenarios: Path = SCENARIOS) -> list[tuple[int, int, int, float]]:
    """(num_experts, experts_per_token, expert_parallel, router_skew) of the course and of each
    scenarios/*.yaml that the load-balance lever simulates (experts on more than one EP rank, a
    skew, at most MAX_SIMULATED_EXPERTS experts), sorted."""
    from costmodel.evaluate.router import MAX_SIMULATED_EXPERTS
    from costmodel.inputs.scenario import resolve

    found = set()
    for file in [None, *sorted(scenarios.glob("*.yaml"))]:
        sc = resolve(file)
        experts, ep, skew = sc.num_experts, sc.expert_parallel, sc.router_skew
        if experts and ep > 1 and experts <= MAX_SIMULATED_EXPERTS and skew is not None:
            found.add((experts, sc.experts_per_token, ep, float(skew)))
    return sorted(found)


def router_source(scenarios: Path = SCENARIOS) -> str:
    """The generated table: the simulation's parameters and one row per key of `router_keys()`."""
    from costmodel.evaluate import levers, router

    rows = []
    for key in router_keys(scenarios):
        median, greedy = levers.simulated_imbalance(*key)
        rows.append(f"    {key!r}: ({median!r}, {greedy!r}),\n")
    return (
        f"{ROUTER_HEADER} (costmodel.evaluate.router) by costmodel.numeric_build:\n"
        "do not edit. Regenerate with `make numeric` (`python -m costmodel.numeric_build`);\n"
        'tests/evaluate/test_router_table.py fails when this file is stale."""\n\n'
        "#: The simulation's parameters (costmodel.evaluate.levers) and its expert limit\n"
        "#: (costmodel.evaluate.router).\n"
        f"TOKENS = {levers.ROUTER_TOKENS!r}\n"
        f"PLACEMENTS = {levers.ROUTER_PLACEMENTS!r}\n"
        f"SEED = {levers.ROUTER_SEED!r}\n"
        f"MAX_SIMULATED_EXPERTS = {router.MAX_SIMULATED_EXPERTS!r}\n\n"
        "#: (num_experts, experts_per_token, expert_parallel, router_skew): (median straggler\n"
        "#: factor of the random placements, that of the load-aware placement).\n"
        "IMBALANCE = {\n" + "".join(rows) + "}\n"
    )


def write_generated(path: Path, text: str, header: str, what: str) -> bool:
    """Write `text` to `path` atomically; returns whether the file changed. Refuses a file there
    that does not begin with `header` (a generated `what` that this project's commands wrote)."""
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if not old.startswith(header):
            raise CostModelError(
                f"target: {path} is not allowed (a file this command did not write); expected "
                f"a generated {what}, or no file"
            )
        if old == text:
            return False
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def main() -> int:
    writers = (  # the course's values first: the router table resolves scenarios on them
        (TARGET, write),
        (COURSE_TARGET, write_course_scenario),
        (ROUTER_TARGET, write_router_table),
    )
    for target, writer in writers:
        try:
            changed = writer()
        except CostModelError as error:
            print(f"costmodel: error: {error}", file=sys.stderr)
            return 2
        print(f"{target}: {'written' if changed else 'up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
