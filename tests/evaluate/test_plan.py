"""`costmodel plan`'s search (evaluate.plan.plan): the layouts divide, validate as scenarios and fit;
the ranking is the step-time model's; the scenario's own layout is found and ranked; a model
that fits nowhere is one line; the findings are computed from the ranked layouts."""

import dataclasses
import gc
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate.plan import plan, plan_space, plan_why
from costmodel.evaluate.plan.plan_batch import Batch
from costmodel.evaluate.plan.plan_eval import Evaluator
from costmodel.evaluate.plan.plan_findings import _fits_without_recompute, findings
from costmodel.evaluate.plan.plan_space import (
    Recompute,
    cores,
    fp8_options,
    recompute_options,
    schedule_options,
)
from costmodel.evaluate.simulate import compute_time, run, step_time
from costmodel.inputs import scenario
from costmodel.present import plan as plan_text

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


def test_the_limit_shares_add_up_to_the_step(small):
    """A layout's compute, exposed communication and bubble shares are the whole step (the
    compute share has every compute part, recompute with it)."""
    _, found = small
    for row in found.rows:
        shares = plan.limits(found, row)["shares"]
        assert sum(shares.values()) == pytest.approx(1.0, rel=1e-12)
        assert shares["compute"] * row.seconds == pytest.approx(
            sum(row.parts[name] for name in step_time.COMPUTE_PARTS), rel=1e-12
        )


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
    # the layouts of TP <= 8 first (without ZeRO-3, which Megatron-LM does not offer, TP 16 ranks
    # among the top 5 here)
    found = dataclasses.replace(found, rows=sorted(found.rows, key=lambda r: r.core.tp > 8))
    got = _by_name(found, 5)
    assert got["tp_within_node"]["holds"] is True  # every top layout has TP <= 8 here
    # the same rows with TP 16 in the first: the finding no longer holds
    first = found.rows[0]
    wide = dataclasses.replace(first, core=dataclasses.replace(first.core, tp=16))
    changed = dataclasses.replace(found, rows=[wide, *found.rows[1:]])
    assert _by_name(changed, 5)["tp_within_node"]["holds"] is False
    assert _by_name(changed, 5)["tp_within_node"]["count"] == 4
    # a top layout that recomputes though it fits without: recompute is not forced (the first
    # found layout that fits without it, made to recompute and put first)
    assert got["recompute_forced"]["holds"] is True
    roomy = next(row for row in found.rows if _fits_without_recompute(found, row))
    needless = dataclasses.replace(roomy, recompute=Recompute("full"))
    changed = dataclasses.replace(found, rows=[needless, *found.rows[1:]])
    assert _by_name(changed, 5)["recompute_forced"]["holds"] is False


@pytest.mark.parametrize("which", ["small", "course"])
def test_a_layouts_figures_are_the_reports_for_its_scenario(small, which):
    """The one agreement test between the plan and the report (the same formulas called twice:
    on arrays over the search's cores, on the numbers of the layout's scenario): the search's
    compute, step parts and memory peak of a layout are, to the last bit, compute_time.compute,
    step_time.predict and run.memory of its scenario, for every recompute policy, ZeRO stage
    and schedule of sampled cores (Llama-3.1-70B: PP and TP; the course: MoE, EP, linear
    attention), read from the search's batch and from a batch of one core alone. It guards the
    orchestration: the layout's keys, the groups of cores, the per-policy recompute."""
    base = plan.rebase(small[0] if which == "small" else scenario.resolve())
    ev, _, every = plan._space(base, False, {})
    ev.batch = Batch(ev, every)
    alone = Evaluator(base)
    for core in every[::29]:
        schedules = schedule_options(base, core.pp)
        for rc in recompute_options(base):
            for zero in (0, 1, 3):
                want = compute_time.compute(ev.scenario(core, rc, zero))
                for got in (ev.compute(core, rc, zero), alone.compute(core, rc, zero)):
                    assert got["parts"] == want["parts"], (core, rc, zero)
                    assert got["phases"] == want["phases"], (core, rc, zero)
                for i, schedule in enumerate(schedules):
                    sc = ev.scenario(core, rc, zero, schedule)
                    assert ev.peaks(core, rc, schedules)[zero, i] == run.memory(sc)["total"]
                    assert alone.peaks(core, rc, schedules)[zero, i] == run.memory(sc)["total"]
                    if i == 0:
                        parts = ev.parts(core, rc, zero, schedule)
                        assert parts == step_time.predict(sc)["parts"], (core, rc, zero)


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


# ------------------------------------------------------------------ issue 32 (2), (4): one rule
def test_more_gpus_than_samples_searches_layouts_with_a_micro_batch_per_pipeline():
    """Issue 32 (2): `report --set num_gpus=160` (80 samples) is refused; the plan of the course
    on 160 GPUs searches from the first split that gives each pipeline a sample (CP 2: TP = PP =
    CP = 1 would not), and every layout it ranks resolves, with a micro batch per pipeline."""
    course = scenario.resolve()
    with pytest.raises(CostModelError, match="at least one micro batch per pipeline"):
        scenario.resolve(overrides={"num_gpus": 160})
    found = plan.search(course, 160, top=3)
    assert (found.own.core.tp, found.own.core.pp, found.own.core.cp) == (1, 1, 2)
    for row in found.rows[:3]:
        assert row.core.micro_batches >= 1
        assert plan.as_scenario(found, row)["micro_batches_per_step"] == row.core.micro_batches


def test_the_search_keeps_the_validators_rules():
    """Issue 32 (4): what the validator now refuses the search does not propose: Ulysses CP
    beyond a TP rank's heads, virtual stages that do not split a stage, DualPipe on an odd
    pipeline, more cross-entropy pieces than a micro batch's tokens."""
    ulysses = plan.rebase(scenario.resolve(overrides={"cp_comm_type": "a2a"}), 160)
    found = cores(ulysses, 160)
    assert found and {core.cp for core in found if core.tp == 1} == {1, 2}  # 2 K/V heads
    assert {core.cp for core in found if core.tp == 2} == {1}  # one K/V head a TP rank
    course = scenario.resolve()
    virtual = {s.virtual for s in schedule_options(course, 2) if s.name == "interleaved"}
    assert virtual == {2, 4, 5, 10, 20}  # the divisors of a stage's 20 layers
    deepseek = scenario.resolve(LLAMA.parent / "deepseek-v3-2048xH800.yaml")
    assert "dualpipe" in {s.name for s in schedule_options(deepseek, 4)}
    assert "dualpipe" not in {s.name for s in schedule_options(deepseek, 3)}
    chunked = plan.rebase(
        scenario.resolve(overrides={"seq_len": 64, "mean_tokens_per_sample": 64, "ce_chunks": 40})
    )
    kept = cores(chunked, chunked.num_gpus)
    assert kept and all(core.micro_batch * 64 // core.cp >= 40 for core in kept)
    assert any(core.cp == 2 for core in kept)  # two-sample micro batches on CP 2: 64 tokens
    searched = plan.search(chunked, top=3)
    for row in searched.rows[:3]:  # each resolves with the team's 40 pieces
        assert plan.as_scenario(searched, row)["ce_chunks"] == 40


# ------------------------------------------------------------------ issue 32 (11): bounded
#: A layout space of 253,542 cores (a model of 55,440 experts and 720-wide layers on 40,320
#: GPUs): its search would hold gigabytes.
HUGE = {
    "num_gpus": 40320,
    "samples_per_step": 4_032_000,
    "num_experts": 55440,
    "experts_per_token": 1,
    "num_layers": 100,
    "full_attention_every": 1,
    "gpu": "H100-SXM",
    "num_heads": 720,
    "head_dim": 1,
    "hidden_size": 720,
    "moe_ffn_hidden_size": 720,
    "ffn_hidden_size": 720,
    "first_dense_layers": 0,
    "seq_len": 4096,
    "mean_tokens_per_sample": 4096,
}


def test_a_layout_space_too_large_is_refused_before_it_is_built():
    """Issue 32 (11): the search of a valid scenario died in NumPy's _ArrayMemoryError (40 GiB
    at once). A space whose search would take more than SEARCH_BYTES is one line naming its
    size, counted without building its cores."""
    with pytest.raises(CostModelError) as error:
        plan.search(scenario.resolve(overrides=HUGE))
    assert str(error.value) == (
        "num_gpus: 40320 is not allowed; expected a layout space the search holds in 2 GiB: "
        "this model and batch on 40,320 GPUs have 253,542 layouts to search (TP x PP x CP x DP "
        "splits with EP, micro batch, sequence parallel), about 3.9 GiB"
    )


def test_top_and_memory_are_bounded_by_one_line(monkeypatch):
    """Issue 32 (11): `--top 10000000` on 720,720 GPUs took 1 min 53 s and 2.1 GB; a MemoryError
    the estimate did not foresee (a machine with less memory) ends in one line too."""
    sc = scenario.resolve(LLAMA, dict(SMALL))
    with pytest.raises(CostModelError) as error:
        plan.search(sc, top=plan.MAX_TOP + 1)
    assert str(error.value) == (
        "--top: 1001 is not allowed; expected a positive integer up to 1,000 (the layouts ranked)"
    )
    assert len(plan.search(sc, top=plan.MAX_TOP).rows) <= plan.MAX_TOP

    def exhausted(*args):
        raise MemoryError

    monkeypatch.setattr(plan, "Batch", exhausted)
    with pytest.raises(CostModelError) as error:
        plan.search(sc, 64)
    assert str(error.value) == (
        "num_gpus: 64 is not allowed; expected a layout space the search holds in this "
        "machine's memory: the search of 64 GPUs ran out of memory"
    )
    assert error.value.__context__ is None  # nothing of the failed search kept


def test_the_handouts_index_shows_the_refusal():
    """`handouts` ran every notebook, then died in the index's plan table: the table is the
    one line instead."""
    from costmodel.publish import handouts

    line = handouts.plan_table(scenario.resolve(overrides=HUGE))
    assert line.startswith("num_gpus: 40320 is not allowed; expected a layout space the search")


# ------------------------------------------------------------- issue 35 (3): every own layout ranked
def test_own_layout_with_moe_folding_is_ranked_by_the_reports_model():
    """The course at TP 2 with EP 8 over TP x DP (MoE parallel folding, expert_tensor_parallel 1):
    EP 8 does not divide DP 20, so the search (EP inside DP) does not generate it. The own layout
    is evaluated by the report's model and ranked all the same, with the reason said."""
    sc = scenario.resolve(
        overrides={"tensor_parallel": 2, "expert_parallel": 8, "expert_tensor_parallel": 1}
    )
    assert (sc.data_parallel, sc.expert_parallel) == (20, 8)
    found = plan.search(sc, top=3)
    assert found.own_note == ""
    assert found.own_outside.startswith("expert_parallel 8 does not divide data_parallel 20")
    assert found.own.seconds == pytest.approx(step_time.predict(sc)["seconds"], rel=1e-12)
    assert found.own.peak_bytes == pytest.approx(run.memory(sc)["total"], rel=1e-12)
    faster = [r for r in found.rows if r.seconds < found.own.seconds * (1 - 1e-12)]
    assert found.own_rank == 1 + len(faster)


def test_own_expert_tensor_parallel_is_evaluated_as_stated():
    """TP 2 with EP 4 inside DP 20 is a core the search holds, but with its experts unsplit
    (expert_tensor_parallel 1) where the search splits them by TP: the own layout is the
    report's, at ETP 1, not the searched core's at ETP 2."""
    sc = scenario.resolve(
        overrides={"tensor_parallel": 2, "expert_parallel": 4, "expert_tensor_parallel": 1}
    )
    found = plan.search(sc, top=3)
    assert found.own_outside.startswith("expert_tensor_parallel 1 is not tensor_parallel 2")
    assert found.own.seconds == pytest.approx(step_time.predict(sc)["seconds"], rel=1e-12)
    assert found.own.peak_bytes == pytest.approx(run.memory(sc)["total"], rel=1e-12)


def test_own_uneven_pipeline_split_is_evaluated_as_stated():
    """Llama-3.1-70B's 80 layers on PP 4 with 19 on the first and the last stage (21 on each
    middle one): the search's layouts split evenly (20 each), so the own layout is the report's
    (not the even split's: its first stage, the most loaded in memory under 1F1B, holds 19
    layers, and its slowest stage is another) and ranked."""
    uneven = scenario.resolve(LLAMA, {**SMALL, "first_stage_layers": 19, "last_stage_layers": 19})
    found = plan.search(uneven, top=3)
    even = plan.search(scenario.resolve(LLAMA, dict(SMALL)), top=3)
    assert "uneven pipeline split" in found.own_outside and even.own_outside == ""
    assert found.own.seconds == pytest.approx(step_time.predict(uneven)["seconds"], rel=1e-12)
    assert found.own.seconds != pytest.approx(even.own.seconds, rel=1e-9)
    assert found.own.peak_bytes < even.own.peak_bytes
    assert found.own_rank == 1 + sum(1 for r in found.rows if r.seconds < found.own.seconds)
    text = plan_text.as_text(found, 3)
    assert "does not generate the scenario's own layout (its uneven pipeline split" in text
    # the why-lines split the exposed communication of the own layout as evaluated (its split)
    compared = [d for diffs in plan_why.versus(found, 3) for d in diffs or []]
    comm = [d for d in compared if d["part"] == "communication_exposed"]
    assert comm
    for d in comm:
        assert sum(c["seconds"] for c in d["collectives"]) == pytest.approx(d["seconds"])
    assert plan_text.as_json(found, 3)["own_outside"] == found.own_outside


def test_own_split_with_the_embedding_and_the_loss_counted_is_evaluated_as_stated():
    """Llama-3.1-70B's 80 layers, the embedding and the loss over PP 2 (41 a stage: 40 layers on
    each; full recompute, so that it fits): the own layout is the report's, named by the keys
    that split it, and ranked."""
    keys = {**SMALL, "pipeline_parallel": 2, "num_gpus": 16, "recompute": "full"}
    counted = {"embedding_in_pipeline_split": True, "loss_in_pipeline_split": True}
    sc = scenario.resolve(LLAMA, {**keys, **counted})
    found = plan.search(sc, top=3)
    named = "its uneven pipeline split (embedding_in_pipeline_split, loss_in_pipeline_split)"
    assert named in found.own_outside and found.own_note == ""
    assert found.own.seconds == pytest.approx(step_time.predict(sc)["seconds"], rel=1e-12)
    assert found.own.peak_bytes == pytest.approx(run.memory(sc)["total"], rel=1e-12)
    assert found.own_rank == 1 + sum(1 for r in found.rows if r.seconds < found.own.seconds)
