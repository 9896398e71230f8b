"""The model's GEMMs from the real shapes (costmodel.evaluate.gemms.model_gemms, `costmodel gemms`)."""

import json
from pathlib import Path

import pytest
from commands import cli

from costmodel.evaluate import gemms, layouts
from costmodel.inputs import models, scenario
from costmodel.inputs.config import PRESETS

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(str(p) for p in (REPO / "tests" / "configs").glob("*.json"))


def by_key(rows):
    return {row["key"]: row for row in rows}


def llama_70b(tmp_path) -> str:
    """Llama-3.1-70B's published shape (meta-llama/Llama-3.1-70B config.json)."""
    cfg = {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "tie_word_embeddings": False,
    }
    path = tmp_path / "llama-3.1-70b.json"
    path.write_text(json.dumps(cfg))
    return str(path)


#: Every preset and test config, and again with count_mtp for those that have MTP layers.
CASES = [(m, False) for m in [*PRESETS, *CONFIGS]] + [
    (m, True) for m in [*PRESETS, *CONFIGS] if models.load_shape(m).num_mtp_layers
]


def test_both_mtp_configs_are_covered():
    assert sum(mtp for _, mtp in CASES) == 2  # qwen3.6-35b-a3b and deepseek-v3


@pytest.mark.parametrize("model, count_mtp", CASES)
def test_weight_rows_sum_to_exactly_2n(model, count_mtp):
    shape = models.load_shape(model)
    sc = scenario.resolve(data={"model": model, "count_mtp": count_mtp})
    for batch in (1, 3):
        rows = gemms.model_gemms(sc.values, batch)
        assert gemms.weight_flops_per_token(rows) == 2 * sc["activated_params"]
    n = shape.activated_params + (shape.mtp_activated_params if count_mtp else 0)
    assert sc["activated_params"] == n  # N as `costmodel params` gives it


def test_gqa_width_of_llama_70b(tmp_path):
    sc = scenario.resolve(data={"model": llama_70b(tmp_path)})
    rows = by_key(gemms.model_gemms(sc.values))
    assert rows["qkv"]["n"] == 8192 + 2 * 1024 == 10240  # not 3 x 8192
    assert rows["dense_gate_up"]["n"] == 2 * 28672 and rows["dense_down"]["k"] == 28672
    assert rows["qkv"]["layers"] == 80 and rows["lm_head"]["n"] == 128256


def test_deepseek_v3_rows_from_its_config():
    sc = scenario.resolve(data={"model": str(REPO / "tests" / "configs" / "deepseek-v3.json")})
    rows = by_key(gemms.model_gemms(sc.values))
    assert rows["dense_down"]["k"] == 18432 and rows["dense_down"]["layers"] == 3  # not 4 x 7168
    assert rows["expert_down"]["k"] == 2048 and rows["expert_down"]["layers"] == 58
    assert (rows["q_a"]["n"], rows["q_b"]["k"], rows["q_b"]["n"]) == (1536, 1536, 128 * 192)
    assert rows["kv_a"]["n"] == 512 + 64 and rows["kv_b"]["n"] == 128 * (128 + 128)
    assert rows["attention_output"]["k"] == 128 * 128
    assert rows["attention_scores"]["k"] == 192 and rows["attention_values"]["n"] == 128
    assert "qkv" not in rows


def test_course_gemms(course, course_account):
    rows = by_key(gemms.model_gemms(course.values))
    assert list(rows) == [
        "qkv",
        "attention_output",
        "linear_in",
        "linear_out",
        "router",
        "expert_gate_up",
        "expert_down",
        "shared_gate_up",
        "shared_down",
        "shared_expert_gate",
        "lm_head",
        "attention_scores",
        "attention_values",
    ]
    # Qwen3.6: 16 query heads x 256, doubled by the output gate, + 2 x 2 KV heads x 256
    assert rows["qkv"]["n"] == 16 * 256 * 2 + 2 * 2 * 256 == 9216
    expert = rows["expert_gate_up"]
    # EP = 8 ranks gather 49,152 x 8 / 256 tokens each for every expert
    assert layouts.default_ep_size(256, 40) == 8
    assert expert["m"] == 8 * 49152 * 8 / 256 == 12288
    assert (expert["k"], expert["n"], expert["uses_per_token"]) == (2048, 1024, 8)
    # by hand: 2 m n k / (2 (m k + k n + m n)), m = 12288, k = 512, n = 2048 (the down GEMM)
    down = rows["expert_down"]
    assert down["intensity"] == pytest.approx(
        12288 * 2048 * 512 / (12288 * 512 + 512 * 2048 + 12288 * 2048), rel=1e-12
    )
    core = rows["attention_scores"]
    assert (core["m"], core["k"], core["n"], core["weights"]) == (49152, 256, 49152, False)
    # per token of a 49,152 sequence: 2 x 49152 x 256 per head, 16 heads, 10 layers
    assert core["forward_flops_per_token"] == 2 * 49152 * 256 * 16 * 10
    # the 1-column shared-expert gate is the one memory-bound GEMM on H20 (balance 37)
    balance = course_account["machine_balance"]
    bound = {key for key, row in rows.items() if row["intensity"] < balance}
    assert bound == {"shared_expert_gate"} and rows["shared_expert_gate"]["bound"] == "memory"
    assert all(r["bound"] == "compute" for k, r in rows.items() if k != "shared_expert_gate")


def test_causal_halves_the_core_per_token(course):
    full = by_key(gemms.model_gemms(course.values))
    causal = scenario.resolve(overrides={"attention_flops": "causal"})
    half = by_key(gemms.model_gemms(causal.values))
    for key in ("attention_scores", "attention_values"):
        assert half[key]["forward_flops_per_token"] == full[key]["forward_flops_per_token"] / 2
    assert half["qkv"] == full["qkv"]


def test_weight_gemms_grow_with_micro_batch(course):
    one = by_key(gemms.model_gemms(course.values, 1))
    four = by_key(gemms.model_gemms(course.values, 4))
    for key, row in one.items():
        if row["weights"]:
            assert four[key]["m"] == 4 * row["m"]
            assert four[key]["intensity"] >= row["intensity"]
        else:
            assert four[key]["intensity"] == row["intensity"]


def test_a_scenario_of_keys_only_names_its_assumptions():
    sc = scenario.resolve(
        overrides={
            "hidden_size": 4096,
            "num_experts": 0,
            "experts_per_token": 0,
            "micro_batch": 2,
            "full_attention_every": 1,
        }
    )
    rows = by_key(gemms.model_gemms(sc.values))
    assert rows["dense_gate_up"]["n"] == 2 * 4 * 4096
    assert rows["dense_gate_up"]["m"] == 2 * sc["seq_len"]
    assert rows["qkv"]["n"] == 3 * 4096  # no GQA known: K and V as wide as Q
    assert rows["attention_scores"]["k"] == 128  # the course's assumed head_dim
    source = rows["qkv"]["source"]
    assert source.startswith("scenario keys; assumed:")
    assert "no GQA" in source and "head_dim 128" in source and "4 x hidden" in source


def test_cli_gemms_json_and_text():
    result = cli("gemms", "--set", "model=llama-3.1-8b", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) >= {"gpu", "machine_balance", "gemms"}
    assert data["gpu"] == "H20" and data["machine_balance"] == pytest.approx(37.0)
    row = data["gemms"][0]
    assert set(row) >= {
        "name",
        "m",
        "n",
        "k",
        "layers",
        "weights",
        "forward_flops_per_token",
        "intensity",
        "bound",
    }
    weights = sum(r["forward_flops_per_token"] for r in data["gemms"] if r["weights"])
    assert weights == 2 * models.load_shape("llama-3.1-8b").activated_params
    text = cli("gemms")
    assert text.returncode == 0 and "2N, N = 2,945,269,760" in text.stdout
    bad = cli("gemms", "--set", "attention_flops=half")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
