"""costmodel.inputs.models: shapes, layouts and parameter counts from published config.json files.

Expected counts: the project's reference shared/reference/models.md, copied below (transformers on the meta device, numel per tensor)
for the five configs there; for tests/configs/*.json the same method (transformers 5.24.0 on the
meta device), cross-checked with the published totals named in each test.
"""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.inputs.models import (
    BREAKDOWN_KEYS,
    PRESETS,
    SUPPORTED_MODEL_TYPES,
    ModelShape,
    load_config,
    load_shape,
    params_json,
    scenario_keys,
    shape_from_config,
)
from costmodel.present.params import params_text

REPO = Path(__file__).resolve().parents[2]
OWN = REPO / "tests" / "configs"
PRESET_DIR = REPO / "costmodel" / "inputs" / "presets"
#: sha256 of the published configs, as the project's reference copies (shared/reference/
#: hf-configs/, each with its public source) held them when the presets were copied.
PUBLISHED_SHA256 = {
    "llama-3.1-8b.json": "54acfad3cffe057640904ca8a1e83525e6551c70c7a04c641f5a9eda0bbf64bd",
    "qwen3-30b-a3b.json": "98a4cf452e3d94b7b22d8ddd515a3fe028f76404529460935e26770c4ab2b094",
    "qwen3-8b.json": "deaa300e5384a480c2cafd0db33cba0da89db8eeeb8ddc2b584b89bd46d52ffb",
    "qwen3-next-80b-a3b.json": "2d483c7cabad7c8704478ed4038fa7e7b2eff840bc00a118eccbe38e2b488303",
    "qwen3.6-35b-a3b.json": "a535dda50243c13dc2c55921451175d204d4f1f96b9322d4a8f47005a88fcd75",
}


def shared_config(name: str) -> str:
    """A published config, as shipped (unchanged) with the package's presets."""
    return str(PRESET_DIR / name)


# ---------------------------------------------------------------------------------------------
# counts that must match shared/reference/models.md exactly

# file: (total, active incl. embedding, embedding, lm_head)
MODELS_MD = {
    "qwen3.6-35b-a3b.json": (34_660_610_688, 3_454_988_928, 508_559_360, 508_559_360),
    "qwen3-next-80b-a3b.json": (79_674_391_296, 3_874_929_408, 311_164_928, 311_164_928),
    "qwen3-30b-a3b.json": (30_532_122_624, 3_353_032_704, 311_164_928, 311_164_928),
    "qwen3-8b.json": (8_190_735_360, 8_190_735_360, 622_329_856, 622_329_856),
    "llama-3.1-8b.json": (8_030_261_248, 8_030_261_248, 525_336_576, 525_336_576),
}

# activated_params (matmul N of 6ND), checked against transformers on the meta device by summing
# every >= 2-D parameter except the input embedding and conv1d, routed experts times k/E
ACTIVATED_N = {
    "qwen3.6-35b-a3b.json": 2_945_269_760,
    "qwen3-next-80b-a3b.json": 3_562_373_120,
    "qwen3-30b-a3b.json": 3_041_656_832,
    "qwen3-8b.json": 7_568_097_280,
    "llama-3.1-8b.json": 7_504_658_432,
    "meta-llama-3-8b.json": 7_504_658_432,
    "mixtral-8x7b.json": 12_748_587_008,
    "deepseek-v3.json": 36_624_596_992,
    "qwen2.5-7b.json": 7_070_285_824,
    "gpt2.json": 123_532_032,
    "gpt3-175b.json": 174_563_733_504,
    "redpajama-incite-base-3b-v1.json": 2_645_688_320,
    "mistral-7b-v0.1.json": 7_110_393_856,
    "mistral-7b-v0.3.json": 7_113_539_584,
    "gemma-2-9b.json": 9_241_100_288,
    "gemma-3-1b-it.json": 999_751_680,
    "nemotron-4b.json": 3_403_677_696,
    "deepseek-v2-lite.json": 2_451_308_544,
    "gpt-oss-20b.json": 3_607_142_400,
}


@pytest.mark.parametrize("name", sorted(MODELS_MD))
def test_counts_match_models_md(name):
    shape = load_shape(shared_config(name))
    total, active, embedding, lm_head = MODELS_MD[name]
    assert shape.total_params == total
    assert shape.activated_params_published == active
    assert shape.embedding_params == embedding
    assert shape.lm_head_params == lm_head
    assert shape.activated_params == ACTIVATED_N[name]


def test_preset_matches_the_shared_config_and_models_md():
    shape = load_shape("qwen3.6-35b-a3b")
    assert shape.name == "qwen3.6-35b-a3b"
    assert (shape.total_params, shape.activated_params_published) == MODELS_MD[
        "qwen3.6-35b-a3b.json"
    ][:2]
    assert shape.activated_params == 2_945_269_760


def test_preset_files_are_the_published_configs_unchanged():
    import hashlib

    for name, digest in PUBLISHED_SHA256.items():
        assert hashlib.sha256((PRESET_DIR / name).read_bytes()).hexdigest() == digest, name
    assert load_config("qwen3.6-35b-a3b") == json.loads(
        (PRESET_DIR / "qwen3.6-35b-a3b.json").read_text()
    )
    assert set(PRESETS) >= {"qwen3.6-35b-a3b"}
    for preset in PRESETS:
        assert isinstance(load_config(preset), dict)


def test_qwen36_facts_from_models_md():
    s = load_shape("qwen3.6-35b-a3b")
    assert s.model_type == "qwen3_5_moe"
    assert s.hidden_size == 2048 and s.num_layers == 40
    assert s.num_full_attention_layers == 10 and s.num_linear_attention_layers == 30
    assert [i for i, t in enumerate(s.layer_types) if t == "full_attention"] == list(
        range(3, 40, 4)
    )
    assert s.full_attention_every == 4
    assert (s.num_heads, s.head_dim, s.attention_dim, s.num_kv_heads) == (16, 256, 4096, 2)
    assert s.attention_output_gate
    assert (s.linear_num_key_heads, s.linear_num_value_heads) == (16, 32)
    assert (s.linear_key_head_dim, s.linear_value_head_dim, s.linear_conv_kernel_dim) == (
        128,
        128,
        4,
    )
    assert (s.num_experts, s.experts_per_token, s.moe_intermediate_size) == (256, 8, 512)
    assert s.shared_expert_intermediate_size == 512
    assert (s.num_moe_layers, s.num_dense_layers) == (40, 0)
    assert s.vocab_size == 248_320 and not s.tie_word_embeddings
    assert s.num_mtp_layers_excluded == 1
    # the course's N = 3e9 is the active count without the input embedding
    assert s.activated_params_published - s.embedding_params == 2_946_429_568


# ---------------------------------------------------------------------------------------------
# configs written for this project (tests/configs), with published totals


def own(name: str) -> ModelShape:
    return load_shape(str(OWN / name))


def test_llama3_8b():
    s = own("meta-llama-3-8b.json")
    assert s.total_params == 8_030_261_248  # published 8.03B
    assert round(s.total_params / 1e9, 2) == 8.03
    assert s.activated_params_published == s.total_params
    assert s.embedding_params == s.lm_head_params == 525_336_576
    assert s.activated_params == 7_504_658_432
    assert (s.num_heads, s.num_kv_heads, s.head_dim, s.attention_dim) == (32, 8, 128, 4096)
    assert s.full_attention_every == 1 and s.num_full_attention_layers == 32
    assert s.num_experts == 0 and s.num_dense_layers == 32


def test_mixtral_8x7b():
    s = own("mixtral-8x7b.json")
    assert s.total_params == 46_702_792_704  # published 46.7B
    assert s.activated_params_published == 12_879_925_248  # published 12.9B
    assert round(s.total_params / 1e9, 1) == 46.7
    assert round(s.activated_params_published / 1e9, 1) == 12.9
    assert s.activated_params == 12_748_587_008
    assert (s.num_experts, s.experts_per_token, s.num_moe_layers) == (8, 2, 32)
    b = s.breakdown
    assert b["routed_experts_active"] * 4 == b["routed_experts_total"]
    assert b["shared_experts"] == 0 and b["dense_mlp"] == 0


def test_deepseek_v3_without_mtp():
    s = own("deepseek-v3.json")
    assert s.total_params == 671_026_404_352  # published 671B (main model, MTP module excluded)
    assert s.activated_params_published == 37_552_282_624  # published 37B
    assert round(s.total_params / 1e9) == 671
    # DeepSeek's README_WEIGHTS gives 36.6B activated: the same count without the input embedding
    assert round((s.activated_params_published - s.embedding_params) / 1e9, 1) == 36.6
    assert s.activated_params == 36_624_596_992
    assert s.num_mtp_layers_excluded == 1
    assert s.mla and (s.q_lora_rank, s.kv_lora_rank) == (1536, 512)
    assert (s.qk_head_dim, s.v_head_dim) == (192, 128)
    assert s.attention_dim == 128 * (192 + 128) // 2 == 20_480
    assert s.num_heads * s.head_dim == s.attention_dim
    assert (s.num_dense_layers, s.num_moe_layers) == (3, 58)
    assert s.moe_layer_flags[:4] == (False, False, False, True)
    assert (s.num_experts, s.experts_per_token, s.shared_expert_intermediate_size) == (256, 8, 2048)


def test_qwen25_7b_biases_are_not_matmul_parameters():
    s = own("qwen2.5-7b.json")
    assert s.total_params == 7_615_616_512  # published 7.61B
    assert int(s.total_params / 1e7) == 761
    assert s.activated_params == 7_070_285_824
    b = s.breakdown
    # q/k/v biases (28 layers x (3584 + 512 + 512)) sit in norms_and_other
    norms = 28 * 2 * 3584 + 3584
    assert b["norms_and_other"] == norms + 28 * (3584 + 512 + 512)


def test_qwen3_next_and_30b_published_rounding():
    nxt = load_shape(shared_config("qwen3-next-80b-a3b.json"))
    assert round(nxt.total_params / 1e9) == 80 and round(nxt.activated_params_published / 1e9) == 4
    assert nxt.activated_params < 3.6e9
    q30 = load_shape(shared_config("qwen3-30b-a3b.json"))
    assert (
        round(q30.total_params / 1e9, 1) == 30.5
        and round(q30.activated_params_published / 1e9, 1) == 3.4
    )


# ---------------------------------------------------------------------------------------------
# invariants of the breakdown


ALL_CONFIGS = [f"shared:{n}" for n in sorted(MODELS_MD)] + [
    f"own:{p.name}" for p in sorted(OWN.glob("*.json"))
]


def _load(spec: str) -> ModelShape:
    kind, name = spec.split(":", 1)
    return load_shape(shared_config(name)) if kind == "shared" else own(name)


@pytest.mark.parametrize("spec", ALL_CONFIGS)
def test_breakdown_adds_up(spec):
    s = _load(spec)
    b = s.breakdown
    assert tuple(b) == BREAKDOWN_KEYS
    stored = sum(v for k, v in b.items() if k not in ("routed_experts_active", "lm_head"))
    assert s.total_params == stored + (0 if s.tie_word_embeddings else b["lm_head"])
    assert s.activated_params == sum(
        b[k]
        for k in (
            "attention",
            "linear_attention",
            "router",
            "routed_experts_active",
            "shared_experts",
            "dense_mlp",
            "lm_head",
        )
    )
    assert (
        s.activated_params_published
        == s.total_params - b["routed_experts_total"] + b["routed_experts_active"]
    )
    assert s.num_layers == s.num_full_attention_layers + s.num_linear_attention_layers
    assert s.num_layers == s.num_moe_layers + s.num_dense_layers
    assert ACTIVATED_N[spec.split(":", 1)[1]] == s.activated_params


# ---------------------------------------------------------------------------------------------
# text_config nesting, tying, layouts


def _qwen36() -> dict:
    return copy.deepcopy(load_config("qwen3.6-35b-a3b"))


def test_text_config_alone_gives_the_same_shape():
    wrapped = shape_from_config(_qwen36())
    text_only = shape_from_config(_qwen36()["text_config"])
    assert text_only.model_type == "qwen3_5_moe"
    assert text_only.total_params == wrapped.total_params
    assert text_only.activated_params == wrapped.activated_params
    assert text_only.layer_types == wrapped.layer_types


def test_text_config_fields_win_over_the_wrapper():
    cfg = _qwen36()
    cfg["hidden_size"] = 999  # a wrapper field must not leak into the text model
    assert shape_from_config(cfg).hidden_size == 2048


def test_tied_embeddings_counted_once_but_lm_head_stays_in_N():
    cfg = _qwen36()
    untied = shape_from_config(cfg)
    cfg["text_config"]["tie_word_embeddings"] = True
    cfg["tie_word_embeddings"] = True
    tied = shape_from_config(cfg)
    assert tied.tie_word_embeddings
    assert tied.total_params == untied.total_params - untied.lm_head_params == 34_152_051_328
    assert tied.activated_params_published == 2_946_429_568
    assert tied.activated_params == untied.activated_params
    assert tied.lm_head_params == untied.lm_head_params


def test_tie_from_wrapper_when_text_config_is_silent():
    cfg = _qwen36()
    del cfg["text_config"]["tie_word_embeddings"]
    cfg["tie_word_embeddings"] = True
    assert shape_from_config(cfg).tie_word_embeddings


def test_tied_small_qwen2_matches_transformers():
    # Qwen2.5-3B (tie_word_embeddings true): 3,085,938,688 parameters on the meta device
    cfg = {
        "model_type": "qwen2",
        "hidden_size": 2048,
        "intermediate_size": 11008,
        "num_attention_heads": 16,
        "num_hidden_layers": 36,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    }
    s = shape_from_config(cfg)
    assert s.total_params == s.activated_params_published == 3_085_938_688
    assert s.activated_params == 3_085_697_024


def test_layout_from_full_attention_interval():
    s = load_shape(shared_config("qwen3-next-80b-a3b.json"))
    assert s.full_attention_every == 4
    assert s.num_full_attention_layers == 12 and s.num_linear_attention_layers == 36
    assert s.layer_types[:4] == ("linear_attention",) * 3 + ("full_attention",)
    assert s.attention_output_gate and s.attention_dim == 16 * 256


def test_layout_default_interval_and_layer_types_win():
    cfg = json.loads(Path(shared_config("qwen3-next-80b-a3b.json")).read_text())
    cfg.pop("full_attention_interval")
    assert shape_from_config(cfg).full_attention_every == 4  # transformers' default
    cfg["num_hidden_layers"] = 6
    cfg["layer_types"] = [
        "linear_attention",
        "full_attention",
        "full_attention",
        "linear_attention",
        "linear_attention",
        "full_attention",
    ]
    cfg["full_attention_interval"] = 2
    s = shape_from_config(cfg)
    assert s.num_full_attention_layers == 3
    assert s.full_attention_every is None


def test_nonperiodic_layout_and_scenario_keys():
    cfg = json.loads(Path(shared_config("qwen3-next-80b-a3b.json")).read_text())
    cfg["num_hidden_layers"] = 6
    cfg["layer_types"] = [
        "linear_attention",
        "full_attention",
        "full_attention",
        "linear_attention",
        "linear_attention",
        "full_attention",
    ]
    cfg["mlp_only_layers"] = [1]
    s = shape_from_config(cfg)
    keys = scenario_keys(s)
    assert keys["full_attention_every"] == 2
    assert s.num_layers // keys["full_attention_every"] == s.num_full_attention_layers
    # checked against transformers on the meta device
    assert s.total_params == 8_910_805_056
    assert s.activated_params_published == 1_015_027_776
    assert s.activated_params == 703_735_808
    assert (s.num_moe_layers, s.num_dense_layers) == (5, 1)


def test_scenario_keys_impossible_layout_raises():
    cfg = json.loads(Path(shared_config("qwen3-next-80b-a3b.json")).read_text())
    cfg["num_hidden_layers"] = 10
    cfg["layer_types"] = ["full_attention"] * 4 + ["linear_attention"] * 6
    s = shape_from_config(cfg)
    assert s.full_attention_every is None
    with pytest.raises(CostModelError) as err:
        scenario_keys(s)
    assert "\n" not in str(err.value)


def test_no_full_attention_layer():
    cfg = json.loads(Path(shared_config("qwen3-next-80b-a3b.json")).read_text())
    cfg["num_hidden_layers"] = 3
    cfg["layer_types"] = ["linear_attention"] * 3
    s = shape_from_config(cfg)
    assert s.num_full_attention_layers == 0 and s.full_attention_every is None
    assert s.num_layers // scenario_keys(s)["full_attention_every"] == 0


def test_qwen3_moe_dense_layers_from_mlp_only_and_sparse_step():
    cfg = json.loads(Path(shared_config("qwen3-30b-a3b.json")).read_text())
    cfg.update(
        num_hidden_layers=8, mlp_only_layers=[0, 5], decoder_sparse_step=2, attention_bias=True
    )
    s = shape_from_config(cfg)
    assert s.moe_layer_flags == (False, True, False, True, False, False, False, True)
    assert (s.num_moe_layers, s.num_dense_layers) == (3, 5)
    # checked against transformers on the meta device
    assert s.total_params == 2_774_888_448
    assert s.activated_params_published == 1_076_195_328
    assert s.activated_params == 764_936_192


def test_llama_biases_and_tied_embeddings():
    cfg = json.loads((OWN / "meta-llama-3-8b.json").read_text())
    cfg.update(attention_bias=True, mlp_bias=True, tie_word_embeddings=True, num_hidden_layers=4)
    s = shape_from_config(cfg)
    # checked against transformers on the meta device
    assert s.total_params == s.activated_params_published == 1_397_960_704
    assert s.activated_params == 1_397_751_808


def test_deepseek_without_q_lora():
    cfg = json.loads((OWN / "deepseek-v3.json").read_text())
    cfg.update(q_lora_rank=None, num_hidden_layers=5, first_k_dense_replace=2, attention_bias=True)
    s = shape_from_config(cfg)
    assert s.q_lora_rank == 0
    # checked against transformers on the meta device
    assert s.total_params == 38_179_231_040
    assert s.activated_params_published == 5_413_328_192
    assert s.activated_params == 4_486_529_024


def test_llama_every_layer_full():
    s = load_shape(shared_config("llama-3.1-8b.json"))
    assert s.layer_types == ("full_attention",) * 32
    assert s.full_attention_every == 1
    assert scenario_keys(s)["full_attention_every"] == 1


# ---------------------------------------------------------------------------------------------
# outputs


def test_scenario_keys_for_the_course_model():
    keys = scenario_keys(load_shape("qwen3.6-35b-a3b"))
    assert keys == {
        "activated_params": 2_945_269_760,
        "total_params": 34_660_610_688,
        "hidden_size": 2048,
        "num_layers": 40,
        "full_attention_every": 4,
        "num_heads": 16,
        "head_dim": 256,
        "attention_dim": 4096,
        "num_experts": 256,
        "experts_per_token": 8,
        "vocab_size": 248_320,
        "ffn_hidden_size": None,  # no dense layer
        "mlp_activation": "swiglu",
        "num_kv_heads": 2,
        "moe_ffn_hidden_size": 512,
        "shared_experts": 1,
        "first_dense_layers": 0,
    }


def test_params_json_is_json_and_complete():
    data = params_json(load_shape("qwen3.6-35b-a3b"))
    json.dumps(data)
    for key in (
        "total_params",
        "activated_params",
        "activated_params_published",
        "embedding_params",
        "lm_head_params",
        "attention_dim",
        "num_layers",
        "num_full_attention_layers",
        "num_experts",
        "experts_per_token",
        "breakdown",
    ):
        assert key in data
    assert set(data["breakdown"]) == set(BREAKDOWN_KEYS)
    assert data["activated_params"] == 2_945_269_760


def test_params_text_says_which_N_is_which():
    text = params_text(load_shape("qwen3.6-35b-a3b"))
    assert "the N of 6ND, input embedding excluded" in text
    assert "published active count, includes the input embedding" in text
    assert "2,945,269,760" in text and "3,454,988,928" in text and "34,660,610,688" in text
    assert "10 full attention, 30 linear attention" in text
    rows = [
        line for line in text.splitlines() if line.startswith(("total_params", "activated_params"))
    ]
    # numbers right-aligned in one column
    ends = {line.index("B ") for line in rows}
    assert len(ends) == 1


# ---------------------------------------------------------------------------------------------
# errors: one line, naming the field, the value and what is allowed


def _one_line_error(fn, *args):
    with pytest.raises(CostModelError) as err:
        fn(*args)
    message = str(err.value)
    assert message and "\n" not in message
    return message


def test_unknown_model_type():
    message = _one_line_error(shape_from_config, {"model_type": "gpt_bigcode", "hidden_size": 8})
    assert "model_type" in message and "'gpt_bigcode'" in message
    for supported in SUPPORTED_MODEL_TYPES:
        assert supported in message


def test_missing_model_type():
    message = _one_line_error(shape_from_config, {"hidden_size": 8})
    assert "model_type" in message and "llama" in message


def test_missing_required_field():
    cfg = json.loads(Path(shared_config("llama-3.1-8b.json")).read_text())
    del cfg["hidden_size"]
    message = _one_line_error(shape_from_config, cfg)
    assert "hidden_size" in message and "missing" in message


def test_malformed_field():
    cfg = json.loads(Path(shared_config("llama-3.1-8b.json")).read_text())
    cfg["num_hidden_layers"] = "thirty-two"
    message = _one_line_error(shape_from_config, cfg)
    assert "num_hidden_layers" in message and "thirty-two" in message
    cfg["num_hidden_layers"] = 0
    assert "num_hidden_layers" in _one_line_error(shape_from_config, cfg)


def test_bad_layer_types():
    cfg = _qwen36()
    cfg["text_config"]["layer_types"][0] = "sliding_attention"
    message = _one_line_error(shape_from_config, cfg)
    assert "layer_types" in message and "sliding_attention" in message
    cfg = _qwen36()
    cfg["text_config"]["layer_types"] = cfg["text_config"]["layer_types"][:5]
    assert "layer_types" in _one_line_error(shape_from_config, cfg)


def test_too_many_experts_per_token():
    cfg = json.loads(Path(shared_config("qwen3-30b-a3b.json")).read_text())
    cfg["num_experts_per_tok"] = 129
    assert "num_experts_per_tok" in _one_line_error(shape_from_config, cfg)


def test_missing_file(tmp_path):
    message = _one_line_error(load_config, str(tmp_path / "nope.json"))
    assert "nope.json" in message and "qwen3.6-35b-a3b" in message


def test_bad_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",\n  "hidden_size": }')
    message = _one_line_error(load_config, str(path))
    assert "config.json" in message and "JSON" in message and "line 2" in message


def test_json_that_is_not_an_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    assert "object" in _one_line_error(load_config, str(path))


def test_errors_are_value_errors():
    assert issubclass(CostModelError, ValueError)


# ---------------------------------------------------------------------------------------------
# start-up cost


def test_import_is_light():
    code = (
        "import sys, costmodel.inputs.models\n"
        "heavy = [m for m in ('sympy', 'numpy', 'torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
