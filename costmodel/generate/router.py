"""Write costmodel/evaluate/levers/router_table.py, the router simulation's results
(costmodel.evaluate.levers.router) that the report's load-balance lever needs
(costmodel.evaluate.levers.levers), for the experts of the course and of every scenario in scenarios/,
so that `costmodel report` of a MoE scenario imports no NumPy (a combination not in the table is
simulated at run time, the same numbers): `make numeric`, or `python -m
costmodel.generate.router` (after costmodel.generate.course: it resolves the scenarios on the
course's values). tests/evaluate/test_router_table.py fails when it is stale."""

from __future__ import annotations

from pathlib import Path

from costmodel.generate import PACKAGE, run, write_generated

TARGET = PACKAGE / "evaluate" / "levers" / "router_table.py"
HEADER = '"""GENERATED from the router simulation'
#: The scenarios whose report the router table serves: the course's and these files'.
SCENARIOS = PACKAGE.parent / "scenarios"


def keys(scenarios: Path = SCENARIOS) -> list[tuple[int, int, int, float]]:
    """(num_experts, experts_per_token, expert_parallel, router_skew) of the course and of each
    scenarios/*.yaml that the load-balance lever simulates (experts on more than one EP rank, a
    skew, at most MAX_SIMULATED_EXPERTS experts), sorted."""
    from costmodel.evaluate.levers.router import MAX_SIMULATED_EXPERTS
    from costmodel.inputs.scenario import resolve

    found = set()
    for file in [None, *sorted(scenarios.glob("*.yaml"))]:
        sc = resolve(file)
        experts, ep, skew = sc.num_experts, sc.expert_parallel, sc.router_skew
        if experts and ep > 1 and experts <= MAX_SIMULATED_EXPERTS and skew is not None:
            found.add((experts, sc.experts_per_token, ep, float(skew)))
    return sorted(found)


def source(scenarios: Path = SCENARIOS) -> str:
    """The generated table: the simulation's parameters and one row per key of `keys()`."""
    from costmodel.evaluate.levers import levers, router

    rows = []
    for key in keys(scenarios):
        median, greedy = levers.simulated_imbalance(*key)
        rows.append(f"    {key!r}: ({median!r}, {greedy!r}),\n")
    return (
        f"{HEADER} (costmodel.evaluate.levers.router) by costmodel.generate.router:\n"
        "do not edit. Regenerate with `make numeric` (`python -m costmodel.generate.router`);\n"
        'tests/evaluate/test_router_table.py fails when this file is stale."""\n\n'
        "#: The simulation's parameters (costmodel.evaluate.levers.levers) and its expert limit\n"
        "#: (costmodel.evaluate.levers.router).\n"
        f"TOKENS = {levers.ROUTER_TOKENS!r}\n"
        f"PLACEMENTS = {levers.ROUTER_PLACEMENTS!r}\n"
        f"SEED = {levers.ROUTER_SEED!r}\n"
        f"MAX_SIMULATED_EXPERTS = {router.MAX_SIMULATED_EXPERTS!r}\n\n"
        "#: (num_experts, experts_per_token, expert_parallel, router_skew): (median straggler\n"
        "#: factor of the random placements, that of the load-aware placement).\n"
        "IMBALANCE = {\n" + "".join(rows) + "}\n"
    )


def write(path: Path = TARGET, scenarios: Path = SCENARIOS) -> bool:
    """Write the generated router table to `path`; returns whether the file changed."""
    return write_generated(path, source(scenarios), HEADER, "router_table.py")


def main() -> int:
    return run(TARGET, write)


if __name__ == "__main__":
    raise SystemExit(main())
