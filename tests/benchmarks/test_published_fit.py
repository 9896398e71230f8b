"""Runs that trained fit: the memory verdicts of benchmarks/published_runs.py on every row of
benchmarks/published_runs.csv (issue 19)."""

import pytest
from benchmarks_loader import load

bench = load("published_runs", "published_runs_bench")


@pytest.fixture(scope="module")
def found():
    return {v.id: v for v in bench.verdicts()}


def test_the_rows_the_issue_names_fit_as_stated(found):
    for row_id in bench.REQUIRED:
        v = found[row_id]
        assert v.error is None and v.fits, (row_id, v.peak, v.capacity, v.error)
        assert row_id not in bench.EXPLAINED


def test_llama3_405b_8k_fits_only_with_its_stated_sequence_parallelism(found):
    """The row states sequence_parallel (the paper is silent): without it the 16 micro batches
    in flight on the first stage would not fit, which is why the row says so."""
    v = found["llama3-405b-8k-8192gpu"]
    assert v.row["sequence_parallel"] is True and "sequence_parallel true" in v.row["assumed"]
    keys = {**bench._published().overrides(v.row), "sequence_parallel": False}
    assert not bench._evaluate(keys)["fits"]


def test_every_row_fits_or_names_the_convention_that_explains_it(found):
    for v in found.values():
        if v.error is None and v.fits:
            assert v.id not in bench.EXPLAINED, f"{v.id} fits: its explanation is stale"
            continue
        assert v.explained, (v.id, v.peak, v.capacity, v.error)
        changes, _ = bench.EXPLAINED[v.id]
        if changes is None:  # a layout costmodel cannot place: the error says which key
            assert v.error is not None
        else:
            assert v.fits_explained, (v.id, v.peak_explained)


def test_explanations_name_rows_of_the_table(found):
    assert set(bench.EXPLAINED) <= set(found)


def test_benchmark_summary_counts_every_row(found):
    lines = bench.summary(list(found.values()))
    assert lines[0].startswith(f"{len(found)} published runs;") and "0 unexplained" in lines[0]
    rows = bench.table(list(found.values()))
    assert len(rows) == len(found) + 1
