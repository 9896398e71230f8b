"""costmodel.derive.levers: Amdahl vs multiplicative gains, the waterfall, the CP/EP constraint;
the levers of a run (evaluate.levers.advice) are gains, and so is their combination."""

import json
import re
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from test_valid_space import LONG_SAMPLE, N_TOO_SMALL, SLOW_LINKS, valid_scenarios

from costmodel.derive import levers
from costmodel.evaluate.account.account import account
from costmodel.evaluate.levers import advice
from costmodel.evaluate.plan import layouts
from costmodel.inputs import assumptions, scenario
from costmodel.present.advice import note
from costmodel.present.report import render


def test_amdahl_forms():
    f = levers.share
    assert sp.simplify(levers.amdahl_limit - 1 / (1 - f)) == 0
    assert levers.amdahl(0.5, 2) == pytest.approx(1 / 0.75)
    assert levers.amdahl(0.3, 1) == pytest.approx(1)
    assert levers.amdahl_bound(0.03) == pytest.approx(1 / 0.97)
    assert levers.amdahl(0.4, 1e9) == pytest.approx(levers.amdahl_bound(0.4))
    # the float shortcut is the symbolic form's value
    for part, speedup in ((0.1, 1.5), (0.7376, 3.0), (0.97, 1.031)):
        symbolic = levers.amdahl_speedup.subs({f: part, levers.x: speedup})
        assert levers.amdahl(part, speedup) == pytest.approx(float(symbolic), rel=1e-12)


def test_derived_forms_are_module_attributes():
    assert sp.simplify(levers.share_after - f_share_after()) == 0
    with pytest.raises(AttributeError):
        levers.no_such_form  # noqa: B018


def f_share_after():
    f, g = levers.share, levers.G
    return f / (f + (1 - f) / g)


def test_untouched_share_grows_when_the_rest_speeds_up():
    assert levers.untouched_share_after(0.03, 1) == pytest.approx(0.03)
    # 3% of 100 s stays 3 s while 97 s become 48.5 s
    assert levers.untouched_share_after(0.03, 2) == pytest.approx(3 / (3 + 48.5))


def test_waterfall_multiplies():
    rows = levers.waterfall(120, [("a", 1.5), ("b", 1.2), ("c", 1.1)])
    assert rows[0]["start"] == 120
    assert rows[-1]["end"] == pytest.approx(120 / (1.5 * 1.2 * 1.1))
    assert sum(r["saved"] for r in rows) == pytest.approx(120 - rows[-1]["end"])
    for before, after in zip(rows, rows[1:]):
        assert after["start"] == before["end"]
    assert (
        levers.multiplied_step_time.subs(
            {levers.g_1: 2, levers.g_2: 2, levers.g_3: 1, levers.T: 120}
        )
        == 30
    )


def test_course_cp_2_breaks_ep_8(course):
    table = {
        lay.cp: lay
        for lay in layouts.layouts(
            course["num_gpus"], course["samples_per_step"], course["seq_len"], course["num_experts"]
        )
    }
    assert table[1].dp == 40 and table[1].allows(8)
    assert table[2].dp == 20 and table[2].usable and not table[2].allows(8)
    assert table[2].expert_parallel == (1, 2, 4)  # 5 divides DP = 20 but not 256 experts
    pairs = layouts.valid_pairs(
        course["num_gpus"], course["samples_per_step"], course["seq_len"], course["num_experts"]
    )
    assert (1, 8) in pairs and (2, 8) not in pairs and (2, 4) in pairs
    assert all(40 % cp == 0 and (40 // cp) % ep == 0 and 256 % ep == 0 for cp, ep in pairs)


def test_layout_micro_batches(course):
    lay = layouts.layouts(40, 80, 49152, 256)[0]
    assert lay.samples_per_rank == 2
    assert lay.micro_batches(1) and lay.micro_batches(2) and not lay.micro_batches(4)


def test_batch_and_sequence_divisibility():
    rows = {lay.cp: lay for lay in layouts.layouts(12, 18, 1000, 0)}
    assert rows[2].dp == 6 and rows[2].batch_divides  # 18 / 6
    assert rows[3].dp == 4 and not rows[3].batch_divides  # 18 / 4
    assert not rows[3].seq_divides  # 1000 / 6
    assert rows[1].expert_parallel == (1,)  # dense: no EP


def test_assumptions_are_named_with_sources():
    assert assumptions.assumed("expert_parallel") == 8
    assert all(a.source for a in assumptions.ASSUMPTIONS.values())


# ------------------------------------------------------------------ the levers of a run


def _levers(a):
    return {x["lever"]: x for x in a["advice"]}


def test_the_combined_projection_is_a_gain_when_the_attention_count_exceeds_the_step():
    """Issue 18 (13): one 4M-token sample. Its attention count needs 1,490% of the GPUs' peak
    for the measured step (HFU with attention 14.9), so 1 / that, 0.067, is no ceiling: the
    report said 'combined 0.067x, step 1,787.9 s'. The ceiling comes from the 6ND hardware
    FLOPs, which the account checks (HFU <= 100%)."""
    a = account(scenario.resolve(overrides=LONG_SAMPLE))
    assert a["attention"]["actual"]["hfu_with_attention"] > 14
    combined = a["advice_combined"]
    assert combined["speedup"] >= 1 and combined["step_time"] <= 120
    assert combined["ceiling_from"] == "hfu" and combined["ceiling"] == pytest.approx(1 / a["hfu"])
    by = _levers(a)
    # the run does not fit (the logits of 4M tokens): no lever is feasible, none is combined
    assert combined["levers"] == [] and not any(
        x["feasible"] and x["speedup"] > 1 for x in by.values()
    )
    assert combined["product"] == pytest.approx(combined["step_before"] / combined["step_after"])
    kernel = by["attention_kernel"]  # no lever from a count the step time contradicts
    # 16.7x with the course's flash kernel (14.9x with eager): its backward recomputes the scores
    assert "the attention count needs 16.7x the GPUs' peak" in note(kernel)
    assert kernel["speedup"] == 1 and not kernel["feasible"]
    assert "attention_kernel" not in combined["levers"]
    shown = re.search(r"combined +([\d.]+)x +step ([\d,.]+) s", render(a))
    assert float(shown.group(1)) >= 1 and float(shown.group(2).replace(",", "")) <= 120


def test_a_communication_estimate_longer_than_the_step_gives_no_lever():
    """Issue 18 (14): every group across nodes at 1 MB/s: the estimate is thousands of times the
    measured 120 s step. It contradicts the step: one line says so (text, Markdown, JSON's
    communication.exceeds_step) and no lever comes from it (it gave a 7x one)."""
    a = account(scenario.resolve(overrides=SLOW_LINKS))
    comm = a["communication"]
    overlap = _levers(a)["communication_overlap"]
    assert overlap["speedup"] == 1 and not overlap["feasible"]
    assert comm["exceeds_step"] and comm["seconds"] > 1000 * 120
    assert "longer than the measured step" in note(overlap)
    assert "communication_overlap" not in a["advice_combined"]["levers"]
    text, markdown = render(a), render(a, "markdown")
    line = "the estimate is longer than the measured step (120.0 s): they contradict each other"
    assert [row for row in text.splitlines() if line in row] == [
        next(row for row in text.splitlines() if row.strip().startswith("estimate > step time"))
    ]
    assert markdown.count(line) == 1
    assert "used " not in next(r for r in text.splitlines() if "total (upper bound" in r)
    assert json.loads(render(a, "json"))["communication"]["exceeds_step"] is True
    # a measured share is used as it is; the estimate beside it still contradicts the step
    measured = account(scenario.resolve(overrides={**SLOW_LINKS, "communication_share": 0.2}))
    assert _levers(measured)["communication_overlap"]["speedup"] == pytest.approx(1 / 0.8)
    assert line in render(measured) and "used 20.00% (measured)" in render(measured)
    course = account(scenario.resolve())
    assert not course["communication"]["exceeds_step"] and line not in render(course)


def test_the_overlap_lever_gains_only_the_exposed_communication():
    """Issue 19, then 20: the overlap lever hides at most what the overlap rules leave exposed,
    not the nothing-overlapped upper bound: the scenario with the overlap flags on, predicted
    again. The course's EP all-to-all goes behind another micro batch's compute; the example
    Llama run overlaps TP with its GEMMs already (its upper bound is far above what is exposed),
    and every flag is on: no lever."""
    llama = Path(__file__).resolve().parents[2] / "scenarios" / "llama-3.1-70b-512xH100.yaml"
    course = account(scenario.resolve())
    comm, lever = course["communication"], _levers(course)["communication_overlap"]
    assert comm["basis"] == "estimated" and not comm["exceeds_step"]
    assert lever["changes"] == {"ep_overlap": "dualpipe"} and lever["feasible"]
    saved = lever["step_before"] - lever["step_after"]
    assert 0 < saved <= comm["exposed_seconds"] * (1 + 1e-9)
    assert f"the exposed communication ({comm['exposed_seconds']:,.4g} s" in note(lever)
    a = account(scenario.resolve(llama))
    comm, lever = a["communication"], _levers(a)["communication_overlap"]
    assert lever["speedup"] == 1 and not lever["feasible"] and not lever["changes"]
    assert comm["exposed_share"] < comm["share"] / 2


def test_a_share_of_the_step_is_at_most_the_whole_step():
    """Found by the search (issue 18): N = 1 for the course's 256-expert shape. The experts'
    GEMMs are 12.8x the FLOPs the step counts with that N; load balancing 'on 1280.7% of the
    FLOPs' was a -0.01x lever (Amdahl past the whole step) and the combination 0.12x. Now the
    lever acts on the routed experts' GEMMs as the step-time model predicts them: a part of the
    predicted step."""
    sc = scenario.resolve(overrides=N_TOO_SMALL)
    a = account(sc)
    balance = _levers(a)["load_balance"]
    assert balance["speedup"] >= 1 and balance["feasible"]
    predicted = a["time"]["predicted_seconds"]
    experts = advice.expert_seconds(
        advice.Base(sc, {**a["time"], "seconds": predicted}, a["memory"]), sc.shape
    )
    assert 0 < experts <= a["time"]["parts"]["gemms"]["seconds"] <= predicted
    assert a["advice_combined"]["speedup"] >= 1


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(valid_scenarios())
def test_every_lever_and_their_combination_is_a_gain(data):
    """Any valid scenario: a feasible lever speeds the step up and fits (a change the model
    says is slower is below 1 and not feasible), its gain is predicted before / after; the
    combination is a gain, and no lever comes from an estimate that contradicts the step."""
    a = account(scenario.resolve(overrides=data))
    step = a["scenario"]["step_time"]
    for lever in a["advice"]:
        assert lever["speedup"] > 0, lever
        if lever["step_time_from"] != "measured communication_share":
            assert lever["speedup"] == pytest.approx(lever["step_before"] / lever["step_after"])
        if lever["feasible"]:
            assert lever["fits"] and lever["speedup"] >= 1 and lever["step_time"] <= step, lever
    combined = a["advice_combined"]
    assert combined["speedup"] >= 1 and combined["step_time"] <= step, combined
    for name in combined["levers"]:
        assert _levers(a)[name]["feasible"] and _levers(a)[name]["speedup"] > 1
    comm = a["communication"]
    if comm["seconds"] > step and comm["basis"] == "estimated":  # contradicts the step
        assert _levers(a)["communication_overlap"]["speedup"] == 1
    assert combined["ceiling"] >= 1
