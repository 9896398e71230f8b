"""benchmarks/megatron_memory.py (Megatron-LM's theoretical memory, re-implemented) by hand on
Korthikanti et al.'s GPT-3 175B layout, and against costmodel's model states where the two
conventions agree."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from benchmarks_loader import load

REPO = Path(__file__).resolve().parents[2]


mm = load("megatron_memory", "megatron_memory_benchmark")
LAYOUTS = {layout.name: layout for layout in mm.LAYOUTS}
GPT3 = LAYOUTS["GPT-3 175B"].megatron
H, L, V, S = 12288, 96, 51200, 2048


def test_gpt3_layer_is_korthikantis_34_sbh_over_t():
    # Table 2 of Korthikanti et al.: s b h 34 / t with sequence parallelism and selective recompute
    got = mm.megatron_activation_bytes(GPT3)
    assert got["per_layer"] == S * 1 * H * 34 / 8
    # 96 layers (12 per stage x 8 in flight), the embedding's ids and dropout mask, all over TP
    assert got["total"] == pytest.approx((96 * S * H * 34 + 8 * S * 8 + S * H * 8) / 8)


def test_gpt3_weights_and_optimizer_by_hand():
    # per layer: QKV and output 4h^2, MLP 2 x h x 4h, two LayerNorms (weight and bias) 4h
    per_layer = 4 * H * H + 8 * H * H
    split = (L // 8 * per_layer + H * V) / 8  # 12 layers of a stage and the embedding, over TP
    replicated = (L * 4 * H + 2 * H) / 8  # the norms and the final LayerNorm, over PP
    assert mm.megatron_parameters(GPT3) == {
        "tp_split": split,
        "replicated": replicated,
        "experts": 0.0,
    }
    assert mm.megatron_weight_and_optimizer_bytes(GPT3) == 18 * (split + replicated)


def test_distributed_optimizer_and_schedules():
    a = dataclasses.replace(GPT3, use_distributed_optimizer=True, data_parallel=4)
    assert mm.megatron_bytes_per_parameter(a, 4) == 6 + 12 / 4
    # fewer micro batches than stages: min(1, m / p); interleaving: 1 + (p - 1) / (p v)
    few = dataclasses.replace(GPT3, num_microbatches=4)
    assert mm.megatron_activation_bytes(few)["layers"] == pytest.approx(
        mm.megatron_activation_bytes(GPT3)["layers"] / 2
    )
    interleaved = dataclasses.replace(GPT3, virtual_pipeline_parallel=2)
    assert mm.megatron_activation_bytes(interleaved)["layers"] == pytest.approx(
        mm.megatron_activation_bytes(GPT3)["layers"] * (1 + 7 / 16)
    )


def test_without_sequence_parallelism_the_formula_keeps_whole_norms_and_a_margin():
    a = dataclasses.replace(GPT3, sequence_parallel=False, pipeline_parallel=1, data_parallel=8)
    got = mm.megatron_activation_bytes(a)
    assert got["per_layer"] == pytest.approx(S * H * (10 + 24 / 8) * 1.05)
    # PP = 1: the BF16 logits over TP and the final norm's output
    assert got["output_and_loss"] == pytest.approx(2 * (S * V / 8 + S * H) * 1.05)


def test_llama3_vocabulary_is_padded_to_128_times_tp():
    assert LAYOUTS["Llama 3 405B, 8K"].megatron.padded_vocab_size == 129024


@pytest.mark.parametrize("name", ["GPT-3 175B", "Llama 3 405B, 8K"])
def test_model_states_agree_with_costmodel_where_the_conventions_do(name):
    # same bytes per parameter (18, or 6 + 12/DP), same layers per stage: what differs is named
    # (norm widths, the padded vocabulary): under 0.5%
    layout = LAYOUTS[name]
    ours = mm.costmodel_memory(layout)
    states = ours["weights"] + ours["gradients"] + ours["optimizer"]
    assert states / mm.megatron_weight_and_optimizer_bytes(layout.megatron) == pytest.approx(
        1, abs=0.005
    )
