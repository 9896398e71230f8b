"""benchmarks/megatron_flops.py (Megatron-LM's num_floating_point_operations, re-implemented)
against costmodel's own conventions: 6·N·tokens for the weight matmuls and the causal
convention for the attention core."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from benchmarks_loader import load

from costmodel.derive.attention import attention_training_flops, sum_of_squares_flops
from costmodel.evaluate.simulate import linear
from costmodel.inputs import models

REPO = Path(__file__).resolve().parents[2]


mf = load("megatron_flops", "megatron_flops_benchmark")

B, S = 80, 49_152
MEAN = 28_875


def _non_core(terms: dict) -> int:
    return sum(v for k, v in terms.items() if k != "attention_core")


@pytest.fixture(scope="module")
def llama():
    return models.load_shape("llama-3.1-8b")


@pytest.fixture(scope="module")
def qwen36():
    return models.load_shape("qwen3.6-35b-a3b")


def test_dense_llama_is_exactly_6NBS_plus_causal_core(llama):
    terms = mf.megatron_terms(mf.megatron_args(llama), B, S)
    # Megatron leaves nothing of N out for a dense SwiGLU model without biases
    assert _non_core(terms) == 6 * llama.activated_params * B * S
    assert terms["attention_core"] == pytest.approx(
        attention_training_flops(
            S, llama.attention_dim, llama.num_full_attention_layers, B, "causal"
        ),
        rel=1e-12,
    )
    # and exactly: 3 x 2 x (32 x 128) / 2 x 2 x B x S^2 per layer
    assert terms["attention_core"] == 6 * 4096 * 32 * B * S**2
    assert mf.megatron_flops(llama, B, S) == sum(terms.values())


def test_bshd_defaults_are_padded_slots(llama, qwen36):
    for shape in (llama, qwen36):
        assert mf.megatron_flops(shape, B, S) == mf.megatron_flops(
            shape, B, S, total_tokens=B * S, sum_sq_lengths=B * S**2
        )


def test_packed_core_is_sum_of_real_squares(llama, qwen36):
    lengths = [49_152, 30_000, 12_345, 777, 28_875]
    for shape in (llama, qwen36):
        terms = mf.megatron_terms(
            mf.megatron_args(shape),
            len(lengths),
            S,
            total_tokens=sum(lengths),
            sum_sq_lengths=sum(x * x for x in lengths),
        )
        expected = sum_of_squares_flops(
            lengths, shape.attention_dim, shape.num_full_attention_layers, "causal"
        )
        assert terms["attention_core"] == pytest.approx(expected, rel=1e-12)
    # token-linear terms use the real token count, not the padded slots
    packed = mf.megatron_terms(
        mf.megatron_args(llama), B, S, total_tokens=B * MEAN, sum_sq_lengths=B * MEAN**2
    )
    assert _non_core(packed) == 6 * llama.activated_params * B * MEAN


def test_qwen36_weights_leave_out_router_and_shared_expert_gate(qwen36):
    a = mf.megatron_args(qwen36)
    assert (a.kv_channels, a.num_query_groups, a.linear_attention_freq) == (256, 2, 4)
    assert a.attention_output_gate and a.padded_vocab_size == qwen36.vocab_size
    tokens = B * MEAN
    terms = mf.megatron_terms(a, B, S, total_tokens=tokens, sum_sq_lengths=B * MEAN**2)
    weights = sum(terms[k] for k in mf.WEIGHT_TERMS)
    router = qwen36.breakdown["router"]  # 40 x 256 x 2048
    shared_gate = qwen36.num_moe_layers * qwen36.hidden_size  # Linear(hidden, 1) per layer
    assert router == 20_971_520 and shared_gate == 81_920
    assert weights - 6 * qwen36.activated_params * tokens == -6 * tokens * (router + shared_gate)
    # the attention core: only the 10 full-attention layers, causal convention
    assert terms["attention_core"] == pytest.approx(
        attention_training_flops(MEAN, 4096, 10, B, "causal"), rel=1e-12
    )


def test_qwen36_gated_deltanet_terms(qwen36):
    tokens = B * S
    terms = mf.megatron_terms(mf.megatron_args(qwen36), B, S)
    n_lin = qwen36.num_linear_attention_layers
    # conv1d: the same count as costmodel's (2 x conv_dim x kernel per token, x3)
    conv = 3 * linear.linear_attention_conv_flops_per_token(qwen36) * tokens * n_lin
    assert terms["linear_attention_conv"] == conv
    # core: 4 d_v x d_v products per value head and token (recurrent form), no chunk size
    assert terms["linear_attention_core"] == 6 * 4 * 32 * 128**2 * tokens * n_lin
    # costmodel's chunked form (C = 64) counts 5,234,688 forward FLOPs per token per layer
    # against Megatron's 2 x 4 x 32 x 128^2 = 4,194,304
    ratio = terms["linear_attention_core"] / linear.linear_attention_training_flops(qwen36, tokens)
    assert ratio == pytest.approx(4_194_304 / 5_234_688, rel=1e-12)


def test_qwen36_mtp_layer_counted_by_the_linear_attention_pattern(qwen36):
    tokens = B * S
    a = mf.megatron_args(qwen36, count_mtp=True)
    assert a.mtp_num_layers == 1
    extra = mf.megatron_flops(qwen36, B, S, count_mtp=True) - mf.megatron_flops(qwen36, B, S)
    h = qwen36.hidden_size
    moe = 6 * h * (512 * 8 + 512) * 3  # routed top-8 + shared expert
    gdn = sum(mf._gdn_per_token(a).values())  # index 40: (40 + 1) % 4 != 0 -> linear attention
    eh_proj_and_norms = 6 * (3 * h + 2 * h * h)
    logits = 6 * h * qwen36.vocab_size
    assert extra == tokens * (moe + gdn + eh_proj_and_norms + logits)


def test_list_pattern_with_mtp_fails_as_in_megatron(qwen36):
    a = mf.megatron_args(qwen36, count_mtp=True)
    listed = dataclasses.replace(
        a,
        linear_attention_freq=tuple(0 if t == "full_attention" else 1 for t in qwen36.layer_types),
    )
    with pytest.raises(ValueError):
        mf.megatron_terms(listed, B, S)
    # without MTP the list and the int give the same count
    plain = mf.megatron_args(qwen36)
    assert mf.megatron_terms(
        dataclasses.replace(plain, linear_attention_freq=listed.linear_attention_freq), B, S
    ) == mf.megatron_terms(plain, B, S)


def test_mla_deepseek_v3():
    cfg = json.loads((REPO / "tests" / "configs" / "deepseek-v3.json").read_text())
    shape = models.shape_from_config(cfg, "deepseek-v3")
    a = mf.megatron_args(shape)
    assert (a.qk_head_dim, a.qk_pos_emb_head_dim, a.v_head_dim) == (128, 64, 128)
    tokens = B * S
    terms = mf.megatron_terms(a, B, S)
    # the core: costmodel's causal convention with d = n x (qk + v) / 2 = 20,480
    assert terms["attention_core"] == pytest.approx(
        attention_training_flops(S, shape.attention_dim, 61, B, "causal"), rel=1e-12
    )
    # the weights: Megatron adds a "+1" per q/kv lora rank (the norms) and leaves out the router
    weights = sum(terms[k] for k in mf.WEIGHT_TERMS)
    norms = 61 * (1536 + 512)
    assert weights - 6 * shape.activated_params * tokens == 6 * tokens * (
        norms - shape.breakdown["router"]
    )


def test_hybrid_path(llama, qwen36):
    # a dense model through --hybrid-layer-pattern gives the GPT-path count
    assert mf.megatron_hybrid_flops(llama, B, S) == mf.megatron_flops(llama, B, S)
    # Qwen3.6: the hybrid path has no attention output gate (q-wide gate projection)
    gate = 6 * qwen36.hidden_size * 4096 * qwen36.num_full_attention_layers * B * S
    assert mf.megatron_flops(qwen36, B, S) - mf.megatron_hybrid_flops(qwen36, B, S) == gate


def test_main_prints_every_figure(capsys):
    mf.main()
    out = capsys.readouterr().out
    rows = [line.split()[:2] for line in out.splitlines() if "FLOP  MFU" in line and "=" in line]
    # Qwen3.6: padded/packed x MTP off/on; Llama: padded/packed, no MTP layers
    assert sum(r[1] == "count_mtp=True" for r in rows) == 2
    assert sum(r[1] == "count_mtp=False" for r in rows) == 4
    assert "MFU  16.61%" in out and "MFU   8.14%" in out
