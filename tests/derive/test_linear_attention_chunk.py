"""The gated-DeltaNet chunk C lives once, in the assumption `linear_attention_chunk` (issue 33):
the FLOP count (evaluate.simulate.linear) and the memory model (derive.activations through
evaluate.memory.gpu_memory) both read it. The memory model used to keep a chunk of its own (64), so a
chunk of 128 changed the FLOPs and left the memory where it was."""

from __future__ import annotations

import pytest

from costmodel.derive import activations as act
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import linear, run
from costmodel.inputs import assumptions, scenario


def _chunk(monkeypatch, size: int) -> None:
    entry = assumptions.ASSUMPTIONS["linear_attention_chunk"]
    monkeypatch.setitem(
        assumptions.ASSUMPTIONS,
        "linear_attention_chunk",
        assumptions.Assumption(size, entry.source, entry.use),
    )


def _gdn(sc) -> dict[str, float]:
    """The whole saved set of one gated-DeltaNet layer of the scenario, as the memory model
    counts it (no recompute)."""
    kwargs = gpu_memory.layer_kwargs(sc.shape, sc, sc.micro_batch)
    tp, sp = sc.tensor_parallel, sc.sequence_parallel
    return act.layer_activation_bytes(
        "gated_deltanet", "moe", tp=tp, sp=sp, recompute="none", **kwargs
    )


def test_the_memory_follows_the_chunk_the_flops_follow(monkeypatch):
    sc = scenario.resolve(overrides={"recompute": "none"})  # the course: Qwen3.6, gated DeltaNet
    assert sc.shape.linear_num_value_heads
    flops, at64 = linear.linear_attention_flops_per_token(sc.shape), _gdn(sc)
    peak = run.memory(sc)["total"]
    _chunk(monkeypatch, 128)
    assert linear.linear_attention_flops_per_token(sc.shape) > flops
    at128 = _gdn(sc)
    # flash-linear-attention's kernel keeps one C-wide block per row, A = beta x rows x C
    # (derive.activations.mixers): doubled at C = 128, every other tensor as it was
    assert at128["gdn.A"] == 2 * at64["gdn.A"] > 0
    assert {k: v for k, v in at128.items() if k != "gdn.A"} == {
        k: v for k, v in at64.items() if k != "gdn.A"
    }
    assert run.memory(scenario.resolve(overrides={"recompute": "none"}))["total"] > peak


def test_the_memory_model_has_no_chunk_of_its_own():
    """Without the caller's chunk the gated DeltaNet's memory is refused, not taken at a
    default of its own."""
    with pytest.raises(ValueError, match="chunk"):
        act.layer_activation_bytes(
            "gated_deltanet",
            "dense",
            b=1,
            s=128,
            hidden=64,
            ffn=128,
            linear_key_heads=2,
            linear_value_heads=4,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
        )
