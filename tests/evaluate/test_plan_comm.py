"""evaluate.plan.plan_comm's floor on the exposed communication: its rows are the communication
model's, and with the core's floor without recompute it is no more than the predicted step of
any layout of the core (every recompute policy, ZeRO stage and schedule), and above the compute
floor where communication is exposed (it rules cores out)."""

import math
from pathlib import Path

import pytest

from costmodel.evaluate.communication.communication import Compute
from costmodel.evaluate.plan import plan, plan_comm
from costmodel.evaluate.plan.plan_eval import ZERO_STAGES, Evaluator, least_bubble
from costmodel.evaluate.plan.plan_space import (
    Recompute,
    bubble_share,
    cores,
    recompute_options,
    schedule_options,
)
from costmodel.evaluate.simulate import run
from costmodel.inputs import scenario

SCENARIOS = Path(__file__).parents[2] / "scenarios"
CASES = {
    # DeepSeek-V3 on 1,024 GPUs: EP, DualPipe, ZeRO stages that differ in their DP rows
    "deepseek": (SCENARIOS / "deepseek-v3-2048xH800.yaml", 1024, 97),
    # Llama-3.1-70B on 1,024 GPUs: TP without overlap, the CP ring
    "llama": (SCENARIOS / "llama-3.1-70b-512xH100.yaml", 1024, 23),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    path, gpus, stride = CASES[request.param]
    base = plan.rebase(scenario.resolve(path), gpus)
    ev = Evaluator(base)
    every = cores(base, gpus)
    return ev, every[::stride]


def test_floor_rows_are_the_models_rows(case):
    ev, sample = case
    for core in sample[:12]:
        for zero in ZERO_STAGES:
            sc = ev.scenario(core, Recompute("none"), zero)
            computed = ev.compute(core, Recompute("none"), zero)
            got = run.communication_of(
                sc, ev.shape, Compute(**computed["phases"], basis=run.COMPUTE_BASIS)
            )
            rows = plan_comm.communication.floor_rows(
                ZERO_STAGES, True, **run.communication_args(sc, ev.shape)
            )
            dp = [c.seconds for c in got.collectives if c.parallelism == "DP"]
            assert [seconds for seconds, _ in rows["dp"][zero]] == dp
            exposed = sum(
                c.seconds
                for c in got.collectives
                if c.parallelism in ("TP", "CP") and c.hidden_behind is None
            )
            assert rows["exposed"] == pytest.approx(exposed, rel=1e-12, abs=0.0)


def test_floor_is_under_every_layouts_step(case):
    ev, sample = case
    options = recompute_options(ev.base)
    none, above, others = Recompute("none"), 0, 0
    for core in sample:
        schedules = schedule_options(ev.base, core.pp)
        bubble = least_bubble(core.pp, core.micro_batches, tuple(schedules))
        for zero in ZERO_STAGES:
            extra = plan_comm.exposed_floor(ev, core, zero, options)
            floor = ev.floor(core, none, bubble, zero) + extra
            above += extra > 0
            # the search's first check, without the DP rows, is no more than the floor
            without_dp = plan_comm.others_floor(ev, core, zero, options)
            assert ev.floor(core, none, bubble, zero) + without_dp <= floor, (core, zero)
            others += without_dp > 0
            for rc in options:
                for schedule in schedules:
                    if bubble_share(schedule, core.pp, core.micro_batches) == math.inf:
                        continue  # interleaved at m < p: refused, never timed
                    step = sum(ev.parts(core, rc, zero, schedule).values())
                    assert floor <= step * (1 + 1e-12), (core, rc, zero, schedule)
    assert above > len(sample)  # the floor is not the compute alone
    assert others > 0  # nor is the floor without the DP rows


def test_tp_cp_rows_are_cached_by_what_they_read(case):
    """plan_comm caches the TP and CP rows by tp_cp_key: every core of a key has the same rows
    (the communication model's, from the core's own scenario)."""
    ev, _ = case
    groups: dict[tuple, list] = {}
    for core in cores(ev.base, ev.base.num_gpus):
        if core.tp > 1 or core.cp > 1:
            groups.setdefault(plan_comm.tp_cp_key(core), []).append(core)
    shared = [members for members in groups.values() if len(members) > 1]
    # a dense model's key is its core (EP 1); an MoE's cores differ in EP and DP within a key
    assert len(shared) > 10 or not ev.shape.is_moe
    for members in shared[:: max(1, len(shared) // 40)]:
        got = set()
        for core in members[:: max(1, len(members) // 4)]:
            args = run.communication_args(ev.scenario(core, Recompute("none"), 1), ev.shape)
            rows = plan_comm.communication.floor_rows((), True, **args)
            got.add((rows["exposed"], rows["capped"]))
        assert len(got) == 1, members
