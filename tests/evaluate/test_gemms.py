"""The model's GEMMs from the real shapes (costmodel.evaluate.simulate.gemms.model_gemms, `costmodel gemms`)."""

import json
from pathlib import Path

import pytest
from commands import cli

from costmodel.evaluate.plan import layouts
from costmodel.evaluate.simulate import gemms
from costmodel.inputs import models, scenario
from costmodel.inputs.config import PRESETS
from costmodel.present.gemms import render_gemms

REPO = Path(__file__).resolve().parents[2]
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


def test_every_mtp_config_is_covered():
    # the presets qwen3.6-35b-a3b and deepseek-v3, and the test config deepseek-v3.json
    assert sum(mtp for _, mtp in CASES) == 3


@pytest.mark.parametrize("model, count_mtp", CASES)
def test_weight_rows_sum_to_exactly_2n(model, count_mtp):
    shape = models.load_shape(model)
    sc = scenario.resolve(data={"model": model, "count_mtp": count_mtp})
    for batch in (1, 3):
        rows = gemms.model_gemms(sc, batch)
        assert gemms.weight_flops_per_token(rows) == 2 * sc["activated_params"]
    n = shape.activated_params + (shape.mtp_activated_params if count_mtp else 0)
    assert sc["activated_params"] == n  # N as `costmodel params` gives it


def test_gqa_width_of_llama_70b(tmp_path):
    sc = scenario.resolve(data={"model": llama_70b(tmp_path)})
    rows = by_key(gemms.model_gemms(sc))
    assert rows["qkv"]["n"] == 8192 + 2 * 1024 == 10240  # not 3 x 8192
    assert rows["dense_gate_up"]["n"] == 2 * 28672 and rows["dense_down"]["k"] == 28672
    assert rows["qkv"]["layers"] == 80 and rows["lm_head"]["n"] == 128256


def test_deepseek_v3_rows_from_its_config():
    sc = scenario.resolve(data={"model": str(REPO / "tests" / "configs" / "deepseek-v3.json")})
    rows = by_key(gemms.model_gemms(sc))
    assert rows["dense_down"]["k"] == 18432 and rows["dense_down"]["layers"] == 3  # not 4 x 7168
    assert rows["expert_down"]["k"] == 2048 and rows["expert_down"]["layers"] == 58
    assert (rows["q_a"]["n"], rows["q_b"]["k"], rows["q_b"]["n"]) == (1536, 1536, 128 * 192)
    assert rows["kv_a"]["n"] == 512 + 64 and rows["kv_b"]["n"] == 128 * (128 + 128)
    assert rows["attention_output"]["k"] == 128 * 128
    assert rows["attention_scores"]["k"] == 192 and rows["attention_values"]["n"] == 128
    assert "qkv" not in rows


def test_course_gemms(course, course_account):
    rows = by_key(gemms.model_gemms(course))
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
    full = by_key(gemms.model_gemms(course))
    causal = scenario.resolve(overrides={"attention_flops": "causal"})
    half = by_key(gemms.model_gemms(causal))
    for key in ("attention_scores", "attention_values"):
        assert half[key]["forward_flops_per_token"] == full[key]["forward_flops_per_token"] / 2
    assert half["qkv"] == full["qkv"]


def test_weight_gemms_grow_with_micro_batch(course):
    one = by_key(gemms.model_gemms(course, 1))
    four = by_key(gemms.model_gemms(course, 4))
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
    rows = by_key(gemms.model_gemms(sc))
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


# The layout: the rows are one GPU's (TP splits the projections, CP the sequence, EP the experts'
# rows); forward_flops_per_token stays the whole model's per token.


@pytest.mark.parametrize(
    "model", ["course", "llama-3.1-8b", str(REPO / "tests" / "configs" / "deepseek-v3.json")]
)
def test_the_values_of_a_scenario_give_the_rows_of_the_scenario(model):
    """A resolved Scenario has every layout key (no layout-free call); a mapping of its values
    is refused (the evaluate layer takes a Scenario)."""
    data = {} if model == "course" else {"model": model}
    sc = scenario.resolve(data=data)
    assert (sc.tensor_parallel, sc.context_parallel) == (1, 1)
    assert not sc.sequence_parallel
    rows = gemms.model_gemms(sc)
    assert rows == gemms.model_gemms(sc)
    assert all(r["per_gpu_fraction"] == 1 for r in rows)
    for batch in (1, 3):
        with pytest.raises(TypeError, match="a resolved Scenario"):
            gemms.model_gemms(dict(sc.values), batch)


def llama_8b(**layout):
    return scenario.resolve(data={"model": "llama-3.1-8b", "num_gpus": 40, **layout})


def test_tensor_parallel_splits_llama_8b_by_hand():
    one = by_key(gemms.model_gemms(llama_8b()))
    sc = llama_8b(tensor_parallel=4)
    rows = by_key(gemms.model_gemms(sc))
    # column parallel: n / 4; row parallel: k / 4; the token rows unchanged
    assert (rows["qkv"]["k"], rows["qkv"]["n"]) == (4096, (32 + 2 * 8) * 128 // 4) == (4096, 1536)
    assert (rows["attention_output"]["k"], rows["attention_output"]["n"]) == (4096 // 4, 4096)
    assert rows["dense_gate_up"]["n"] == 2 * 14336 // 4 == 7168
    assert (rows["dense_down"]["k"], rows["dense_down"]["n"]) == (14336 // 4, 4096)
    assert rows["lm_head"]["n"] == 128256 // 4 == 32064  # vocabulary-parallel
    assert all(rows[key]["m"] == 49152 for key in rows)
    # the core: 32 / 4 = 8 heads per GPU, each still 49,152 x 49,152
    core = rows["attention_scores"]
    assert (core["m"], core["k"], core["n"], core["uses_per_token"]) == (49152, 128, 49152, 8)
    # by hand: 2 m n k / (2 (m k + k n + m n)), m = 49152, k = 4096, n = 1536
    assert rows["qkv"]["intensity"] == pytest.approx(
        49152 * 1536 * 4096 / (49152 * 4096 + 4096 * 1536 + 49152 * 1536), rel=1e-12
    )
    # the whole model's FLOPs per token, one GPU does a quarter of each row's
    for key, row in rows.items():
        assert row["forward_flops_per_token"] == one[key]["forward_flops_per_token"]
        assert row["per_gpu_fraction"] == 1 / 4
    n = models.load_shape("llama-3.1-8b").activated_params
    assert gemms.weight_flops_per_token(rows.values()) == 2 * n == 2 * sc["activated_params"]
    per_gpu = sum(
        r["forward_flops_per_token"] * r["per_gpu_fraction"] for r in rows.values() if r["weights"]
    )
    assert per_gpu == 2 * n / 4
    assert sum(r["forward_flops_per_token"] * r["per_gpu_fraction"] for r in rows.values()) == (
        sum(r["forward_flops_per_token"] for r in one.values()) / 4
    )


def test_context_parallel_splits_the_sequence_of_llama_8b_by_hand():
    one = by_key(gemms.model_gemms(llama_8b(), 2))
    rows = by_key(gemms.model_gemms(llama_8b(context_parallel=2), 2))
    for key, row in rows.items():
        if row["weights"]:  # micro batch x seq_len / CP rows, the weights whole
            assert row["m"] == 2 * 49152 / 2 == 49152
            assert (row["k"], row["n"]) == (one[key]["k"], one[key]["n"])
        assert row["forward_flops_per_token"] == one[key]["forward_flops_per_token"]
        assert row["per_gpu_fraction"] == 1
    # each rank's 24,576 queries against all 49,152 keys (ring attention), 32 heads
    scores, values = rows["attention_scores"], rows["attention_values"]
    assert (scores["m"], scores["k"], scores["n"]) == (49152 / 2, 128, 49152)
    assert (values["m"], values["k"], values["n"]) == (49152 / 2, 49152, 128)
    assert scores["uses_per_token"] == 32
    # QK^T per head: 2 x 24576 x 49152 x 128 FLOPs over (24576 x 128 + 128 x 49152 + 24576 x
    # 49152) elements of 2 bytes
    assert scores["intensity"] == pytest.approx(
        24576 * 49152 * 128 / (24576 * 128 + 128 * 49152 + 24576 * 49152), rel=1e-12
    )


def test_tp_and_cp_together_on_llama_8b():
    rows = by_key(gemms.model_gemms(llama_8b(tensor_parallel=4, context_parallel=2)))
    assert (rows["qkv"]["m"], rows["qkv"]["n"]) == (24576, 1536)
    assert (rows["dense_down"]["m"], rows["dense_down"]["k"]) == (24576, 3584)
    core = rows["attention_scores"]
    assert (core["m"], core["n"], core["uses_per_token"]) == (24576, 49152, 8)


def test_mla_under_tp_8_with_sequence_parallel():
    config = str(REPO / "tests" / "configs" / "deepseek-v3.json")
    one = by_key(gemms.model_gemms(scenario.resolve(data={"model": config})))
    sc = scenario.resolve(
        data={"model": config, "num_gpus": 64, "tensor_parallel": 8, "sequence_parallel": True}
    )
    assert (sc["data_parallel"], sc["expert_parallel"]) == (8, 8)
    rows = by_key(gemms.model_gemms(sc))
    # q_b and kv_b column parallel, the output row parallel: 128 heads / 8 = 16 per GPU
    assert rows["q_b"]["n"] == 16 * 192 and rows["kv_b"]["n"] == 16 * (128 + 128)
    assert rows["attention_output"]["k"] == 16 * 128
    # q_a, kv_a (Megatron's duplicated TELinear), the router: whole weights, and under
    # sequence parallelism each TP rank's 1/8 of the tokens
    for key in ("q_a", "kv_a", "router"):
        assert (rows[key]["k"], rows[key]["n"]) == (one[key]["k"], one[key]["n"])
        assert rows[key]["m"] == 49152 / 8 and rows[key]["per_gpu_fraction"] == 1 / 8
    assert rows["q_b"]["m"] == 49152  # the column-parallel GEMMs see the gathered sequence
    # experts with expert TP = TP: 2 x 2048 / 8 wide gate+up, 2048 / 8 deep down; the rows of an
    # EP group of 8: 8 x 49,152 x 8 / 256
    assert rows["expert_gate_up"]["n"] == 2 * 2048 // 8 and rows["expert_down"]["k"] == 256
    assert rows["expert_gate_up"]["m"] == one["expert_gate_up"]["m"] == 8 * 49152 * 8 / 256
    assert rows["dense_gate_up"]["n"] == 2 * 18432 // 8 and rows["dense_down"]["k"] == 2304
    assert rows["lm_head"]["n"] == 129280 // 8
    assert rows["attention_scores"]["uses_per_token"] == 16
    assert gemms.weight_flops_per_token(rows.values()) == 2 * sc["activated_params"]
    without_sp = scenario.resolve(data={"model": config, "num_gpus": 64, "tensor_parallel": 8})
    replicated = by_key(gemms.model_gemms(without_sp))["router"]
    assert replicated["m"] == 49152 and replicated["per_gpu_fraction"] == 1


def test_kv_heads_fewer_than_tp_are_replicated(course):
    sc = scenario.resolve(overrides={"tensor_parallel": 4})
    qkv = by_key(gemms.model_gemms(sc))["qkv"]
    # Qwen3.6: 16 / 4 query heads x 256 doubled by the gate, and one of the 2 KV heads each
    assert qkv["n"] == 4 * 256 * 2 + 2 * 1 * 256 == 2560
    assert qkv["per_gpu_fraction"] == 2560 / 9216
    assert "2 KV heads at TP 4: 1 per GPU, replicated" in qkv["source"]
    whole = by_key(gemms.model_gemms(course))["qkv"]
    assert qkv["forward_flops_per_token"] == whole["forward_flops_per_token"]


def test_context_parallel_sets_the_expert_rows(course):
    sc = scenario.resolve(overrides={"context_parallel": 2, "expert_parallel": 4})
    rows = by_key(gemms.model_gemms(sc))
    # an EP group of 4 ranks, each with 49,152 / 2 tokens, 8 of 256 experts per token
    assert rows["expert_gate_up"]["m"] == 4 * 49152 / 2 * 8 / 256 == 3072
    assert rows["router"]["m"] == rows["shared_gate_up"]["m"] == 24576


@pytest.mark.parametrize("model, count_mtp", CASES)
@pytest.mark.parametrize("tp, cp, sp", [(2, 1, False), (4, 4, True)])
def test_per_gpu_shapes_add_up_to_the_per_token_figures(model, count_mtp, tp, cp, sp):
    """Whatever the layout the weight rows sum to 2N, and one GPU's FLOPs per micro batch
    from its shapes (2 m k n per GEMM: E / EP experts, b sequences x heads / TP for the core)
    are forward_flops_per_token x per_gpu_fraction for each of its b x s / c tokens."""
    layout = {"tensor_parallel": tp, "context_parallel": cp, "sequence_parallel": sp}
    sc = scenario.resolve(data={"model": model, "count_mtp": count_mtp, "num_gpus": 64, **layout})
    shape = models.load_shape(model)
    batch = 2
    rows = gemms.model_gemms(sc, batch)
    assert gemms.weight_flops_per_token(rows) == 2 * sc["activated_params"]
    for row in rows:
        gemm = 2 * row["m"] * row["k"] * row["n"] * row["layers"]
        if row["key"].startswith("expert_"):
            gemm *= shape.num_experts / sc["expert_parallel"]
        elif not row["weights"]:
            gemm *= batch * row["uses_per_token"]
            assert row["uses_per_token"] == shape.num_heads / tp
            if sc["attention_flops"] != "full":
                continue
        tokens = batch * sc["seq_len"] / cp
        assert gemm == pytest.approx(
            row["forward_flops_per_token"] * row["per_gpu_fraction"] * tokens, rel=1e-12
        ), row["key"]


def test_text_header_names_the_layout(course):
    table = gemms.gemm_table(scenario.resolve(overrides={"num_gpus": 32, "tensor_parallel": 4}))
    assert table["layout"] == {
        "tensor_parallel": 4,
        "context_parallel": 1,
        "expert_parallel": 8,
        "sequence_parallel": False,
    }
    text = render_gemms(table)
    assert "per GPU: TP 4, CP 1, EP 8," in text.splitlines()[0]
    assert "GPU share" in text and "1/4" in text
    course_text = render_gemms(gemms.gemm_table(course))
    assert "per GPU: TP 1, CP 1, EP 8," in course_text and "GPU share" not in course_text
    assert all("per_gpu_fraction" in row for row in table["gemms"])


def test_numeric_intensity_forms_are_the_derived_ones():
    """The numeric intensity (derive.roofline.intensity, the one evaluate.simulate.gemms uses) equals
    derive.roofline.gemm_intensity, and evaluate.simulate.gemms' limit derive.moe.intensity_limit
    (SymPy's limit m -> oo)."""
    import random

    from costmodel.derive import moe
    from costmodel.derive.roofline import gemm_intensity, intensity
    from costmodel.derive.symbols import bytes_per_element, k_dim, m, n
    from costmodel.evaluate.simulate import gemms as g

    rng = random.Random(0)
    for _ in range(20):
        m_, n_, k_ = (rng.randint(1, 1 << 20) for _ in range(3))
        beta = rng.choice((1, 2, 4))
        values = {m: m_, n: n_, k_dim: k_, bytes_per_element: beta}
        assert intensity(m_, n_, k_, beta) == pytest.approx(float(gemm_intensity.subs(values)))
        assert g._limit(n_, k_, beta) == pytest.approx(float(moe.intensity_limit.subs(values)))
