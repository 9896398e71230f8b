"""Parallel layouts for one cluster: the context-parallel sizes that divide the GPUs, the
data-parallel size they leave, the expert-parallel sizes that divide both, and the course's
default EP."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.derive.plain import divisors
from costmodel.inputs.assumptions import fitted_expert_parallel
from costmodel.inputs.layout import cp_divides


@dataclass(frozen=True)
class Layout:
    """One context-parallel size on a cluster with no TP or PP: DP = GPUs / CP."""

    cp: int
    dp: int
    samples_per_rank: float  # global batch / DP
    batch_divides: bool  # each DP rank gets a whole number of samples
    seq_divides: bool  # seq_len splits into 2 * CP equal chunks (inputs.layout.cp_divides)
    expert_parallel: tuple[int, ...]  # EP sizes that divide DP (and the experts)

    @property
    def usable(self) -> bool:
        return self.batch_divides and self.seq_divides

    def allows(self, ep: int) -> bool:
        return self.usable and ep in self.expert_parallel

    def micro_batches(self, micro_batch: int) -> bool:
        """Whether each rank's samples split into micro batches of this size."""
        return self.batch_divides and int(self.samples_per_rank) % micro_batch == 0


def layouts(
    num_gpus: int, global_batch: int, seq_len: int, num_experts: int, max_cp: int = 16
) -> list[Layout]:
    """Every CP that divides the GPU count (up to max_cp), with DP = GPUs / CP and the EP
    sizes that divide DP and the number of experts (a dense model has EP = 1 only)."""
    rows = []
    for cp in divisors(num_gpus):
        if cp > max_cp:
            break
        dp = num_gpus // cp
        eps = tuple(e for e in divisors(dp) if num_experts and num_experts % e == 0) or (1,)
        rows.append(
            Layout(cp, dp, global_batch / dp, global_batch % dp == 0, cp_divides(seq_len, cp), eps)
        )
    return rows


def valid_pairs(
    num_gpus: int, global_batch: int, seq_len: int, num_experts: int, max_cp: int = 16
) -> list[tuple[int, int]]:
    """(CP, EP) pairs that satisfy every divisibility constraint."""
    return [
        (lay.cp, ep)
        for lay in layouts(num_gpus, global_batch, seq_len, num_experts, max_cp)
        if lay.usable
        for ep in lay.expert_parallel
    ]


def default_ep_size(num_experts: int, num_gpus: int, preferred: int | None = None) -> int:
    """The largest EP size <= preferred (default: the course's EP) that divides both the experts
    and the GPUs (1 if dense): the rule `inputs.assumptions.fitted_expert_parallel`."""
    return fitted_expert_parallel(num_experts, num_gpus, preferred)
