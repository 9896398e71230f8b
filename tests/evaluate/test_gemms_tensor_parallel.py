"""Tensor parallelism against the widths it splits (issue 18, item 15), and `costmodel gemms
--format json` writing whole numbers as integers (item 18): an accepted scenario has no GEMM
with a fraction of a column, a row or a head."""

import json
import math

import pytest
from commands import cli
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.errors import CostModelError
from costmodel.evaluate.simulate import gemms
from costmodel.inputs import scenario


def whole(x) -> bool:
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())


def fractions(values: dict, micro_batch: int | None = None) -> list[str]:
    """The rows of the GEMM list whose widths (n, k), heads per GPU or token rows are not whole
    (a routed expert's rows are an average over its experts, and may be)."""
    found = []
    for row in gemms.model_gemms(values, micro_batch):
        fields = ["n", "k", "uses_per_token"] + ([] if row["key"].startswith("expert_") else ["m"])
        found += [f"{row['key']}.{f} = {row[f]}" for f in fields if not whole(row[f])]
    return found


@pytest.mark.parametrize(
    "overrides,message",
    [
        (  # the case: num_heads unset, so the heads of a 4096 width at head_dim 128
            {"hidden_size": 4096, "tensor_parallel": 7, "num_gpus": 56},
            "tensor_parallel: 7 is not allowed; expected a divisor of the attention heads (32; "
            "shape from scenario keys; assumed: no GQA, head_dim 128 (course)",
        ),
        (  # num_heads given, but the GEMM list uses the course model's config (16 heads)
            {"num_heads": 3, "tensor_parallel": 3, "num_gpus": 48},
            "tensor_parallel: 3 is not allowed; expected a divisor of the attention heads (16; "
            "shape from config of qwen3.6-35b-a3b)",
        ),
        (
            {
                "num_experts": 0,
                "experts_per_token": 0,
                "hidden_size": 1002,
                "num_heads": 16,
                "head_dim": 64,
                "tensor_parallel": 16,
                "num_gpus": 32,
            },
            "tensor_parallel: 16 is not allowed; expected a divisor of the dense MLP width "
            "(4,008; shape from scenario keys",
        ),
        (
            {"hidden_size": 2048, "head_dim": 128, "tensor_parallel": 3, "num_gpus": 48},
            "tensor_parallel: 3 is not allowed; expected a divisor of the attention heads (16;",
        ),
        (
            {
                "tensor_parallel": 2,
                "sequence_parallel": True,
                "seq_len": 49153,
            },
            "tensor_parallel: 2 is not allowed; expected a divisor of seq_len / context_parallel "
            "(49,153) with sequence_parallel",
        ),
    ],
    ids=["heads-unset", "config-heads", "dense-mlp", "head-dim-only", "sp-seq-len"],
)
def test_tp_must_divide_what_the_gemm_list_splits(overrides, message):
    with pytest.raises(CostModelError) as error:
        scenario.resolve(overrides=overrides)
    assert str(error.value).startswith(message), str(error.value)
    assert "\n" not in str(error.value) and len(str(error.value)) < 400
    args = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
    result = cli("gemms", *args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == f"costmodel: error: {error.value}\n"


@pytest.mark.parametrize(
    "overrides",
    [
        {"tensor_parallel": 16, "num_gpus": 32},  # the course model: 16 heads, widths of 2^k
        {"hidden_size": 4096, "tensor_parallel": 8, "num_gpus": 64},  # 32 assumed heads
        {"hidden_size": 4096, "num_heads": 24, "head_dim": 128, "tensor_parallel": 8},
        {"model": "llama-3.1-8b", "tensor_parallel": 8, "sequence_parallel": True},
    ],
)
def test_layouts_that_divide_are_accepted_whole(overrides):
    values = scenario.resolve(overrides={"num_gpus": 64, **overrides})
    assert values["tensor_parallel"] > 1
    for batch in (None, 1, 3):
        assert fractions(values, batch) == []


@st.composite
def layouts(draw) -> dict:
    """Overrides of the course: widths and a TP (with sequence parallelism or not) around the
    checks' edges, half of the time with widths that TP divides."""
    tp = draw(st.sampled_from([1, 2, 3, 4, 6, 7, 8, 12, 16]))
    fits = draw(st.booleans())
    step = tp if fits else 1
    kind = draw(st.sampled_from(["hidden", "heads", "attention_dim", "course"]))
    if kind == "hidden":  # heads assumed: attention_dim / 128, rounded
        width = {"hidden_size": 128 * step * draw(st.integers(1, 20)) + draw(st.integers(-63, 63))}
    elif kind == "heads":
        width = {
            "hidden_size": step * draw(st.integers(16, 2_000)),
            "num_heads": step * draw(st.sampled_from([1, 2, 3, 4, 5, 8, 12])),
            "head_dim": draw(st.sampled_from([32, 64, 80, 96, 100, 128, 256])),
        }
    elif kind == "attention_dim":
        head_dim = draw(st.sampled_from([64, 128, 100]))
        width = {"attention_dim": head_dim * step * draw(st.integers(1, 40)), "head_dim": head_dim}
    else:  # the course model's config
        width = {}
    if draw(st.booleans()):
        width.update(num_experts=0, experts_per_token=0)
    seq = draw(st.sampled_from([49152, 4096, 6000, 8191]))
    return {
        **width,
        "vocab_size": step * draw(st.sampled_from([15520, 32000, 50257, 4096, 7])),
        "seq_len": seq,
        "mean_tokens_per_sample": min(seq, 28875),
        "tensor_parallel": tp,
        "sequence_parallel": tp > 1 and draw(st.booleans()),
        "num_gpus": 8 * tp,
    }


@settings(max_examples=300, deadline=None, derandomize=True)
@given(layouts())
def test_no_accepted_layout_gives_a_fraction(overrides):
    try:
        values = scenario.resolve(overrides=overrides)
    except CostModelError as error:
        assert "\n" not in str(error)
        return
    for batch in (None, 3):
        assert fractions(values, batch) == [], overrides


def rows_of(*args):
    result = cli("gemms", "--format", "json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["gemms"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--set", "tensor_parallel=4", "--set", "sequence_parallel=true", "--set", "num_gpus=64"],
        ["--set", "model=llama-3.1-8b", "--set", "context_parallel=2", "--set", "micro_batch=3"],
    ],
    ids=["course", "tp-sp", "llama-cp"],
)
def test_gemms_json_writes_whole_numbers_as_integers(args):
    for row in rows_of(*args):
        for key in ("m", "n", "k", "layers", "uses_per_token", "forward_flops_per_token"):
            value = row[key]
            assert not (isinstance(value, float) and value.is_integer()), (row["key"], key, value)
        assert isinstance(row["m"], int) or row["key"].startswith("expert_")
        assert isinstance(row["per_gpu_fraction"], (int, float)) and math.isfinite(row["intensity"])


def test_a_vocabulary_tp_does_not_divide_is_padded_as_megatron_pads_it():
    """GPT-2's 50,257 tokens at TP 2: accepted; each GPU's lm_head has ceil(V / TP) columns."""
    values = scenario.resolve(overrides={"vocab_size": 50257, "tensor_parallel": 2})
    (row,) = [r for r in gemms.model_gemms(values) if r["key"] == "lm_head"]
    assert row["n"] == 25129
    assert "padded to 50,258 for TP 2" in row["source"]
    unpadded = scenario.resolve(overrides={"vocab_size": 50258, "tensor_parallel": 2})
    (same,) = [r for r in gemms.model_gemms(unpadded) if r["key"] == "lm_head"]
    assert same["n"] == 25129 and "padded" not in same["source"]
