"""evaluate.plan.plan_batch evaluates the models' formulas (each written once) on arrays over the
cores of a search, in blocks that bound its memory: the blocks change no float (each core's
figures are its own). That the figures are the report's for a layout's scenario is
tests/evaluate/test_plan.py's agreement test; the formulas themselves are
tests/evaluate/test_formulas.py's."""

import tracemalloc
from pathlib import Path

from costmodel.evaluate.plan import plan
from costmodel.evaluate.plan.plan_batch import Batch
from costmodel.evaluate.simulate import stage
from costmodel.inputs import scenario

LLAMA = Path(__file__).parents[2] / "scenarios" / "llama-3.1-70b-512xH100.yaml"


def test_a_stage_of_many_layers_is_summed_in_bounded_blocks(monkeypatch):
    """Issue 32 (11): 55,440 layers on 40,320 GPUs asked NumPy for 40 GiB at once: every layer
    of a stage, for thousands of cores, before adding them. Added in blocks of CHUNK_BYTES, each
    starting from the sum so far: a 5,544-layer model's batch holds a few MB at a time with a
    1 MiB block (146 MB before), and its sums are the floats of one accumulate over every
    layer (the same as with blocks of 1 GiB)."""
    sc = scenario.resolve(overrides={"num_layers": 5544, "num_gpus": 8})
    ev, _, cores = plan._space(plan.rebase(sc), False, {})
    monkeypatch.setattr(stage, "CHUNK_BYTES", 2**20)
    tracemalloc.start()
    try:
        small = Batch(ev, cores)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20
    monkeypatch.setattr(stage, "CHUNK_BYTES", 2**30)
    whole = Batch(ev, cores)
    assert len({core.pp for core in cores}) > 1
    for key, sums in whole._sums.items():
        assert sums.tobytes() == small._sums[key].tobytes(), key


def test_blocks_of_cores_change_no_peak(monkeypatch):
    """The peaks and settings of a pipeline size's cores are computed in blocks of at most
    CHUNK_BYTES (many blocks at 4 KB, the stage sums too): each core's are those of one block
    of all of them."""
    base = plan.rebase(scenario.resolve(LLAMA), 64)
    ev, _, cores = plan._space(base, False, {})
    whole = Batch(ev, cores)
    monkeypatch.setattr(stage, "CHUNK_BYTES", 4096)
    blocks = Batch(ev, cores)
    assert len(blocks._pipeline_rows(cores[0].pp)[0]) > blocks._pipeline_rows(cores[0].pp)[1]
    for core in cores:
        assert blocks.settings(core) == whole.settings(core), core
    saving = plan._saving(ev.options)
    assert (blocks.least_peaks(saving) == whole.least_peaks(saving)).all()
