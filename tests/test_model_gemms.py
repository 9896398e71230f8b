"""The model's GEMMs on the roofline (costmodel.evaluate.gemms.model_gemms)."""

import pytest

from costmodel.evaluate import gemms, layouts
from costmodel.evaluate.account import account
from costmodel.inputs import scenario
from costmodel.inputs.assumptions import assumed


def by_name(rows):
    return {row["name"].split(" (")[0].split(",")[0]: row for row in rows}


def test_course_gemms(course):
    rows = by_name(gemms.model_gemms(course.values))
    assert list(rows) == [
        "attention projection",
        "one routed expert",
        "attention core QK^T",
        "lm_head",
    ]
    expert = rows["one routed expert"]
    # EP = 8 ranks gather 49,152 x 8 / 256 tokens each for every expert
    assert layouts.default_ep_size(256, 40) == 8
    assert expert["m"] == 8 * 49152 * 8 / 256 == 12288
    assert expert["n"] == 512 and "qwen3.6-35b-a3b" in expert["source"]
    # by hand: 2 m n k / (2 (m k + k n + m n)) with m = 12288, k = 2048, n = 512
    #        = 25,769,803,776 / 65,011,712 = 12288 / 31 FLOP/byte
    assert expert["intensity"] == pytest.approx(12288 / 31, rel=1e-12)
    core = rows["attention core QK^T"]
    assert (core["m"], core["k"], core["n"], core["weights"]) == (49152, 256, 49152, False)
    # every GEMM of the course model is right of H20's ridge at micro batch 1
    assert min(r["intensity"] for r in rows.values()) > account(course)["machine_balance"]


def test_weight_gemms_grow_with_micro_batch(course):
    one = by_name(gemms.model_gemms(course.values, 1))
    four = by_name(gemms.model_gemms(course.values, 4))
    for name, row in one.items():
        if row["weights"]:
            assert four[name]["intensity"] > row["intensity"]
            assert four[name]["m"] == 4 * row["m"]
        else:
            assert four[name]["intensity"] == row["intensity"]


def test_dense_model_without_head_dim():
    sc = scenario.resolve(
        overrides={"hidden_size": 4096, "num_experts": 0, "experts_per_token": 0, "micro_batch": 2}
    )
    rows = by_name(gemms.model_gemms(sc.values))
    assert list(rows) == ["attention projection", "dense FFN", "lm_head"]
    assert rows["dense FFN"]["n"] == 4 * 4096 and rows["dense FFN"]["m"] == 2 * sc["seq_len"]
    rows = by_name(gemms.model_gemms({**sc.values, "num_heads": 32}, tokens_per_sequence=1000))
    assert rows["attention core QK^T"]["k"] == 128 and rows["attention core QK^T"]["m"] == 1000


def test_dense_width_from_the_models_config():
    sc = scenario.resolve(data={"model": "llama-3.1-8b", "num_experts": 0, "experts_per_token": 0})
    rows = by_name(gemms.model_gemms(sc.values))
    assert rows["dense FFN"]["n"] == 14336
    assert rows["dense FFN"]["source"].startswith("intermediate_size of")


def test_assumed_head_dim_only_when_asked():
    sc = scenario.resolve(overrides={"hidden_size": 4096, "num_experts": 0, "experts_per_token": 0})
    assert "attention core QK^T" not in by_name(gemms.model_gemms(sc.values))
    rows = by_name(gemms.model_gemms(sc.values, assume_head_dim=True))
    core = rows["attention core QK^T"]
    assert core["k"] == assumed("head_dim") == 128 and core["source"] == "assumed head_dim"
    assert [r["key"] for r in gemms.model_gemms(sc.values)] == [
        "attention_projection",
        "dense_ffn",
        "lm_head",
    ]


def test_course_rows_do_not_depend_on_the_assumption(course):
    assert gemms.model_gemms(course.values) == gemms.model_gemms(
        course.values, assume_head_dim=True
    )
