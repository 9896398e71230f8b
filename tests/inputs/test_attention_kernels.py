"""The attention kernels' published curves (costmodel.inputs.attention_kernels): the efficiency
at a run's tokens per CP rank, head dim and mask, by hand from the figures' bar labels, and the
step-time model reading it there."""

from __future__ import annotations

import math

import numpy as np
import pytest

from costmodel.evaluate.simulate import attention_core, compute_time, step_time
from costmodel.inputs import attention_kernels as ak
from costmodel.inputs import efficiency, scenario

H100 = 989.4  # TFLOP/s, dense BF16 (costmodel.inputs.hardware)
A100 = 312.0


def _at(gen, kernel, head_dim, direction, seq):
    points, _ = ak.curve(gen, kernel, head_dim, direction)
    return ak.interpolate(points, seq)


def test_between_two_published_lengths_linear_in_log_length():
    """FlashAttention-3, forward, causal, head dim 128: 521 TFLOP/s at 2K, 579 at 4K; 3000
    tokens lie log2(3000 / 2048) of the way from one to the other."""
    t = math.log(3000 / 2048) / math.log(2)
    assert _at("hopper", "flash3", 128, "forward", 3000) == pytest.approx(
        (521 + (579 - 521) * t) / H100
    )
    assert _at("hopper", "flash3", 128, "forward", 4096) == pytest.approx(579 / H100)


def test_flat_beyond_the_published_ends():
    """Below 512 tokens the 512 value, past 16K the 16K value (no figure goes further)."""
    assert _at("hopper", "flash3", 128, "forward", 100) == pytest.approx(292 / H100)
    assert _at("hopper", "flash3", 128, "forward", 10**6) == pytest.approx(616 / H100)
    # A100's head dim 128 unmasked curve starts at 1K (its 512 bar is hidden by the legend)
    assert _at("ampere", "eager", 128, "both", 300) == pytest.approx(53 / A100)
    assert _at("ampere", "eager", 128, "both", 65536) == pytest.approx(86 / A100)  # 8K: OOM at 16K


def test_an_array_of_lengths_gives_the_same_values():
    """The plan evaluates the same function over its layouts' lengths (a NumPy array)."""
    points, _ = ak.curve("hopper", "flash", 128, "forward")
    lengths = np.array([100.0, 3000.0, 4096.0, 10.0**6])
    assert ak.interpolate(points, lengths).tolist() == pytest.approx(
        [ak.interpolate(points, float(s)) for s in lengths]
    )


def test_between_two_published_head_dims_linear_in_the_head_dim():
    """64, 128, 256 published (FlashAttention-3 forward, causal, at 16K: 473, 616, 642 TFLOP/s):
    96 lies halfway between 64 and 128, 192 halfway between 128 and 256, 200 is 72/128 of the
    way from 128 to 256; a published head dim is its own curve; beyond either end, the end's."""

    def fwd(d, seq=16384):
        return _at("hopper", "flash3", d, "forward", seq) * H100

    assert fwd(96) == pytest.approx((473 + 616) / 2)
    assert fwd(192) == pytest.approx((616 + 642) / 2)
    assert fwd(200) == pytest.approx(616 + (642 - 616) * 72 / 128)
    assert fwd(128) == pytest.approx(616) and fwd(256) == pytest.approx(642)
    assert fwd(40) == pytest.approx(473) and fwd(300) == pytest.approx(642)
    # at a length between two published ones: the two curves each interpolated in log length
    t = math.log(3000 / 2048) / math.log(2)
    low, high = 371 + (420 - 371) * t, 521 + (579 - 521) * t  # head dim 64 and 128, causal
    assert fwd(96, 3000) == pytest.approx((low + high) / 2)
    _, source = ak.curve("hopper", "flash3", 96, "forward")
    assert "head dim 96 (linear between head dim 64 and 128, 0.50 of the way)" in source


def test_eager_between_two_head_dims():
    """A100 eager ('Pytorch', forward + backward): 36 / 43 TFLOP/s at 512 / 2K tokens for head
    dim 64, 53 / 76 for 128; a model of head dim 96 (Korthikanti's GPT 22B, 6144 / 64 heads) runs
    halfway between: before, the nearest rule gave it head dim 64's curve, 43 at 2K instead of
    59.5."""
    assert _at("ampere", "eager", 96, "both", 512) * A100 == pytest.approx((36 + 53) / 2)
    assert _at("ampere", "eager", 96, "both", 2048) * A100 == pytest.approx((43 + 76) / 2)
    # the step-time model reads it there: the course's 32K on an A100, past 8K (flat: 46 and 86)
    keys = {"gpu": "A100-80GB", "attention_kernel": "eager", "head_dim": 96}
    eager = efficiency.efficiencies(scenario.resolve(overrides=keys).values)["attention_eager"]
    assert eager.stated == pytest.approx((46 + 86) / 2 / A100)
    assert "head dim 96 (linear between head dim 64 and 128" in eager.stated_source


def test_the_mask_the_kernel_runs_under():
    """A flash kernel is timed causal (its causal curve), eager on the whole square (no mask);
    a direction with only the other mask's curve uses it and says so."""
    flash, source = ak.curve("hopper", "flash3", 128, "forward")
    assert ak.interpolate(flash, 512) == pytest.approx(292 / H100)  # causal; unmasked is 467
    assert "causal" in source and "panel (d)" in source
    eager, source = ak.curve("hopper", "eager", 128, "forward")
    assert ak.interpolate(eager, 512) == pytest.approx(74 / H100) and "no mask" in source
    backward, source = ak.curve("hopper", "flash3", 128, "backward")
    assert ak.interpolate(backward, 16384) == pytest.approx(561 / H100)
    assert "no causal curve published" in source


def test_the_older_flash_value_is_the_generations_family():
    """`flash` means FlashAttention-2 on Ampere and Ada, FlashAttention-3 on Hopper and
    Blackwell (Hopper's curves, said to be assumed); CDNA3 has no curve."""
    assert [ak.family("flash", g) for g in ("ampere", "ada", "hopper", "blackwell")] == [
        "flash2", "flash2", "flash3", "flash3"]  # fmt: skip
    _, source = ak.curve("blackwell", "flash", 128, "forward")
    assert "FlashAttention-3" in source and "hopper's curve, assumed for blackwell" in source
    assert ak.curve("cdna3", "flash", 128, "forward") is None
    assert ak.curve("hopper", "cudnn", 128, "forward")[0] != ak.curve("hopper", "flash", 128,
                                                                      "forward")[0]  # fmt: skip


def test_each_stated_value_traces_to_its_figure():
    """Every curve names its paper or the repository asset and its panel; the table's Hopper
    flash forward is FlashAttention-3's 579 TFLOP/s at 4K (Figure 5 (d)) over the H100's peak."""
    for gen, families in ak.CURVES.items():
        for family, curves in families.items():
            for (head_dim, causal, _), (points, source) in curves.items():
                assert (
                    "arXiv:2307.08691" in source
                    or "arXiv:2407.08608" in source
                    or ("flash2_h100_fwd_bwd_benchmark.png" in source)
                ), (gen, family)
                assert f"head dim {head_dim}" in source or f"head dimension {head_dim}" in source
                assert [s for s, _ in points] == sorted(s for s, _ in points)
    entry = efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"]
    assert entry.stated == pytest.approx(579 / H100)
    assert (
        "Figure 5" in entry.stated_source and "(d) forward, with causal mask" in entry.stated_source
    )


def test_the_step_reads_the_curve_at_the_tokens_per_cp_rank():
    """compute_time times the attention core at the curve's efficiency at seq_len / CP (times
    the fitted scale): the course at 49,152 tokens, the same run with CP 8 at 6,144."""
    course = scenario.resolve()
    eff = efficiency.efficiencies(course.values)
    scale = efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"].scale or 1.0
    head = course.values["head_dim"]
    forward, backward = compute_time.attention_efficiencies(course, eff)
    assert forward == pytest.approx(scale * _at("hopper", "flash", head, "forward", 49152))
    assert backward == pytest.approx(scale * _at("hopper", "flash", head, "backward", 49152))
    short = course.replace(context_parallel=8)
    f8, _ = compute_time.attention_efficiencies(short, eff)
    assert f8 == pytest.approx(scale * _at("hopper", "flash", head, "forward", 6144))
    assert f8 < forward

    # the step's attention part is the core's FLOPs at those efficiencies
    def flat(value):
        keys = {"attention_efficiency": value}
        return step_time.predict(scenario.resolve(overrides=keys))["parts"]["attention"]

    seconds = step_time.predict(course)["parts"]["attention"]
    assert flat(forward) < seconds < flat(backward)  # the backward runs at its own, lower value


def test_a_named_family_is_a_flash_kernel_on_its_own_curve():
    """`attention_kernel: cudnn` counts and stores as a flash kernel (backward 2.5x, the causal
    half square, the same memory) and runs on cuDNN's curve (head dim 128 nearest the course's
    256: cuDNN's figures stop at 128); `flash3` on Hopper is what `flash` means there."""
    from costmodel.evaluate.simulate import run

    base = scenario.resolve()
    cudnn = scenario.resolve(overrides={"attention_kernel": "cudnn"})
    assert cudnn.numbers()["kappa"] == base.numbers()["kappa"] == 2.5
    assert attention_core.core_forward_flops(cudnn, counted=False) == (
        attention_core.core_forward_flops(base, counted=False)
    )
    assert run.memory(cudnn)["total"] == run.memory(base)["total"]
    scale = efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"].scale or 1.0
    forward = efficiency.efficiencies(cudnn.values)["attention_flash_forward"]
    assert forward.value == pytest.approx(scale * 539 / H100)  # 16K's value, flat beyond
    assert "cuDNN" in forward.stated_source and "head dim 128" in forward.stated_source
    flash3 = scenario.resolve(overrides={"attention_kernel": "flash3"})
    assert step_time.predict(flash3)["seconds"] == step_time.predict(base)["seconds"]
