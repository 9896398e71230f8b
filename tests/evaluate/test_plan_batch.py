"""evaluate.plan_batch computes the plan's pieces over arrays of cores: every value must be the
one-core path's float, bit for bit (the search's ranks, top K and counts rest on them): the
GEMM tables, the lower bounds, the compute without recompute at each ZeRO stage, the stage
sums, the recompute parts, the floors, the least peaks, the peaks and the settings chosen; and
the plan's shortcuts to the communication model (Evaluator.comm_args, communication.exposed)
are the model's own figures."""

import tracemalloc
from pathlib import Path

import pytest

from costmodel.evaluate import communication, plan, plan_batch, run
from costmodel.evaluate.communication import Compute
from costmodel.evaluate.plan_batch import Batch
from costmodel.evaluate.plan_eval import ZERO_STAGES, Evaluator
from costmodel.evaluate.plan_space import Recompute, schedule_options
from costmodel.inputs import scenario

ROOT = Path(__file__).parents[2]
SCENARIOS = ROOT / "scenarios"
CASES = {
    # (scenario, GPUs, FP8 searched, every n-th core checked against the one-core path)
    "deepseek-1024": (SCENARIOS / "deepseek-v3-2048xH800.yaml", 1024, False, 7),
    "llama70-1024-fp8": (SCENARIOS / "llama-3.1-70b-512xH100.yaml", 1024, True, 3),
    "qwen3-next": (SCENARIOS / "qwen3-next-80b-256xB200.yaml", None, False, 3),
    "llama8-packed": (SCENARIOS / "llama-3.1-8b-packed-64xH100.yaml", None, False, 1),
    "course": (None, None, False, 1),
    # the stage sums and the peaks taken in blocks of a few KB (plan_batch.CHUNK_BYTES): many
    # blocks of layers and of cores, each carrying the sums so far
    "llama70-chunked": (SCENARIOS / "llama-3.1-70b-512xH100.yaml", 64, False, 1),
}
#: The cases' CHUNK_BYTES where it is not the module's.
CHUNKED = {"llama70-chunked": 4096}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    path, gpus, fp8, stride = CASES[request.param]
    with pytest.MonkeyPatch.context() as patch:
        if request.param in CHUNKED:
            patch.setattr(plan_batch, "CHUNK_BYTES", CHUNKED[request.param], raising=False)
        base = plan.rebase(scenario.resolve(path), gpus)
        batched, options, cores = plan._space(base, fp8, {})
        batched.batch = Batch(batched, cores)
        one = Evaluator(base)  # the one-core path: no batch
        yield batched, one, cores, stride


def test_a_stage_of_many_layers_is_summed_in_bounded_blocks(monkeypatch):
    """Issue 32 (11): 55,440 layers on 40,320 GPUs asked NumPy for 40 GiB at once: every layer
    of a stage, for thousands of cores, before adding them. Added in blocks of CHUNK_BYTES, each
    starting from the sum so far: a 5,544-layer model's batch holds a few MB at a time with a
    1 MiB block (146 MB before), and its sums are the floats of one accumulate over every
    layer (the same as with blocks of 1 GiB)."""
    sc = scenario.resolve(overrides={"num_layers": 5544, "num_gpus": 8})
    ev, _, cores = plan._space(plan.rebase(sc), False, {})
    monkeypatch.setattr(plan_batch, "CHUNK_BYTES", 2**20, raising=False)
    tracemalloc.start()
    try:
        small = Batch(ev, cores)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    monkeypatch.setattr(plan_batch, "CHUNK_BYTES", 2**30)
    whole = Batch(ev, cores)
    assert len({core.pp for core in cores}) > 1
    for key, sums in whole._sums.items():
        assert sums.tobytes() == small._sums[key].tobytes(), key


def _same(got, want, what):
    assert got == want, what
    assert type(got) is type(want), what


def test_gemm_tables_and_bounds_are_the_one_core_floats(case):
    batched, one, cores, stride = case
    bounds = batched.batch.bounds()
    assert len(bounds) == len(cores)
    for i in range(0, len(cores), stride):
        core = cores[i]
        rows = one.gemm_rows(core)
        for key, column in batched.batch.gemm.items():
            assert float(column[i]) == rows.get(key, 0.0), (core, key)
        _same(bounds[i], plan._bound(one, core), core)


def test_compute_sums_recompute_and_floors_are_the_one_core_floats(case):
    batched, one, cores, stride = case
    batch = batched.batch
    for core in cores[::stride]:
        row = batch.row(core)
        for zero in (0, 1):
            got, want = batch.compute(row, zero), one.compute(core, Recompute("none"), zero)
            for key in ("parts", "phases"):
                assert list(got[key].items()) == list(want[key].items()), (core, zero, key)
            _same(got["optimizer_seconds"], want["optimizer_seconds"], core)
        assert row[1] == one._staged(core)[0], core
        for rc in one.options:
            _same(batch.recompute_part(row, rc), one.recompute_part(core, rc), (core, rc))
            for zero in ZERO_STAGES:
                _same(batch.floor_parts(row, rc, zero), one._floor_parts(core, rc, zero), core)


def test_peaks_and_settings_are_the_one_core_floats(case):
    batched, one, cores, stride = case
    saving = plan._saving(one.options)
    least = batched.batch.least_peaks(saving).tolist()
    for i in range(0, len(cores), stride):
        core = cores[i]
        schedules = schedule_options(one.base, core.pp)
        _same(least[i], one.least_peak(core, saving, schedules), core)
        shares = [
            plan.plain.bubble_over_compute(s.name, core.pp, core.micro_batches, s.virtual or 1)
            for s in schedules
        ]
        for rc in one.options:
            want = one.settings(core, rc, schedules, shares)
            assert batched.settings(core, rc, schedules, shares) == want, (core, rc)
            assert (batched.peaks(core, rc, schedules) == one.peaks(core, rc, schedules)).all()


def test_communication_shortcuts_are_the_models_figures(case):
    batched, one, cores, _ = case
    for core in cores[:: max(1, len(cores) // 40)]:
        for rc in (Recompute("none"), Recompute("full")):
            for zero in ZERO_STAGES:
                sc = one.scenario(core, rc, zero)
                args = run.communication_args(sc, one.shape)
                assert batched.comm_args(core, rc, zero) == args, (core, rc, zero)
                phases = Compute(**one.compute(core, rc, zero)["phases"])
                got = communication.communication(**args, compute=phases)
                fixed = sum(
                    c.exposed_seconds
                    for c in got.collectives
                    if c.hidden_behind is None and c.parallelism != "DP"
                )
                _same(communication.exposed(phases, **args), (got.exposed_seconds, fixed), core)
