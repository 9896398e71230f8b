"""Why a top layout of `costmodel plan` is faster than the team's own (evaluate.plan.plan_why,
issue 35 item 4): the differences of the two predictions' parts, the exposed communication split
by collective, no line where the own layout is the fastest, and the parts the
ranking rests on most. Hand-checked values on made-up rows; the course's search (0.1 s) for the
sums."""

from types import SimpleNamespace

import pytest

from costmodel.evaluate.plan import plan, plan_why
from costmodel.evaluate.simulate import step_time
from costmodel.inputs import scenario


@pytest.fixture(scope="module")
def course():
    return plan.search(scenario.resolve(), top=10)


def _row(key: str, peak: float = 50.0, **parts: float):
    """A made-up row: its key, its peak (GB of 80) and its parts (the others 0), as plan_why
    reads a Row."""
    full = {name: parts.get(name, 0.0) for name in step_time.PARTS}
    return SimpleNamespace(
        key=key, parts=full, seconds=sum(full.values()), peak_bytes=peak, capacity=80.0
    )


def test_the_differences_sum_to_the_difference_of_the_steps(course):
    assert course.own is not None and course.own_rank > 1
    versus = plan_why.versus(course, 10)
    compared = [(row, v) for row, v in zip(course.rows[:10], versus) if v is not None]
    assert len(compared) == 10 - (course.own_rank <= 10)  # all but the own layout
    for row, diffs in compared:
        assert sum(d["seconds"] for d in diffs) == pytest.approx(
            row.seconds - course.own.seconds, abs=1e-9
        )
        assert [abs(d["seconds"]) for d in diffs] == sorted(
            (abs(d["seconds"]) for d in diffs), reverse=True
        )


def test_the_collectives_split_the_communication_difference(course):
    """Each split sums to the exposed communication's difference, and each side is the report's
    model of the layout (step_time.predict's collectives on plan.as_scenario)."""
    split = 0
    for row, diffs in zip(course.rows[:10], plan_why.versus(course, 10)):
        comm = [d for d in diffs or () if d["part"] == "communication_exposed"]
        if not comm:
            continue
        split += 1
        want = row.parts["communication_exposed"] - course.own.parts["communication_exposed"]
        assert comm[0]["seconds"] == pytest.approx(want, abs=1e-12)
        for key in ("collectives", "parallelisms"):
            assert sum(c["seconds"] for c in comm[0][key]) == pytest.approx(want, abs=1e-9)
        detail = step_time.predict(plan.as_scenario(course, row))["detail"]["collectives"]
        assert sum(c["exposed_seconds"] for c in detail) == pytest.approx(
            row.parts["communication_exposed"], rel=1e-9
        )
    assert split >= 5  # the course's top layouts differ from its own in TP, EP and DP traffic


def test_no_line_where_the_own_layout_is_the_fastest():
    own = _row("own", gemms=8.0, pipeline_bubble=1.0)
    slower = _row("b", gemms=8.0, pipeline_bubble=1.5)
    fastest = SimpleNamespace(rows=[own, slower], own=own)
    assert plan_why.versus(fastest, 10) == [None, None]
    assert plan_why.why_not(fastest) == "the scenario's own layout is the fastest"
    # an own layout that does not fit is compared, even where it is faster than every row
    too_big = _row("own", peak=90.0, gemms=8.0, pipeline_bubble=1.0)
    assert plan_why.why_not(SimpleNamespace(rows=[slower], own=too_big)) is None


def test_rests_on_the_part_of_the_largest_summed_difference():
    """Own: bubble 2.0 s, communication 1.0 s. A: bubble 1.0, communication 1.5; B: bubble 1.2,
    communication 1.0. Summed |difference|: bubble 1.0 + 0.8 = 1.8 s, communication 0.5 s (less
    than half of 1.8: not named); bubble's share 1.8 / 2.3."""
    own = _row("own", gemms=5.0, pipeline_bubble=2.0, communication_exposed=1.0)
    a = _row("a", gemms=5.0, pipeline_bubble=1.0, communication_exposed=1.5)
    b = _row("b", gemms=5.0, pipeline_bubble=1.2, communication_exposed=1.0)
    rests = plan_why.rests_on(SimpleNamespace(rows=[a, b, own], own=own), 3)
    assert rests["of"] == 2
    [part] = rests["parts"]
    assert part["part"] == "pipeline_bubble"
    assert part["seconds"] == pytest.approx(1.8)
    assert part["share"] == pytest.approx(1.8 / 2.3)
    assert part["inputs"] == step_time.PART_INPUTS["pipeline_bubble"]
    # B's communication 2.0 instead: 0.5 + 1.0 = 1.5 s, at least half of 1.8: both named
    b.parts["communication_exposed"] = 2.0
    rests = plan_why.rests_on(SimpleNamespace(rows=[a, b, own], own=own), 3)
    assert [p["part"] for p in rests["parts"]] == ["pipeline_bubble", "communication_exposed"]
    # only B listed besides the own layout: 0.8 s bubble, 1.0 s communication
    rests = plan_why.rests_on(SimpleNamespace(rows=[b, own], own=own), 3)
    assert rests["of"] == 1
    assert [p["part"] for p in rests["parts"]] == ["communication_exposed", "pipeline_bubble"]
    assert plan_why.rests_on(SimpleNamespace(rows=[own], own=own), 3) is None


def test_visible_is_one_percent_of_the_own_step():
    assert plan_why.visible(-0.1, 10.0) and plan_why.visible(0.1, 10.0)
    assert not plan_why.visible(0.099, 10.0)
