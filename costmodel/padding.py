"""Fixed-length padding: how many token slots a step computes, and how many are real.

Every sample is padded to the configured length S, so a step fills B * S slots while only
D = B * s_mean are real tokens. If the step time is proportional to the slots computed
(the GEMMs run on pad tokens too), perfect packing removes the waste and the step shrinks by
slots / D.
"""

from __future__ import annotations

from costmodel.symbols import B, D, S, T, s_mean
from costmodel.utilization import mfu

tokens_in_batch = B * s_mean  # D in terms of the batch
slots = B * S
useful_fraction = D / slots
waste_fraction = 1 - useful_fraction
packing_speedup = slots / D
step_time_after_packing = T / packing_speedup
mfu_after_packing = mfu * packing_speedup


def greedy_pack(lengths, capacity):
    """First-fit decreasing: pack sample lengths into bins of `capacity` tokens.

    Returns a list of bins, each a list of lengths. A sample longer than the capacity is an
    error (it would be truncated, which changes D)."""
    bins: list[list[int]] = []
    room: list[int] = []
    for length in sorted(lengths, reverse=True):
        if length > capacity:
            raise ValueError(f"sample of {length} tokens exceeds the bin capacity {capacity}")
        for index, free in enumerate(room):
            if length <= free:
                bins[index].append(length)
                room[index] -= length
                break
        else:
            bins.append([length])
            room.append(capacity - length)
    return bins
