"""The router simulation's generated table (costmodel/evaluate/levers/router_table.py): current, the
simulation's own numbers, used by the load-balance lever without NumPy, and a combination it
lacks is simulated."""

import statistics
from pathlib import Path

from generated import check_written_only_over_its_own_file

from costmodel.evaluate.levers import levers, router, router_table
from costmodel.generate import router as generate


def test_generated_table_is_current():
    """Regenerating the source gives the committed file, byte for byte (else: make numeric);
    the rows are the simulation's numbers (the source runs it)."""
    written = Path(router_table.__file__).read_bytes()
    assert generate.source().encode("utf-8") == written, (
        "costmodel/evaluate/levers/router_table.py is stale: run `make numeric`"
    )


def test_the_table_holds_the_course_and_every_scenario_with_experts():
    """The course (256 experts, top-8, EP 8, skew 1) and the example scenarios' MoE models, each
    once; a dense model (Llama) has no row."""
    keys = generate.keys()
    assert keys == sorted(router_table.IMBALANCE)
    assert (256, 8, 8, 1.0) in keys
    assert len(keys) == len(set(keys)) >= 4
    assert all(experts <= router.MAX_SIMULATED_EXPERTS for experts, *_ in keys)
    assert router_table.MAX_SIMULATED_EXPERTS == router.MAX_SIMULATED_EXPERTS
    assert (router_table.TOKENS, router_table.PLACEMENTS, router_table.SEED) == (
        levers.ROUTER_TOKENS,
        levers.ROUTER_PLACEMENTS,
        levers.ROUTER_SEED,
    )


def test_a_row_of_the_table_is_not_simulated(monkeypatch):
    """The lever takes the table's row: the simulation (and NumPy) is never called for it."""

    def refuse(*args):
        raise AssertionError(f"simulated {args}")

    levers._imbalance.cache_clear()
    monkeypatch.setattr(levers, "simulated_imbalance", refuse)
    key = (256, 8, 8, 1.0)
    assert levers._imbalance(*key) == router_table.IMBALANCE[key]
    levers._imbalance.cache_clear()


def test_a_combination_the_table_lacks_is_simulated(monkeypatch):
    """64 experts on 4 ranks is no scenario's: simulated, the same numbers as the simulation;
    with other simulation parameters than the table's, a row of the table is simulated too."""
    levers._imbalance.cache_clear()
    key = (64, 4, 4, 0.5)
    assert key not in router_table.IMBALANCE
    got = levers._imbalance(*key)
    sim = router.simulate_router(
        64, 4, 4, levers.ROUTER_TOKENS, 0.5, levers.ROUTER_SEED, levers.ROUTER_PLACEMENTS
    )
    assert got == (statistics.median(sim.rank_factors.tolist()), sim.greedy_factor)
    assert got[0] > got[1] >= 1.0
    levers._imbalance.cache_clear()
    monkeypatch.setattr(levers, "ROUTER_TOKENS", 2048)
    course = (256, 8, 8, 1.0)
    assert levers._imbalance(*course) != router_table.IMBALANCE[course]
    levers._imbalance.cache_clear()


def test_the_router_table_is_written_only_over_its_own_file(tmp_path):
    """It writes the table, says when nothing changed, and refuses a file it did not write."""
    check_written_only_over_its_own_file(
        generate.write,
        tmp_path / "router_table.py",
        generate.source(),
    )


def test_the_generator_writes_the_module_the_library_imports():
    """`make numeric` once wrote costmodel/evaluate/router_table.py, a stray beside the module
    the levers import (evaluate/levers/router_table.py), after evaluate/ was grouped."""
    from pathlib import Path

    from costmodel.evaluate.levers import router_table
    from costmodel.generate import router

    assert Path(router.TARGET).resolve() == Path(router_table.__file__).resolve()
