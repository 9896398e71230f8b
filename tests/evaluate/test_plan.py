"""`costmodel plan`'s search (evaluate.plan): the layouts divide, validate as scenarios and fit;
the ranking is the step-time model's; the scenario's own layout is found and ranked; a model
that fits nowhere is one line; the findings are computed from the ranked layouts."""

import dataclasses
import gc
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate import compute_time, plan, plan_space, run, step_time
from costmodel.evaluate.plan_eval import Evaluator
from costmodel.evaluate.plan_findings import findings
from costmodel.evaluate.plan_space import (
    Recompute,
    cores,
    fp8_options,
    recompute_options,
    schedule_options,
)
from costmodel.inputs import scenario

LLAMA = Path(__file__).parents[2] / "scenarios" / "llama-3.1-70b-512xH100.yaml"
#: Llama-3.1-70B on 32 GPUs, 64 sequences: its own layout TP 8 x PP 4 (DP 1), a search < 1 s.
SMALL = {"num_gpus": 32, "samples_per_step": 64}


@pytest.fixture(scope="module")
def small():
    sc = scenario.resolve(LLAMA, dict(SMALL))
    return sc, plan.search(sc, top=5)


def test_enumeration_divides(small):
    sc, _ = small
    found = cores(sc, 32)
    assert found
    for core in found:
        assert core.tp * core.pp * core.cp * core.dp == 32
        assert core.dp % core.ep == 0
        assert sc.seq_len % core.cp == 0
        assert 64 % (core.dp * core.micro_batch) == 0
        assert core.micro_batches == 64 // (core.dp * core.micro_batch)
        assert sc.num_heads % core.tp == 0
        assert not core.sp or core.tp > 1


def test_proposed_layouts_validate_fit_and_rank_by_predicted_step(small):
    _, found = small
    assert found.rows == sorted(found.rows, key=lambda r: (r.seconds, r.peak_bytes))
    for row in found.rows[:5]:
        resolved = plan.as_scenario(found, row)  # the validation accepts it
        memory = run.memory(resolved)
        assert memory["fits"]
        assert memory["total"] == pytest.approx(row.peak_bytes, rel=1e-9)
        assert step_time.predict(resolved)["seconds"] == pytest.approx(row.seconds, rel=1e-9)


def test_own_layout_is_found_and_ranked(small):
    sc, found = small
    assert found.own is not None and found.own_note == ""
    assert (found.own.core.tp, found.own.core.pp, found.own.core.dp) == (8, 4, 1)
    assert found.own.seconds == pytest.approx(step_time.predict(sc)["seconds"], rel=1e-9)
    faster = [r for r in found.rows if r.seconds < found.own.seconds * (1 - 1e-12)]
    assert found.own_rank == 1 + len(faster)
    assert found.own_rank > 1  # the model finds faster layouts than TP 8 x PP 4 here


def test_fits_nowhere_names_the_least_memory():
    sc = scenario.resolve(LLAMA, {"num_gpus": 8, "samples_per_step": 8, "pipeline_parallel": 1})
    with pytest.raises(CostModelError) as error:
        plan.search(sc)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("num_gpus: 8 is not allowed")
    assert "the least peak over the layouts searched is" in message and "GB per GPU" in message


def _by_name(found, top):
    return {f["name"]: f for f in findings(found, top)}


def test_findings_are_computed_true_and_false(small):
    _, found = small
    got = _by_name(found, 5)
    assert got["tp_within_node"]["holds"] is True  # every top layout has TP <= 8 here
    # the same rows with TP 16 in the first: the finding no longer holds
    first = found.rows[0]
    wide = dataclasses.replace(first, core=dataclasses.replace(first.core, tp=16))
    changed = dataclasses.replace(found, rows=[wide, *found.rows[1:]])
    assert _by_name(changed, 5)["tp_within_node"]["holds"] is False
    assert _by_name(changed, 5)["tp_within_node"]["count"] == 4
    # a top layout that recomputes though it fits without: recompute is not forced
    assert got["recompute_forced"]["holds"] is True
    needless = dataclasses.replace(first, recompute=Recompute("full"))
    changed = dataclasses.replace(found, rows=[needless, *found.rows[1:]])
    assert _by_name(changed, 5)["recompute_forced"]["holds"] is False


def test_cached_pieces_equal_the_models(small):
    """The search's compute (derived from the layout without recompute, ZeRO 0 from ZeRO 1)
    and memory (built from pieces) equal compute_time.compute and run.memory on the layout's
    scenario, for every recompute policy, ZeRO stage and schedule of sampled cores."""
    sc, _ = small
    base = plan.rebase(sc)
    ev = Evaluator(base)
    for core in cores(base, base.num_gpus)[::29]:
        schedules = schedule_options(base, core.pp)
        for rc in recompute_options(base):
            for zero in (0, 1, 3):
                got = ev.compute(core, rc, zero)
                want = compute_time.compute(ev.scenario(core, rc, zero))
                for key in ("parts", "phases"):
                    assert got[key] == pytest.approx(want[key], rel=1e-12)
                for i, schedule in enumerate(schedules):
                    memory = run.memory(ev.scenario(core, rc, zero, schedule))["total"]
                    assert ev.peaks(core, rc, schedules)[zero, i] == pytest.approx(
                        memory, rel=1e-12
                    )


def test_fp8_searched_only_where_the_gpu_has_it(small):
    sc, _ = small
    assert fp8_options(sc) == [("none", "none")]  # the scenario's precision by default
    assert [p for p, _ in fp8_options(sc, search=True)] == ["none", "hybrid"]  # H100: FP8 peak
    a100 = plan.rebase(sc, gpu="A100-80GB")
    assert a100.gpu_spec.fp8_flops is None
    assert fp8_options(a100, search=True) == [("none", "none")]
    assert {c.fp8 for c in cores(sc, 32, fp8=True)} == {"none", "hybrid"}


def test_packed_batching_with_a_lengths_file():
    """Packed rows take a fraction of a row per step (as resolve allows): the search finds the
    layouts, and the own layout's step is the report's, at the lengths file's real lengths."""
    path = LLAMA.parent / "qwen3-next-80b-256xB200.yaml"
    sc = scenario.resolve(path, {"num_gpus": 32})
    found = plan.search(sc, top=2)
    assert sc.sequence_lengths is not None and not float(sc.micro_batches_per_step).is_integer()
    assert found.own is not None and found.own_note == ""
    assert found.own.seconds == pytest.approx(step_time.predict(sc)["seconds"], rel=1e-9)


def test_own_micro_batch_beyond_the_searched_ones_is_searched():
    sc = scenario.resolve(LLAMA, {**SMALL, "micro_batch": 16})
    found = plan.search(sc, top=1)
    assert found.own is not None and found.own.core.micro_batch == 16  # searched, evaluated
    assert found.own_note == "the scenario's own layout does not fit (memory model)"
    assert plan_space.MAX_MICRO_BATCH < 16


def test_constraints_limit_the_search_and_the_rank(small):
    """A framework's limits (no CP, ZeRO <= 1) and a run's fixed recompute: every layout found
    keeps them, the own layout (which keeps them) is ranked among fewer, and the constrained
    fastest is no faster than the unconstrained one."""
    sc, free = small
    limits = {"context_parallel": (1,), "zero_stage": (0, 1), "recompute": (sc.recompute,)}
    held = plan.search(sc, top=5, constraints=limits)
    assert held.rows and held.fitting < free.fitting
    for row in held.rows:
        assert row.core.cp == 1 and row.zero_stage in (0, 1)
        assert row.recompute.policy == sc.recompute
    assert held.rows[0].seconds >= free.rows[0].seconds
    assert held.own_rank is not None and held.own_rank <= free.own_rank
    # the rank counts the constrained layouts only: 1 + those of them predicted faster
    every, left_out = plan.every(held, most=10_000)
    assert left_out is None
    faster = sum(1 for r in every if r.seconds < held.own.seconds * (1 - 1e-12))
    assert held.own_rank == 1 + faster


def test_every_evaluates_each_layout_that_fits_at_its_best(small):
    """`every` (the notebooks' scatter): each fitting layout once, at its fastest settings
    that fit; its fastest agree with the search's top; with count_own False the search keeps
    its top and does not rank the own layout."""
    sc, free = small
    quick = plan.search(sc, top=5, count_own=False)
    assert quick.own_rank is None and quick.own is not None
    assert [r.key for r in quick.rows[:5]] == [r.key for r in free.rows[:5]]
    every, left_out = plan.every(quick, most=10_000)
    assert left_out is None and len(every) == quick.fitting
    assert len({r.core for r in every}) == len(every)
    assert [r.key for r in every[:5]] == [r.key for r in free.rows[:5]]
    assert all(r.peak_bytes <= r.capacity for r in every)
    assert 1 + sum(1 for r in every if r.seconds < free.own.seconds * (1 - 1e-12)) == free.own_rank


def test_search_pauses_the_collector_and_leaves_no_cycles():
    """plan.search pauses the cyclic garbage collector (plan_base.paused_gc): so it must leave
    nothing that only the collector frees. Its caches go with the plan, by reference counting."""
    sc = scenario.resolve(LLAMA, dict(SMALL))
    plan.search(sc, top=5)  # first uses (inspect's signatures of builtins leave cycles)
    gc.collect()
    found = plan.search(sc, top=5)
    assert gc.isenabled()
    assert found.rows
    del found
    assert gc.collect() == 0
