"""costmodel.evaluate.simulate.linear: the gated-DeltaNet core's FLOPs per token, per model and in the
account, all read through one widths mapping."""

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate.simulate.linear import (
    linear_attention_conv_flops_per_token,
    linear_attention_flops_per_token,
    linear_attention_training_flops,
    widths,
)
from costmodel.inputs.models import load_shape


def test_linear_attention_flops_formula():
    s = load_shape("qwen3.6-35b-a3b")
    c, dk, dv, h = 64, 128, 128, 32
    expected = h * (4 * c * dk + 2 * c * dv + 6 * dk * dv + (c - 1) * (dk + dv))
    assert linear_attention_flops_per_token(s) == expected == 5_234_688
    assert linear_attention_flops_per_token(s, chunk_size=1) == h * (4 * dk + 2 * dv + 6 * dk * dv)
    assert linear_attention_training_flops(s, tokens=1000) == 3 * expected * 1000 * 30
    assert linear_attention_conv_flops_per_token(s) == 2 * (2 * 16 * 128 + 32 * 128) * 4


def test_linear_attention_flops_need_a_hybrid():
    s = load_shape("llama-3.1-8b")
    with pytest.raises(CostModelError):
        linear_attention_flops_per_token(s)
    assert linear_attention_training_flops(s, tokens=10) == 0
    assert linear_attention_conv_flops_per_token(s) == 0
    with pytest.raises(CostModelError):
        linear_attention_flops_per_token(load_shape("qwen3.6-35b-a3b"), chunk_size=0)


def test_one_widths_mapping():
    """The account's FLOPs and the per-model ones read the same widths: only the layers and
    the tokens differ."""
    s = load_shape("qwen3.6-35b-a3b")
    assert widths(s, 64) == {
        "n_v": 32, "n_k": 16, "d_k": 128, "d_v": 128, "K_conv": 4, "C": 64, "L_linear": 30,
    }  # fmt: skip
    assert widths(s, 64, layers=12)["L_linear"] == 12
