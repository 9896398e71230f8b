"""Model states per GPU: weights, gradients and optimizer states, by ZeRO stage.

Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models"
(SC 2020, arXiv:1910.02054, section 3.1 and Figure 1): mixed-precision Adam on Ψ parameters keeps
2Ψ bytes of fp16 weights, 2Ψ of fp16 gradients and KΨ of optimizer states, K = 12 (an fp32 master
copy, momentum and variance): 16Ψ. Sharding over N_d data-parallel ranks:

- stage 0 (plain data parallelism): nothing sharded, (2 + 2 + K)Ψ;
- stage 1 (P_os): the optimizer states, 4Ψ + KΨ/N_d;
- stage 2 (P_os+g): and the gradients, 2Ψ + (2 + K)Ψ/N_d;
- stage 3 (P_os+g+p): and the weights, (4 + K)Ψ/N_d.

Megatron-LM (``megatron/training/theoretical_memory_usage.py``) accumulates gradients in fp32
"main grads": β_g = 4, so 18 bytes per parameter without its distributed optimizer and
6 + 12/N_d with it (the distributed optimizer is ZeRO stage 1). The gradient width is the
``grad_bytes`` argument: 4 (Megatron) or 2 (the ZeRO paper).

Ψ is what one GPU holds before ZeRO: tensor parallelism divides the layer matrices by t, pipeline
parallelism gives a stage its layers (plus the embedding or lm_head on the first or last stage),
expert parallelism divides the routed experts by EP; the caller works that out.
"""

from __future__ import annotations

from costmodel.derive.plain import STAGES, model_state_bytes  # noqa: F401 (re-exported)
from costmodel.derive.symbols import K_opt, N_d, Psi, Psi_l, beta_g, bytes_per_element, f_pre

#: Bytes per GPU of each model state, by ZeRO stage (which states are divided by N_d).
weights = {stage: bytes_per_element * Psi / (N_d if stage >= 3 else 1) for stage in STAGES}
gradients = {stage: beta_g * Psi / (N_d if stage >= 2 else 1) for stage in STAGES}
optimizer = {stage: K_opt * Psi / (N_d if stage >= 1 else 1) for stage in STAGES}

model_states_stage_0 = weights[0] + gradients[0] + optimizer[0]
model_states_stage_1 = weights[1] + gradients[1] + optimizer[1]
model_states_stage_2 = weights[2] + gradients[2] + optimizer[2]
model_states_stage_3 = weights[3] + gradients[3] + optimizer[3]

#: ZeRO 3's working set beside the sharded states: a layer's weights are gathered whole before
#: its forward and again before its backward, and those of the next f_pre layers are gathered
#: ahead so that the all-gather hides behind the current layer's compute; in the backward the
#: layer's unsharded gradients (beta_g an element) wait for their reduce-scatter. PyTorch FSDP2
#: keeps two all-gather outputs alive in the forward and prefetches one layer in the backward
#: (pytorch/pytorch PR #128884, commit f2805a0: "allows two all-gather output tensors to be
#: alive at once"): f_pre = 1. The largest layer sets the peak.
zero3_gathered = (1 + f_pre) * bytes_per_element * Psi_l + beta_g * Psi_l


def bytes_per_parameter(zero_stage: int, dp=1, *, grad_bytes=4, weight_bytes=2, optimizer_bytes=12):
    """Model-state bytes per parameter (ZeRO paper, grad_bytes=2: 16, 4 + 12/N_d, 2 + 14/N_d,
    16/N_d; Megatron-LM, grad_bytes=4: 18, and 6 + 12/N_d with its distributed optimizer)."""
    return sum(
        model_state_bytes(
            1,
            zero_stage,
            dp,
            grad_bytes=grad_bytes,
            weight_bytes=weight_bytes,
            optimizer_bytes=optimizer_bytes,
        ).values()
    )
