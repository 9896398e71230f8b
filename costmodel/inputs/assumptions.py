"""Every value the course assumes and the scenario does not decide, once, with its source.

A notebook or the report that rests on one of these names it (`assumed(name)`), so that a team
can see which conclusions are the course's and not its own.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The course's model, as shipped with the package (a preset): its shape stands in for widths
#: a scenario without a model config does not give.
COURSE_MODEL = "qwen3.6-35b-a3b"


@dataclass(frozen=True)
class Assumption:
    value: object
    source: str


ASSUMPTIONS: dict[str, Assumption] = {
    "expert_parallel": Assumption(8, "course section 06: the project's EP = 8"),
    "micro_batch_speedup": Assumption(
        (1.1, 1.3), "course section 06: micro batch 1 -> 2, '1.1~1.3x', not derived"
    ),
    "communication_share": Assumption(
        0.03, "course section 06: communication is under 3% of the step"
    ),
    "head_dim": Assumption(
        128,
        "course section 06.6: head_dim is 'usually 128' (used only when the scenario gives "
        "neither head_dim nor num_heads; Qwen3.6 itself uses 256)",
    ),
    "ce_chunks": Assumption(
        8, "chunked cross-entropy pieces; the course's 15 GB -> 2 GB is about 1/8"
    ),
    "linear_attention_chunk": Assumption(
        64,
        "chunk size of the chunked gated-delta rule: chunk_size=64 in transformers' "
        "torch_chunk_gated_delta_rule and the flash-linear-attention kernels",
    ),
    "attention_kernel_speedup": Assumption(
        1.5,
        "a newer attention kernel (e.g. FlashAttention "
        "3 on Hopper) over the current one; to be measured",
    ),
}


def assumed(name: str):
    return ASSUMPTIONS[name].value
