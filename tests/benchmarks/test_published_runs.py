"""The table of published runs (benchmarks/published_runs.csv): every row parses, names its
source, is internally consistent (layout, batch, printed utilization against the source's own
FLOP formula: a guard against a mistyped number), and turns into scenario overrides that use
only known keys."""

import math

import pytest
from benchmarks_loader import load

from costmodel.inputs import hardware, models
from costmodel.inputs.scenario import FIELDS, check_value

pub = load("published", "published_runs_table")
BOOL_COLUMNS, CHOICES, COLUMNS, CSV_PATH = pub.BOOL_COLUMNS, pub.CHOICES, pub.COLUMNS, pub.CSV_PATH
EXTRA_COLUMNS, FLOAT_COLUMNS, INT_COLUMNS = pub.EXTRA_COLUMNS, pub.FLOAT_COLUMNS, pub.INT_COLUMNS
RECOMPUTE_MODULES, REPO, REQUIRED_VALUES = pub.RECOMPUTE_MODULES, pub.REPO, pub.REQUIRED_VALUES
cluster_tokens_per_s, flops_per_token = pub.cluster_tokens_per_s, pub.flops_per_token
overrides, rows, step_time, tokens_per_step = (
    pub.overrides,
    pub.rows,
    pub.step_time,
    pub.tokens_per_step,
)

ROWS = rows()
IDS = [row["id"] for row in ROWS]


def by_id(prefix):
    return [row for row in ROWS if row["id"].startswith(prefix)]


def test_header_has_every_required_column_once():
    with open(CSV_PATH, encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split(",")
    assert header[: len(COLUMNS)] == list(COLUMNS)
    assert header[len(COLUMNS) :] == list(EXTRA_COLUMNS)


def test_every_row_parses_into_typed_values():
    assert len(ROWS) >= 40
    assert len(set(IDS)) == len(IDS)
    for row in ROWS:
        for column, value in row.items():
            if value is None:
                continue
            if column in INT_COLUMNS:
                assert isinstance(value, int), (row["id"], column)
            elif column in FLOAT_COLUMNS:
                assert isinstance(value, float), (row["id"], column)
            elif column in BOOL_COLUMNS:
                assert isinstance(value, bool), (row["id"], column)


def test_at_least_five_sources():
    families = {row["id"].split("-")[0] for row in ROWS}
    sources = {row["source"].split(",")[0] for row in ROWS}
    assert len(families) >= 5 and len(sources) >= 5


@pytest.mark.parametrize("column", REQUIRED_VALUES)
def test_required_values_are_filled(column):
    empty = [row["id"] for row in ROWS if row[column] in (None, "")]
    assert not empty, f"{column} empty in {empty}"


def test_categorical_columns_use_their_vocabulary():
    for row in ROWS:
        for column, allowed in CHOICES.items():
            assert row[column] is None or row[column] in allowed, (row["id"], column, row[column])
        assert set(row["recompute_modules"] or ()) <= RECOMPUTE_MODULES, row["id"]
        assert row["recompute_modules"] is None or row["recompute"] == "selective", row["id"]
        assert row["gpu"] in hardware.GPUS, row["id"]
        assert (row["tokens_per_s"] is None) == (row["tokens_per_s_scope"] is None), row["id"]


def test_numbers_are_positive():
    may_be_zero = {"zero_stage", "shared_experts", "first_dense_layers"}
    for row in ROWS:
        for column in INT_COLUMNS | FLOAT_COLUMNS:
            value = row[column]
            if value is None:
                continue
            assert value >= 0 if column in may_be_zero else value > 0, (row["id"], column)
        for column in ("mfu", "hfu"):
            assert row[column] is None or row[column] < 1, (row["id"], column)
        assert row["zero_stage"] is None or row["zero_stage"] <= 3


def test_layouts_multiply_to_the_gpus():
    """TP x PP x CP x DP = GPUs where the row gives DP; EP divides the experts and lives inside
    DP, or, where the row says Megatron-Core folds TP into the expert grid (expert tensor
    parallelism 1), inside TP x CP x DP; the global batch is whole micro batches of every DP
    rank (Composer, in the MosaicML rows, may split a batch unevenly, so those are left out)."""
    checked = 0
    for row in ROWS:
        tp, pp = row["tensor_parallel"], row["pipeline_parallel"]
        cp, dp = row["context_parallel"] or 1, row["data_parallel"]
        if None not in (tp, pp, dp):
            assert tp * pp * cp * dp == row["num_gpus"], row["id"]
            checked += 1
        if None not in (tp, pp):
            assert row["num_gpus"] % (tp * pp * cp) == 0, row["id"]
        ep = row["expert_parallel"]
        if ep:
            assert row["num_experts"] % ep == 0, row["id"]
            dp_ranks = row["num_gpus"] // (tp * pp * cp)
            assert dp_ranks % ep == 0 or "EP FOLDS TP" in row["notes"], row["id"]
            assert (dp_ranks * tp * cp) % ep == 0, row["id"]
        if dp and row["micro_batch"] and row["flop_formula"] != "mosaic":
            assert row["global_batch_samples"] % (dp * row["micro_batch"]) == 0, row["id"]
    assert checked >= 40


def test_the_runs_issue_19_names_are_in_the_table():
    assert {"llama3-405b-8k-8192gpu", "llama3-405b-8k-16384gpu", "llama3-405b-131k-16384gpu",
            "deepseek-v3-2048xh800"} <= set(IDS)  # fmt: skip
    for size in ("175b", "530b", "1t"):
        assert f"korthikanti-{size}-selective" in IDS and f"korthikanti-{size}-full" in IDS
    torchtitan = by_id("torchtitan")
    assert any(r["model"].endswith("8B") for r in torchtitan)
    assert any(r["model"].endswith("70B") for r in torchtitan)
    assert any(r["model"].startswith("Qwen3") and r["num_experts"] for r in ROWS)


def test_deepseek_v3_throughput_is_derived_from_its_printed_cost():
    row = next(r for r in ROWS if r["id"] == "deepseek-v3-2048xh800")
    seconds_per_token = 180_000 * 3600 / 1e12  # 180K H800 GPU hours per trillion tokens
    assert row["tokens_per_s"] == round(2048 / seconds_per_token)
    assert "180K H800 GPU hours per trillion tokens" in row["printed_as"]
    assert "derived" in row["notes"]


def test_every_row_has_a_step_time():
    """A step of 10 ms to 10,000 s: the longest are XTuner's long-context rows, whose optimizer
    step accumulates one million-token sequence per GPU (Llama 2 7B at 1M on 32 GPUs: 7,849 s)."""
    for row in ROWS:
        seconds, how = step_time(row)
        assert seconds is not None and 0.01 < seconds < 10_000, (row["id"], how)


def implied_utilization(row):
    """The utilization the row's own FLOP formula gives at its printed (or token-derived) step
    time, against the peak its MFU/HFU uses; None where the module has no formula for it."""
    per_token = flops_per_token(row)
    seconds, how = step_time(row)
    if per_token is None or not how.startswith(("printed", "from tokens")):
        return None
    return (
        tokens_per_step(row) * per_token / (seconds * row["num_gpus"] * row["peak_tflops"] * 1e12)
    )


def test_printed_utilization_agrees_with_the_sources_formula():
    """A mistyped time, batch or shape shows as a utilization the formula cannot give: within 2%
    of the printed MFU (HFU for the formulas that count the recompute)."""
    checked = 0
    for row in ROWS:
        util = implied_utilization(row)
        hardware_flops = row["flop_formula"] in ("megatron_gpt_96", "megatron_deepspeed_hfu")
        printed = row["hfu"] if hardware_flops else row["mfu"]
        if util is None or printed is None:
            continue
        assert math.isclose(util, printed, rel_tol=0.02), (row["id"], util, printed)
        checked += 1
    assert checked >= 60


def test_printed_tflops_agree_with_printed_utilization():
    """TFLOP/s per GPU / the peak = the printed MFU (HFU) to the printed rounding."""
    checked = 0
    for row in ROWS:
        if row["tflops_per_gpu"] is None or row["peak_tflops"] is None:
            continue
        hardware_flops = row["flop_formula"] in ("megatron_gpt_96", "megatron_deepspeed_hfu")
        printed = row["hfu"] if hardware_flops else row["mfu"]
        if printed is None:
            continue
        assert abs(row["tflops_per_gpu"] / row["peak_tflops"] - printed) < 0.006, row["id"]
        checked += 1
    assert checked >= 40


def test_printed_tflops_agree_with_printed_step_time():
    """BLOOM prints both its time and its TFLOP/s; the Korthikanti rows derive from the same
    formula: the printed figures and the formula meet."""
    row = next(r for r in ROWS if r["id"] == "bloom-176b-384xa100")
    tflops = tokens_per_step(row) * flops_per_token(row) / row["step_time_s"] / row["num_gpus"]
    assert math.isclose(tflops / 1e12, row["tflops_per_gpu"], rel_tol=0.005)


def test_shapes_agree_with_the_model_config_named():
    for row in ROWS:
        if not row["model_ref"]:
            continue
        path = REPO / row["model_ref"]
        shape = models.load_shape(str(path) if path.exists() else row["model_ref"])
        for column, value in (("hidden_size", shape.hidden_size),
                              ("num_layers", shape.num_layers), ("num_heads", shape.num_heads),
                              ("vocab_size", shape.vocab_size),
                              ("num_experts", shape.num_experts),
                              ("experts_per_token", shape.experts_per_token)):  # fmt: skip
            assert row[column] is None or row[column] == value, (row["id"], column)


def test_overrides_use_only_known_keys_with_allowed_values():
    for row in ROWS:
        keys = overrides(row)
        unknown = set(keys) - set(FIELDS)
        assert not unknown, (row["id"], unknown)
        for key, value in keys.items():
            check_value(key, value)  # raises CostModelError on a value out of bounds
        assert keys["step_time"] == step_time(row)[0]
        assert keys["samples_per_step"] * keys["mean_tokens_per_sample"] == tokens_per_step(row)
        assert keys["measured_tokens_per_s"] == cluster_tokens_per_s(row)


def test_overrides_name_the_model_by_config_or_by_shape():
    for row in ROWS:
        keys = overrides(row)
        if row["model_ref"]:
            assert "hidden_size" not in keys and keys["model"]
            assert keys["count_mtp"] == bool(row["mtp_layers"])
        else:
            assert keys["hidden_size"] == row["hidden_size"]
            assert keys["full_attention_every"] == 1
            assert keys["num_experts"] == (row["num_experts"] or 0)
            assert keys["mlp_activation"] in ("swiglu", "gelu")
        if row["fp8"] != "none":
            assert keys["fp8"] == "hybrid"


def test_image_transcriptions_agree_with_their_own_aggregates():
    """Narayanan et al.'s Table 1 and the Megatron-LM H100 table are images, read by eye: each row
    prints its aggregate petaFLOP/s beside the per-GPU figure, and the two agree (TFLOP/s x GPUs)
    to the printed rounding."""
    checked = 0
    for row in by_id("narayanan") + by_id("megatron-h100"):
        aggregate = float(row["printed_as"].rsplit("petaFLOP", 1)[1].split()[-1])
        assert math.isclose(
            row["tflops_per_gpu"] * row["num_gpus"] / 1000, aggregate, rel_tol=0.005
        ), row["id"]
        checked += 1
    assert checked == 19
