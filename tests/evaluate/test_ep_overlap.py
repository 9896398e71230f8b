"""Partial EP overlap (`ep_overlap: partial` with `ep_overlap_fraction`) and the shared expert's
overlap (`moe_shared_expert_overlap`): the exposed all-to-all computed by hand on a small MoE
layout, the course's run, the lever, and the refusals (one line, exit status 2)."""

import json

import pytest

from costmodel.cli import main
from costmodel.errors import CostModelError
from costmodel.evaluate.communication.communication import Compute, communication
from costmodel.evaluate.plan import plan
from costmodel.evaluate.plan.plan_eval import Evaluator
from costmodel.evaluate.plan.plan_space import Recompute, cores
from costmodel.evaluate.simulate import step_time
from costmodel.inputs import scenario

GB = 1e9
#: EP 64 over 8 nodes of 8, one MoE layer, k 8, 1000 tokens of width 100 (BF16): each token
#: copy is 200,000 bytes; a token reaches 8 nodes, 7 of them another node, so each direction
#: sends 2 (forward and backward) x 7 x 200,000 bytes over the 50 GB/s network: 56 us a row
#: (tests/evaluate/test_communication.py checks the bytes).
EP_64 = dict(
    dp=64,
    ep=64,
    gpus_per_node=8,
    intra_node_bandwidth=160 * GB,
    inter_node_bandwidth=50 * GB,
    micro_batch=1,
    seq_len=1000,
    hidden_size=100,
    num_layers=1,
    num_full_attention_layers=0,
    num_moe_layers=1,
    experts_per_token=8,
    dense_params=1,
    expert_params=64,
    micro_batches=1,
    step_time=1.0,
    zero_stage=0,
    grad_bytes=2,
    collective_latency="none",  # the links alone: ROW by hand (latency: test_collective_latency)
)
ROW = 2 * 7 * 200_000 / (50 * GB)  # 5.6e-5 s, dispatch and combine alike
LARGE = Compute(forward=1.0, backward=2.0, attention=0.0)  # far longer than the all-to-all


def ep_rows(**changes):
    """The EP rows, and their exposed seconds in all (the DP all-reduce of the one dense
    parameter, 2e-11 s, apart)."""
    result = communication(**{**EP_64, **changes})
    rows = [c for c in result.collectives if c.parallelism == "EP"]
    assert [c.name for c in rows] == ["EP all-to-all, dispatch", "EP all-to-all, combine"]
    return sum(c.exposed_seconds for c in rows), rows


def test_the_rows_are_the_hand_computed_seconds():
    exposed, rows = ep_rows(compute=LARGE)
    assert [c.seconds for c in rows] == [pytest.approx(ROW)] * 2
    assert exposed == pytest.approx(2 * ROW)


def test_none_partial_and_dualpipe_by_hand():
    """none: all 2 x 56 us exposed; partial at 0.25: a quarter of each row hides behind the
    3 s of compute, 3/4 x 112 = 84 us exposed; dualpipe: all of it hides."""
    none, _ = ep_rows(compute=LARGE)
    partial, rows = ep_rows(ep_overlap="partial", ep_overlap_fraction=0.25, compute=LARGE)
    dual, _ = ep_rows(ep_overlap="dualpipe", compute=LARGE)
    assert none == pytest.approx(2 * ROW)
    assert partial == pytest.approx(0.75 * 2 * ROW)
    assert [c.exposed_seconds for c in rows] == [pytest.approx(0.75 * ROW)] * 2
    assert "at most 0.25 of it" in rows[0].hidden_behind
    assert dual == pytest.approx(0.0)
    # the two ends: a fraction of 0 hides nothing, of 1 as much as dualpipe
    nothing, _ = ep_rows(ep_overlap="partial", ep_overlap_fraction=0, compute=LARGE)
    everything, _ = ep_rows(ep_overlap="partial", ep_overlap_fraction=1, compute=LARGE)
    assert nothing == pytest.approx(2 * ROW)
    assert everything == pytest.approx(0.0)


def test_partial_overlap_shares_short_compute():
    """10 us of compute in all: the dispatch hides min(0.25 x 56, 10) = 10 us of it, the
    combine finds nothing left: 112 - 10 = 102 us exposed."""
    short = Compute(forward=0.4e-5, backward=0.6e-5, attention=0.0)
    result, rows = ep_rows(ep_overlap="partial", ep_overlap_fraction=0.25, compute=short)
    assert rows[0].exposed_seconds == pytest.approx(ROW - 1e-5)
    assert rows[1].exposed_seconds == pytest.approx(ROW)
    assert result == pytest.approx(2 * ROW - 1e-5)


def test_the_shared_expert_hides_the_all_to_all_up_to_its_compute():
    """70 us of shared-expert GEMMs: the dispatch's 56 us hides whole, the combine 14 us of its
    56; without the flag, or without a shared expert's compute, nothing hides."""
    shared = Compute(forward=1.0, backward=2.0, attention=0.0, shared_expert=7e-5)
    result, rows = ep_rows(moe_shared_expert_overlap=True, compute=shared)
    assert rows[0].exposed_seconds == pytest.approx(0.0)
    assert rows[1].exposed_seconds == pytest.approx(ROW - (7e-5 - ROW))
    assert "shared expert" in rows[0].hidden_behind
    assert result == pytest.approx(2 * ROW - 7e-5)
    off, _ = ep_rows(compute=shared)
    assert off == pytest.approx(2 * ROW)
    no_shared, _ = ep_rows(moe_shared_expert_overlap=True, compute=LARGE)
    assert no_shared == pytest.approx(2 * ROW)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"ep_overlap": "partial", "ep_overlap_fraction": 1.5}, "ep_overlap_fraction: 1.5"),
        ({"ep_overlap": "partial"}, "ep_overlap_fraction: None"),
        ({"ep_overlap": "sometimes"}, "ep_overlap: 'sometimes'"),
        ({"moe_shared_expert_overlap": 1}, "moe_shared_expert_overlap: 1"),
        (
            {"ep_overlap": "dualpipe", "moe_shared_expert_overlap": True},
            "moe_shared_expert_overlap: True is not allowed; expected false with ep_overlap",
        ),
    ],
)
def test_communication_refuses(changes, message):
    with pytest.raises(CostModelError, match=message):
        communication(**{**EP_64, **changes})


def report(capsys, *sets: str) -> dict:
    args = ["report", "--format", "json"]
    for setting in sets:
        args += ["--set", setting]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_the_course_with_partial_overlap_hides_the_fraction(capsys):
    """The course's EP 8 all-to-all runs in one node, far shorter than its compute: under
    partial the default 0.5 of each row hides, and the exposed communication drops by it."""
    none = report(capsys)
    partial = report(capsys, "ep_overlap=partial")
    assert partial["scenario"]["ep_overlap_fraction"] == 0.5
    rows = [c for c in partial["communication"]["collectives"] if c["parallelism"] == "EP"]
    assert len(rows) == 2
    for row in rows:
        assert row["exposed_seconds"] == pytest.approx(0.5 * row["seconds"])
    saved = none["communication"]["exposed_seconds"] - partial["communication"]["exposed_seconds"]
    assert saved == pytest.approx(0.5 * sum(row["seconds"] for row in rows))
    # the lever still turns on all of it (dualpipe), from partial too
    lever = [x for x in partial["advice"] if x["lever"] == "communication_overlap"][0]
    assert lever["changes"] == {"ep_overlap": "dualpipe"}


def test_the_lever_turns_the_shared_expert_overlap_off_with_dualpipe(capsys):
    got = report(capsys, "moe_shared_expert_overlap=true")
    lever = [x for x in got["advice"] if x["lever"] == "communication_overlap"][0]
    assert lever["changes"] == {"ep_overlap": "dualpipe", "moe_shared_expert_overlap": False}
    assert lever["feasible"]


@pytest.mark.parametrize(
    "sets, line",
    [
        (
            ["ep_overlap_fraction=1.5"],
            "ep_overlap_fraction: 1.5 is not allowed; expected a number between 0 and 1",
        ),
        (
            ["ep_overlap=some"],
            "ep_overlap: 'some' is not allowed; expected one of none, partial, dualpipe",
        ),
        (
            ["moe_shared_expert_overlap=true", "ep_overlap=partial"],
            "moe_shared_expert_overlap: True is not allowed; expected false with ep_overlap "
            "partial (the shared expert's overlap needs none)",
        ),
    ],
)
def test_bad_values_are_one_line_exit_2(capsys, sets, line):
    args = ["report"]
    for setting in sets:
        args += ["--set", setting]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == f"costmodel: error: {line}\n"


@pytest.mark.parametrize(
    "setting", [{"ep_overlap": "partial"}, {"moe_shared_expert_overlap": True}]
)
def test_the_plan_times_the_overlap_as_the_report(setting):
    """The plan's exposed communication of a layout (its Evaluator) is the prediction's, the
    shared expert's compute and the fraction included."""
    base = plan.rebase(scenario.resolve(overrides=setting), 40)
    ev = Evaluator(base)
    core = next(c for c in cores(base, 40) if (c.ep, c.dp, c.tp, c.pp, c.cp) == (8, 40, 1, 1, 1))
    rc = Recompute("none")
    predicted = step_time.predict(ev.scenario(core, rc, 1))["parts"]["communication_exposed"]
    off = {"ep_overlap": "none", "moe_shared_expert_overlap": False}
    bare = step_time.predict(ev.scenario(core, rc, 1).what_if(**off))
    assert ev.exposed(core, rc, 1) == pytest.approx(predicted, rel=1e-12)
    assert predicted < bare["parts"]["communication_exposed"]
