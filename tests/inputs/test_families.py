"""The model families of the published runs (issue 19, item 3): GPT-2/GPT-3, GPT-NeoX, Mistral,
Gemma 2/3, Nemotron, DeepSeek-V2, GPT-OSS (Qwen3-Next is a preset already), their exact parameter
counts against transformers on the meta device, the new presets, `costmodel params` for each, and
a two-matrix GELU MLP in the counts, the GEMM list and the saved-tensor rules.

The expected counts below were read from transformers 5.24.0 on the meta device (the test
`test_counts_match_transformers_on_the_meta_device` recounts them whenever torch is installed, as
in CI), and each agrees with the total its publisher states (named in each row)."""

import json
from pathlib import Path

import pytest
import sympy as sp
from commands import cli
from conftest import missing

from costmodel.derive import activations as act
from costmodel.derive.symbols import b_micro, h, s, t_p
from costmodel.errors import CostModelError
from costmodel.evaluate.simulate import gemms
from costmodel.inputs import models, scenario
from costmodel.inputs.models import SUPPORTED_MODEL_TYPES, load_shape, shape_from_config

REPO = Path(__file__).resolve().parents[2]
OWN = REPO / "tests" / "configs"

NEW_FAMILIES = (
    "gpt2",
    "gpt_neox",
    "mistral",
    "gemma2",
    "gemma3_text",
    "nemotron",
    "deepseek_v2",
    "gpt_oss",
)

#: config (tests/configs or a preset): model_type, total, N (activated_params), published active
#: (input embedding included), embedding (token + learned positions).
COUNTS = {
    "gpt2.json": ("gpt2", 124_439_808, 123_532_032, 124_439_808, 39_383_808),
    "gpt3-175b.json": ("gpt2", 174_604_259_328, 174_563_733_504, 174_604_259_328, 642_723_840),
    "redpajama-incite-base-3b-v1.json": (
        "gpt_neox",
        2_775_864_320,
        2_645_688_320,
        2_775_864_320,
        129_105_920,
    ),
    "mistral-7b-v0.1.json": ("mistral", 7_241_732_096, 7_110_393_856, 7_241_732_096, 131_072_000),
    "mistral-7b-v0.3.json": ("mistral", 7_248_023_552, 7_113_539_584, 7_248_023_552, 134_217_728),
    "gemma-2-9b.json": ("gemma2", 9_241_705_984, 9_241_100_288, 9_241_705_984, 917_504_000),
    "gemma-3-1b-it.json": ("gemma3_text", 999_885_952, 999_751_680, 999_885_952, 301_989_888),
    "nemotron-4b.json": ("nemotron", 4_190_509_056, 3_403_677_696, 4_190_509_056, 786_432_000),
    "deepseek-v2-lite.json": (
        "deepseek_v2",
        15_706_484_224,
        2_451_308_544,
        2_661_150_208,
        209_715_200,
    ),
    "gpt-oss-20b.json": ("gpt_oss", 20_914_757_184, 3_607_142_400, 4_193_246_784, 579_133_440),
    "llama-3.1-70b": ("llama", 70_553_706_496, 69_501_714_432, 70_553_706_496, 1_050_673_152),
    "llama-3.1-405b": ("llama", 405_853_388_800, 403_747_897_344, 405_853_388_800, 2_101_346_304),
    "deepseek-v3": ("deepseek_v3", 671_026_404_352, 36_624_596_992, 37_552_282_624, 926_679_040),
}

NEW_PRESETS = ("llama-3.1-70b", "llama-3.1-405b", "deepseek-v3")


def where(name: str) -> str:
    return name if name in NEW_PRESETS else str(OWN / name)


def config(name: str) -> dict:
    return json.loads((OWN / name).read_text())


def test_every_family_of_the_published_runs_is_supported():
    assert set(NEW_FAMILIES) | {"qwen3_next"} <= set(SUPPORTED_MODEL_TYPES)
    assert {COUNTS[name][0] for name in COUNTS} >= set(NEW_FAMILIES)
    assert set(NEW_PRESETS) <= set(models.PRESETS)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts(name):
    model_type, total, n, published, embedding = COUNTS[name]
    shape = load_shape(where(name))
    assert shape.model_type == model_type
    assert shape.total_params == total
    assert shape.activated_params == n
    assert shape.activated_params_published == published
    assert shape.embedding_params == embedding


def test_counts_agree_with_what_the_publishers_state():
    def total(name):
        return load_shape(where(name)).total_params

    assert round(total("gpt2.json") / 1e6) == 124  # GPT-2 small, 124M
    assert round(total("gpt3-175b.json") / 1e9) == 175  # Brown et al. 2020, Table 2.1
    assert round(total("redpajama-incite-base-3b-v1.json") / 1e9, 1) == 2.8
    assert round(total("mistral-7b-v0.1.json") / 1e9, 2) == 7.24
    # Gemma 2 report, Table 2 (9B): 917,504,000 embedding + 8,324,201,984 non-embedding
    gemma2 = load_shape(where("gemma-2-9b.json"))
    assert gemma2.embedding_params == 917_504_000
    assert gemma2.total_params - gemma2.embedding_params == 8_324_201_984
    # Gemma 3 report, Table 1 (1B): 302M embedding, 698M non-embedding
    gemma3 = load_shape(where("gemma-3-1b-it.json"))
    assert round(gemma3.embedding_params / 1e6) == 302
    assert round((gemma3.total_params - gemma3.embedding_params) / 1e6) == 698
    # DeepSeek-V2 paper: V2-Lite has 15.7B parameters, 2.4B of them activated per token
    lite = load_shape(where("deepseek-v2-lite.json"))
    assert round(lite.total_params / 1e9, 1) == 15.7
    assert 2.4e9 <= lite.activated_params_published - lite.embedding_params < 2.5e9
    # gpt-oss model card: 20.91B total, 3.61B active (the unembedding in, the embedding out)
    oss = load_shape(where("gpt-oss-20b.json"))
    assert round(oss.total_params / 1e9, 2) == 20.91
    assert round((oss.activated_params_published - oss.embedding_params) / 1e9, 2) == 3.61
    assert round(total("llama-3.1-405b") / 1e9) == 406  # Meta's "405B" is 405.85B
    assert round(total("deepseek-v3") / 1e9) == 671


# ---------------------------------------------------------------------------------------------
# transformers on the meta device (the [validate] extra; CI installs it)


def _transformers():
    try:
        import torch
        import transformers
    except ImportError as exc:
        missing(
            f"torch/transformers not importable ({exc}); pip install -r validate-requirements.txt"
        )
    return torch, transformers


def _meta_model(cfg: dict):
    """The causal LM of a config.json, built on the meta device (no memory, no weights)."""
    torch, transformers = _transformers()
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    built = transformers.CONFIG_MAPPING[cfg["model_type"]](**fields)
    if cfg["model_type"] == "gemma3":  # the language model of the multimodal wrapper
        built = built.text_config
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(built)


def _meta_counts(model, experts_share: float) -> tuple[int, float, int]:
    """(every parameter, the matmul parameters per token N, the input embeddings): N sums each
    matrix (2-D) outside the embeddings and biases, routed experts' stacked matrices (3-D, one
    per expert) times k/E; a tied lm_head is its own Linear module, so it is counted too."""
    torch, _ = _transformers()
    total = sum(p.numel() for p in model.parameters())
    matmul, embedding = 0.0, 0
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if isinstance(module, torch.nn.Embedding):
                embedding += p.numel()
            elif name.endswith("bias") or p.dim() < 2:
                continue
            elif p.dim() == 2:
                matmul += p.numel()
            else:
                matmul += p.numel() * experts_share
    return total, matmul, embedding


@pytest.mark.flop_counter
@pytest.mark.parametrize("name", sorted(COUNTS))
def test_counts_match_transformers_on_the_meta_device(name):
    cfg = models.load_config(where(name))
    model = _meta_model(cfg)
    shape = load_shape(where(name))
    share = shape.experts_per_token / shape.num_experts if shape.is_moe else 1.0
    total, matmul, embedding = _meta_counts(model, share)
    assert total == shape.total_params == COUNTS[name][1]
    assert matmul == shape.activated_params == COUNTS[name][2]
    assert embedding == shape.embedding_params == COUNTS[name][4]


@pytest.mark.flop_counter
def test_the_gemma3_wrapper_counts_its_language_model():
    cfg = {"model_type": "gemma3", "text_config": config("gemma-3-1b-it.json")}
    total, _, _ = _meta_counts(_meta_model(cfg), 1.0)
    assert total == shape_from_config(cfg).total_params == 999_885_952


# ---------------------------------------------------------------------------------------------
# what each family adds


def test_gpt2_gelu_mlp_learned_positions_layernorm_and_tied_head():
    shape = load_shape(where("gpt2.json"))
    hidden, layers, ffn = 768, 12, 4 * 768  # n_inner null: 4 x n_embd
    assert (shape.intermediate_size, shape.mlp_activation, shape.hidden_act) == (
        ffn,
        "gelu",
        "gelu_new",
    )
    parts = shape.breakdown
    assert parts["dense_mlp"] == layers * 2 * hidden * ffn  # up and down, no gate
    assert shape.position_embeddings == 1024
    assert parts["embedding"] == (50257 + 1024) * hidden  # wte + wpe, lookups
    assert shape.tie_word_embeddings and shape.norm == "layernorm"
    biases = layers * (3 * hidden + hidden + ffn + hidden)  # c_attn, c_proj, c_fc, mlp c_proj
    norms = layers * 2 * 2 * hidden + 2 * hidden  # ln_1, ln_2 (weight, bias), ln_f
    assert parts["norms_and_other"] == biases + norms
    # the lm_head is the token embedding, in N once per token, not in the total twice
    assert shape.total_params == sum(parts.values()) - parts["lm_head"]


def test_gpt2_fields_are_named_as_the_config_names_them():
    cfg = config("gpt2.json")
    cfg["n_embd"] = "wide"
    with pytest.raises(CostModelError, match="config field 'n_embd': 'wide' is not allowed"):
        shape_from_config(cfg)
    del cfg["n_embd"]
    with pytest.raises(CostModelError, match="config field 'n_embd' is missing"):
        shape_from_config(cfg)


def test_an_activation_name_is_a_plain_name():
    cfg = config("gpt2.json")
    cfg["activation_function"] = "gelu\x1b[31m"
    with pytest.raises(CostModelError, match="activation_function"):
        shape_from_config(cfg)


def test_gpt_neox_and_nemotron_are_two_matrix_mlps_with_layernorm_biases():
    neox = load_shape(where("redpajama-incite-base-3b-v1.json"))
    assert not neox.mlp_gated and neox.norm == "layernorm" and not neox.tie_word_embeddings
    assert neox.breakdown["dense_mlp"] == 32 * 2 * 2560 * 10240
    nemotron = load_shape(where("nemotron-4b.json"))
    assert (nemotron.mlp_activation, nemotron.hidden_act) == ("gelu", "relu2")
    assert nemotron.breakdown["dense_mlp"] == 32 * 2 * 3072 * 9216
    # LayerNorm1P: a weight and a bias, two a layer and a final one; no other bias
    assert nemotron.breakdown["norms_and_other"] == 32 * 2 * 2 * 3072 + 2 * 3072


def test_gemma_sandwich_norms_tied_embeddings_and_local_layers():
    gemma2 = load_shape(where("gemma-2-9b.json"))
    assert gemma2.norms_per_layer == 4 and gemma2.tie_word_embeddings and gemma2.mlp_gated
    assert gemma2.breakdown["norms_and_other"] == 42 * 4 * 3584 + 3584
    assert gemma2.lm_head_params == gemma2.embedding_params  # in N, not twice in the total
    # every other layer local (the first one), window 4096, all counted as full attention
    assert (gemma2.num_sliding_window_layers, gemma2.sliding_window) == (21, 4096)
    assert gemma2.num_full_attention_layers == 42
    gemma3 = load_shape(where("gemma-3-1b-it.json"))
    assert gemma3.qk_norm and not gemma2.qk_norm
    assert (gemma3.num_sliding_window_layers, gemma3.sliding_window) == (22, 512)  # 5 in 6
    # Gemma's head width is 256 where a config leaves it out (transformers' default)
    cfg = config("gemma-2-9b.json")
    del cfg["head_dim"]
    assert shape_from_config(cfg).head_dim == 256


def test_gemma3_wrapper_is_its_language_model():
    wrapped = shape_from_config(
        {"model_type": "gemma3", "text_config": config("gemma-3-1b-it.json")}
    )
    flat = load_shape(where("gemma-3-1b-it.json"))
    assert wrapped.model_type == "gemma3_text"
    assert (wrapped.total_params, wrapped.activated_params) == (
        flat.total_params,
        flat.activated_params,
    )
    assert wrapped.tie_word_embeddings  # Gemma's default, the wrapper silent


def test_mistral_window_by_config_and_by_default():
    assert load_shape(where("mistral-7b-v0.1.json")).num_sliding_window_layers == 32
    assert load_shape(where("mistral-7b-v0.3.json")).num_sliding_window_layers == 0  # null
    cfg = config("mistral-7b-v0.1.json")
    del cfg["sliding_window"]  # transformers' MistralConfig default: 4096
    assert shape_from_config(cfg).sliding_window == 4096


def test_sliding_window_layers_only_where_the_family_has_them():
    cfg = json.loads((REPO / "costmodel/inputs/presets/llama-3.1-8b.json").read_text())
    cfg["layer_types"] = ["sliding_attention"] * cfg["num_hidden_layers"]
    with pytest.raises(CostModelError) as error:
        shape_from_config(cfg)
    assert "sliding_attention" in str(error.value) and "'llama'" in str(error.value)
    assert len(str(error.value).splitlines()) == 1


def test_gpt_oss_sinks_biases_and_alternating_windows():
    shape = load_shape(where("gpt-oss-20b.json"))
    assert shape.attention_sinks and shape.is_moe and not shape.num_dense_layers
    assert (shape.num_sliding_window_layers, shape.sliding_window) == (12, 128)
    hidden, layers, heads, kv, hd, experts, width = 2880, 24, 64, 8, 64, 32, 2880
    attention_vectors = (heads * hd + 2 * kv * hd + hidden) + heads  # q/k/v/o biases, sinks
    expert_biases = experts * (2 * width + hidden)  # gate_up and down, each expert
    router_bias = experts
    norms = 2 * hidden
    assert (
        shape.breakdown["norms_and_other"]
        == layers * (attention_vectors + expert_biases + router_bias + norms) + hidden
    )
    # biases are not matmul weights: N is the weights alone
    assert shape.breakdown["routed_experts_total"] == layers * experts * 3 * hidden * width


def test_deepseek_v2_query_latent_null_or_transformers_default():
    lite = load_shape(where("deepseek-v2-lite.json"))
    assert lite.q_lora_rank == 0 and lite.mla  # null: a plain q projection
    assert (lite.first_dense_layers, lite.num_shared_experts) == (1, 2)
    cfg = config("deepseek-v2-lite.json")
    del cfg["q_lora_rank"]  # absent: transformers' DeepseekV2Config default, 1536
    assert shape_from_config(cfg).q_lora_rank == 1536
    assert lite.router_fp32


def test_new_presets_are_the_published_configs():
    same = REPO / "scenarios" / "configs"
    preset_dir = REPO / "costmodel" / "inputs" / "presets"
    assert (preset_dir / "llama-3.1-70b.json").read_bytes() == (
        same / "llama-3.1-70b.json"
    ).read_bytes()
    assert (preset_dir / "deepseek-v3.json").read_bytes() == (OWN / "deepseek-v3.json").read_bytes()
    big = models.load_config("llama-3.1-405b")
    small = models.load_config("llama-3.1-70b")
    changed = {k for k in big if big[k] != small[k]}
    assert changed == {
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_hidden_layers",
    }
    assert (big["hidden_size"], big["num_hidden_layers"], big["intermediate_size"]) == (
        16384,
        126,
        53248,
    )  # Llama 3 paper, Table 3
    sc = scenario.resolve(overrides={"model": "llama-3.1-405b"})
    assert sc["activated_params"] == 403_747_897_344 and sc.sources["activated_params"] == "model"


# ---------------------------------------------------------------------------------------------
# `costmodel params`, text and JSON


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_params_text_and_json(name):
    model_type, total, n, _, _ = COUNTS[name]
    result = cli("params", where(name), "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["model_type"], data["total_params"], data["activated_params"]) == (
        model_type,
        total,
        n,
    )
    shape = load_shape(where(name))
    assert data["mlp_activation"] == shape.mlp_activation
    assert data["num_sliding_window_layers"] == shape.num_sliding_window_layers
    text = cli("params", where(name))
    assert text.returncode == 0, text.stderr
    assert f"({model_type})" in text.stdout and f"{total:,}" in text.stdout
    kind = "gated MLP (gate, up, down" if shape.mlp_gated else "two-matrix MLP (up, down"
    assert kind in text.stdout
    if shape.num_sliding_window_layers:
        assert f"sliding window {shape.sliding_window}), counted as full attention" in text.stdout


# ---------------------------------------------------------------------------------------------
# the GEMM list of a two-matrix MLP


def test_gelu_mlp_gemm_rows():
    sc = scenario.resolve(data={"model": where("gpt2.json"), "tensor_parallel": 4, "num_gpus": 40})
    rows = {row["key"]: row for row in gemms.model_gemms(sc)}
    # the MLP's first GEMM keeps its key; its name says it is up alone (n = width, not 2 x)
    up, down = rows["dense_gate_up"], rows["dense_down"]
    assert up["name"] == "dense MLP up (hidden -> intermediate), no gate (gelu_new)"
    assert (up["k"], up["n"] * 4, up["layers"]) == (768, 3072, 12)  # column-parallel
    assert (down["k"] * 4, down["n"]) == (3072, 768)  # row-parallel
    assert up["forward_flops_per_token"] == down["forward_flops_per_token"] == 2 * 768 * 3072 * 12
    assert gemms.weight_flops_per_token(gemms.model_gemms(sc)) == 2 * 123_532_032


# ---------------------------------------------------------------------------------------------
# the saved tensors of a two-matrix GELU MLP


def test_gelu_mlp_is_korthikantis_19_less_the_dropout_mask():
    """Korthikanti et al. (arXiv:2205.05198, section 4.1), the MLP of a GPT layer with a 4h GELU
    MLP, 2-byte activations: fc1's input 2sbh, the GELU's input 8sbh, fc2's input 8sbh and the
    dropout mask sbh (one byte per element) = 19 sbh of the layer's 34 sbh. Without dropout, as
    every model here, the rule keeps the first three, 18 sbh, for the fused and the exact eager
    GELU alike."""
    saved = act.gelu_mlp_saved("mlp", s * b_micro, h, 4 * h, 2, "fused")
    parts = {t.name: sp.expand(t.bytes) for t in saved}
    assert parts == {
        "mlp.input": 2 * s * b_micro * h,  # first linear layer's input
        "mlp.act_input": 8 * s * b_micro * h,  # the GELU's input
        "mlp.down_input": 8 * s * b_micro * h,  # second linear layer's input
    }
    korthikanti_mlp = 2 + 8 + 8 + 1  # + the dropout mask
    assert sp.expand(sum(parts.values())) == (korthikanti_mlp - 1) * s * b_micro * h
    # with TP and no sequence parallelism: the input whole on every rank, the 4h tensors / t
    # (Korthikanti's s·b·h·(10 + 24/t): the MLP's 2 of the 10 and 16 of the 24)
    per_gpu = act.per_gpu(saved, tp=t_p, sp=False)
    assert sp.simplify(sum(per_gpu.values()) - (2 + 16 / t_p) * s * b_micro * h) == 0


def test_gelu_new_written_as_separate_ops_keeps_three_more():
    fused = act.gelu_mlp_saved("mlp", 4, 8, 32, 2, "fused")
    eager = act.gelu_mlp_saved("mlp", 4, 8, 32, 2, "eager")
    extra = {t.name for t in eager} - {t.name for t in fused}
    assert extra == {"mlp.tanh", "mlp.half_input", "mlp.one_plus_tanh"}
    assert sum(t.bytes for t in eager) - sum(t.bytes for t in fused) == 3 * 2 * 4 * 32


def test_a_gelu_layer_dispatches_to_the_gelu_rule():
    common = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=32)
    gelu = act.layer_activation_bytes(mlp_activation="gelu", **common)
    swiglu = act.layer_activation_bytes(**common)
    assert {"mlp.input", "mlp.act_input", "mlp.down_input"} <= set(gelu)
    assert "mlp.gate" not in gelu and "mlp.gate" in swiglu
    # one fewer 32-wide tensor than SwiGLU's gate, up and product
    assert sum(swiglu.values()) - sum(gelu.values()) == 2 * 4 * 32


@pytest.mark.flop_counter
@pytest.mark.parametrize(
    "activation, elementwise",
    [("gelu_new", "eager"), ("gelu", "fused"), ("gelu_pytorch_tanh", "fused"), ("relu2", "fused")],
)
def test_gelu_rule_matches_the_bytes_torch_saves(activation, elementwise):
    """fc2(act(fc1(x))) in BF16 under saved_tensors_hooks: the storages saved for backward
    (parameters excluded) are the rule's bytes, for transformers' activations of each family."""
    torch, _ = _transformers()
    from transformers.activations import ACT2FN

    hidden, width, rows = 64, 256, 32
    fc1 = torch.nn.Linear(hidden, width, dtype=torch.bfloat16)
    fc2 = torch.nn.Linear(width, hidden, dtype=torch.bfloat16)
    weights = {p.untyped_storage().data_ptr() for p in [*fc1.parameters(), *fc2.parameters()]}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    x = torch.randn(rows, hidden, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fc2(ACT2FN[activation](fc1(x)))
    rule = act.gelu_mlp_saved("mlp", rows, hidden, width, 2, elementwise)
    assert sum(saved.values()) == sum(t.bytes for t in rule)


# ---------------------------------------------------------------------------------------------
# a model given by numbers: the shape keys

#: Megatron-LM's GPT 175B as Korthikanti et al. (Table 3) state it: 96 layers of 12,288, 96 heads,
#: a 4h GELU MLP, vocabulary 51,200, sequence 2,048.
GPT_175B = {
    "hidden_size": 12288,
    "num_layers": 96,
    "num_heads": 96,
    "head_dim": 128,
    "ffn_hidden_size": 4 * 12288,
    "mlp_activation": "gelu",
    "vocab_size": 51200,
    "num_experts": 0,
    "experts_per_token": 0,
    "full_attention_every": 1,
    "seq_len": 2048,
    "mean_tokens_per_sample": 2048,
    "num_gpus": 1024,
    "samples_per_step": 1536,  # GPT-3's 3.2M tokens: a sample for each of the 1,024 pipelines
    "step_time": 100,
}


def test_a_model_given_by_numbers_uses_its_keys_and_derives_n():
    sc = scenario.resolve(overrides=GPT_175B)
    hidden, layers, vocab = 12288, 96, 51200
    n = layers * (4 * hidden * hidden + 2 * hidden * 4 * hidden) + vocab * hidden
    assert sc["activated_params"] == n == 174_575_321_088
    assert sc.sources["activated_params"] == sc.sources["total_params"] == "derived"
    rows = {row["key"]: row for row in gemms.model_gemms(sc)}
    assert rows["dense_gate_up"]["n"] == 4 * hidden and "no gate" in rows["dense_gate_up"]["name"]
    assert rows["qkv"]["n"] == 3 * hidden
    source = rows["qkv"]["source"]
    assert "4 x hidden" not in source and "SwiGLU" not in source and "no GQA" in source
    # a given N stays the team's
    kept = scenario.resolve(overrides={**GPT_175B, "activated_params": 175e9, "total_params": 2e11})
    assert (
        kept["activated_params"] == 175_000_000_000 and kept.sources["activated_params"] == "--set"
    )


def test_gqa_and_moe_keys_replace_the_assumptions():
    keys = {
        "hidden_size": 4096,
        "num_layers": 8,
        "num_heads": 32,
        "head_dim": 128,
        "num_kv_heads": 8,
        "ffn_hidden_size": 12288,
        "mlp_activation": "swiglu",
        "num_experts": 64,
        "experts_per_token": 6,
        "moe_ffn_hidden_size": 1024,
        "shared_experts": 2,
        "first_dense_layers": 2,
        "vocab_size": 32000,
        "full_attention_every": 1,
    }
    sc = scenario.resolve(overrides=keys)
    rows = {row["key"]: row for row in gemms.model_gemms(sc)}
    assert rows["qkv"]["n"] == (32 + 2 * 8) * 128
    assert (rows["dense_gate_up"]["n"], rows["dense_gate_up"]["layers"]) == (2 * 12288, 2)
    assert (rows["expert_gate_up"]["n"], rows["expert_gate_up"]["layers"]) == (2 * 1024, 6)
    assert rows["shared_gate_up"]["n"] == 2 * 2 * 1024
    assert rows["qkv"]["source"] == "scenario keys"  # nothing assumed
    hidden = 4096
    attention = 2 * hidden * 4096 + 2 * hidden * 1024
    n = (
        8 * attention
        + 2 * 3 * hidden * 12288
        + 6 * (64 * hidden + 6 * 3 * hidden * 1024 + 3 * hidden * 2048)
        + 32000 * hidden
    )
    assert sc["activated_params"] == n


def test_a_model_config_fills_the_keys_and_a_changed_one_builds_the_shape():
    sc = scenario.resolve(overrides={"model": "deepseek-v3"})
    assert [sc[k] for k in ("ffn_hidden_size", "moe_ffn_hidden_size", "shared_experts")] == [
        18432,
        2048,
        1,
    ]
    assert (sc["first_dense_layers"], sc["num_kv_heads"], sc["mlp_activation"]) == (
        3,
        128,
        "swiglu",
    )
    assert sc.sources["first_dense_layers"] == "model"
    changed = scenario.resolve(overrides={"model": "llama-3.1-70b", "ffn_hidden_size": 32768})
    rows = {row["key"]: row for row in gemms.model_gemms(changed)}
    assert rows["dense_down"]["k"] == 32768
    assert rows["qkv"]["n"] == (64 + 2 * 8) * 128  # the config's K/V heads, kept
    assert rows["qkv"]["source"].startswith("scenario keys")


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"num_kv_heads": 3}, "num_kv_heads"),  # the course's 16 heads
        ({"num_kv_heads": 0}, "num_kv_heads"),
        ({"mlp_activation": "relu"}, "mlp_activation"),
        ({"first_dense_layers": 40}, "first_dense_layers"),  # the course's 40 layers
        ({"num_experts": 0, "experts_per_token": 0, "shared_experts": 1}, "shared_experts"),
        (
            {"num_experts": 0, "experts_per_token": 0, "moe_ffn_hidden_size": 8},
            "moe_ffn_hidden_size",
        ),
        ({"ffn_hidden_size": 10**10}, "ffn_hidden_size"),
    ],
)
def test_shape_keys_are_checked_in_one_line(overrides, key):
    args = [arg for k, v in overrides.items() for arg in ("--set", f"{k}={v}")]
    result = cli("report", *args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert (
        result.stderr.startswith(f"costmodel: error: {key}: ") and "Traceback" not in result.stderr
    )


def test_a_config_value_made_stale_by_the_team_goes_back_to_null():
    """Notebook 05 re-sizes a run (hidden 2048, 16 heads of the course's 128) whose model config
    filled num_kv_heads = 128: that value no longer divides the heads, so the shape built from the
    keys assumes instead of refusing the notebook's own hypothesis; the same for the MoE keys of
    a model made dense."""
    resized = scenario.resolve(
        data={"model": "deepseek-v3"},
        overrides={"hidden_size": 2048, "attention_dim": 2048, "num_heads": None, "head_dim": None},
    )
    assert resized["num_kv_heads"] is None and resized.sources["num_kv_heads"] == "course"
    assert resized["first_dense_layers"] == 3  # still agrees: kept
    dense = scenario.resolve(
        overrides={"model": "deepseek-v3", "num_experts": 0, "experts_per_token": 0}
    )
    assert [dense[k] for k in ("moe_ffn_hidden_size", "shared_experts", "first_dense_layers")] == [
        None
    ] * 3


def test_tensor_parallel_divides_the_widths_the_keys_give():
    with pytest.raises(CostModelError, match="dense MLP width"):
        scenario.resolve(overrides={**GPT_175B, "ffn_hidden_size": 49150, "tensor_parallel": 8})
    with pytest.raises(CostModelError, match="derived from the shape keys"):
        scenario.resolve(
            overrides={**GPT_175B, "hidden_size": 10**7, "num_heads": 1, "num_layers": 10**4}
        )


SHAPE_KEYS = (
    "ffn_hidden_size",
    "mlp_activation",
    "num_kv_heads",
    "moe_ffn_hidden_size",
    "shared_experts",
    "first_dense_layers",
)


def test_the_course_states_none_of_the_keys(course):
    assert all(course[key] is None for key in SHAPE_KEYS)
    assert course.sources["activated_params"] == "course"
    # the course model's own values: its config still describes the run, N stays the course's
    same = scenario.resolve(overrides={"mlp_activation": "swiglu", "num_kv_heads": 2})
    assert same["activated_params"] == 3_000_000_000
    assert same.sources["activated_params"] == "course"
    assert [row["source"] for row in gemms.model_gemms(same)] == [
        row["source"] for row in gemms.model_gemms(course)
    ]
