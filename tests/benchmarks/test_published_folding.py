"""The published rows whose MoE layout folds EP over TP (issue 34 item 4): Megatron-Bridge's
Qwen3-235B and DeepSeek-V3 H100 runs set expert_tensor_parallel_size 1 under TP 2, which the
table now states (`expert_tensor_parallel`) with EP as printed."""

from benchmarks_loader import load

from costmodel.inputs import scenario

pub = load("published", "published_runs_table")
bench = load("published_runs", "published_runs_bench")
ROWS = {row["id"]: row for row in pub.rows()}
FOLDED = [i for i, row in ROWS.items() if row["expert_tensor_parallel"] is not None]


def test_the_folded_rows_are_the_ones_the_notes_name():
    named = [
        i for i, row in ROWS.items()
        if "EP FOLDS TP" in row["notes"] or "ETP 1 WITH TP 2" in row["notes"]
    ]  # fmt: skip
    assert FOLDED == named and len(FOLDED) == 7


def test_each_folded_row_resolves_with_its_printed_layout():
    """EP 32 (Qwen3-235B: printed 'EP 32') over TP 2 x DP 16 = 32 ranks, EP 64 (DeepSeek-V3)
    over TP 2 x DP 64 = 128: refused before (EP 32 does not divide DP 16), now the expert data
    parallel 32 / 32 = 1 and 128 / 64 = 2."""
    for row_id in FOLDED:
        row = ROWS[row_id]
        sc = scenario.resolve(overrides=pub.overrides(row))
        printed = 64 if "deepseek" in row_id else 32
        assert f"EP {printed}" in row["printed_as"]
        assert (sc.expert_parallel, sc.expert_tensor_parallel, sc.tensor_parallel) == (
            printed,
            1,
            2,
        )
        assert sc.tensor_parallel * sc.data_parallel // printed == (2 if printed == 64 else 1)


def test_the_2604_qwen3_row_is_evaluable_and_fits():
    """Before the key it was 'not evaluable (explained)'."""
    row_id = "megatron-bridge-2604-qwen3-235b-a22b-h100-fp8"
    assert row_id not in bench.EXPLAINED
    v = bench.verdict(ROWS[row_id])
    assert v.error is None and v.fits
