"""The attention core's work in a step: how much of the s x s square a kernel computes under a
causal mask, and over which rows (the real lengths, or every padded row where the kernel runs
the pads: `attention_on_padding`). The account counts the core at the real lengths
(`attention_flops`); the step-time model times what the kernel runs
(evaluate.simulate.compute_time)."""

from __future__ import annotations

from costmodel.derive import plain
from costmodel.inputs.attention_kernels import KIND
from costmodel.inputs.scenario import Scenario, as_scenario

#: The share of the s x s square each kernel kind (attention_kernels.KIND) computes under a
#: causal mask, whatever `attention_flops` counts: a flash kernel skips the fully masked tiles
#: (FlashAttention-2, arXiv:2307.08691, section 3.1.1 "Causal masking": about half the
#: blocks), eager attention computes the whole square and masks it.
KERNEL_SQUARE = {"flash": "causal", "eager": "full"}


def pads_computed(sc: Scenario) -> bool:
    """Whether the attention kernel runs the pad slots: padded rows attended whole
    (`attention_on_padding: computed`); a packed batch, or a varlen kernel given the real lengths
    (`skipped`), attends the real tokens only."""
    return sc.batching == "padded" and sc.attention_on_padding == "computed"


def kernel_sum_squares(sc: Scenario) -> float:
    """The sum of s^2 over the sequences the attention kernel runs in a step: every sample's
    padded row of seq_len where the pads are computed (`pads_computed`), else the real lengths
    (`sum_squared_lengths`)."""
    if pads_computed(sc):
        return sc.samples_per_step * sc.seq_len**2
    return sc.sum_squared_lengths


def core_forward_flops(sc: Scenario, counted: bool = True) -> float:
    """The attention core's forward FLOPs of the step, all layers, all sequences
    (derive.attention): as the account counts them (`attention_flops`, at the real lengths), or,
    with ``counted=False``, as the scenario's kernel computes them (KERNEL_SQUARE, over the rows
    it runs, `kernel_sum_squares`: the time)."""
    sc = as_scenario(sc)
    square = sc.attention_flops if counted else KERNEL_SQUARE[KIND[sc.attention_kernel]]
    model = plain.attention_actual(
        square,
        sc.attention_dim,
        sc.num_full_attention_layers,
        sc.sum_squared_lengths if counted else kernel_sum_squares(sc),
    )
    return model / 3
