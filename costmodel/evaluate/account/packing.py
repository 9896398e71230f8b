"""Packing beyond the account: a synthetic length distribution, three ways to lay it out, and
what a packed row needs to stay correct.

The account (costmodel.derive.padding) knows only the mean length: B samples padded to S give B * S
slots, perfect packing gives D = B * s_mean. Real samples have a distribution, so:

- bin packing (first-fit decreasing into S-token rows, `greedy_pack`) lands between
  fixed padding and perfect packing: each row's leftover is still padding;
- the attention core grows with sum(s_i^2), which the mean understates:
  sum(s_i^2) = n * mean^2 * (1 + cv^2);
- a packed row is only correct with block-diagonal attention (cu_seqlens), position ids that
  restart at every sample, and a loss mask that drops the prediction across a boundary.

Everything here is deterministic: the lengths come from numpy's default_rng(seed).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

#: Shape of the gamma distribution of sample lengths (coefficient of variation 1/sqrt(shape)
#: before clipping). An assumption: real length distributions are skewed and long-tailed.
DEFAULT_SHAPE = 2.0
DEFAULT_SEED = 0


def _clipped(scale: float, draws: np.ndarray, cap: int) -> np.ndarray:
    return np.clip(np.rint(scale * draws), 1, cap).astype(np.int64)


def synthetic_step(
    n: int, mean: float, cap: int, rng: np.random.Generator, shape: float = DEFAULT_SHAPE
) -> np.ndarray:
    """n sample lengths: gamma(shape) draws, scaled, rounded and clipped to [1, cap], with the
    scale chosen so that the step holds exactly round(n * mean) tokens.

    Clipping at `cap` lowers the mean, so the scale is found by bisection on the clipped sum;
    the last few tokens of rounding are then added to (or taken from) samples with room."""
    if not 1 <= mean <= cap:
        raise ValueError(f"mean {mean} must lie between 1 and the cap {cap}")
    target = int(round(n * mean))
    draws = rng.gamma(shape, 1.0, n)
    if target >= n * cap:
        return np.full(n, cap, dtype=np.int64)
    lo, hi = 0.0, mean / draws.mean()
    while _clipped(hi, draws, cap).sum() < target:
        hi *= 2
    for _ in range(64):
        mid = (lo + hi) / 2
        if _clipped(mid, draws, cap).sum() < target:
            lo = mid
        else:
            hi = mid
    lengths = _clipped(hi, draws, cap)
    order = np.argsort(-draws, kind="stable")  # adjust the longest draws first
    while (residual := target - int(lengths.sum())) != 0:
        step = 1 if residual > 0 else -1
        room = lengths[order] < cap if step > 0 else lengths[order] > 1
        chosen = order[room][: abs(residual)]
        lengths[chosen] += step
    return lengths


def synthetic_steps(
    steps: int,
    n: int,
    mean: float,
    cap: int,
    seed: int = DEFAULT_SEED,
    shape: float = DEFAULT_SHAPE,
) -> list[np.ndarray]:
    """`steps` independent steps of n lengths each (one generator, seeded)."""
    rng = np.random.default_rng(seed)
    return [synthetic_step(n, mean, cap, rng, shape) for _ in range(steps)]


#: Most samples simulated per step: a step with more samples is represented by this many,
#: drawn with the same mean and cap (its ratios, not its totals, carry over). It keeps the
#: first-fit-decreasing packing, which takes time of order samples x rows, within seconds.
MAX_SAMPLES_PER_STEP = 4096


def simulated_steps(
    samples_per_step: int,
    mean: float,
    cap: int,
    lengths: np.ndarray | None = None,
    exact_step: bool = False,
    seed: int = DEFAULT_SEED,
) -> tuple[str, list[np.ndarray]]:
    """The steps a notebook packs, and where they come from: "synthetic" (no lengths file:
    synthetic_steps at the scenario's mean), "file step" (the file is exactly one step and small
    enough to simulate whole: that step), or "file draws" (seeded draws with replacement from the
    file's lengths, `lengths` already cut at seq_len)."""
    n_sim = samples_for(samples_per_step)
    if lengths is None:
        return "synthetic", synthetic_steps(steps_for(n_sim), n_sim, mean, cap, seed)
    lengths = np.asarray(lengths, dtype=np.int64)
    if exact_step and n_sim == samples_per_step:
        return "file step", [lengths]
    rng = np.random.default_rng(seed)
    return "file draws", [rng.choice(lengths, n_sim) for _ in range(steps_for(n_sim))]


def samples_for(samples_per_step: int, at_most: int = MAX_SAMPLES_PER_STEP) -> int:
    """Samples simulated per step: the scenario's samples per step, at most `at_most`."""
    return max(1, min(int(samples_per_step), at_most))


def steps_for(samples_per_step: int, at_least: int = 4000, at_most: int = 50) -> int:
    """How many steps give about `at_least` samples for stable statistics (capped)."""
    return max(1, min(at_most, -(-at_least // samples_per_step)))


def three_ways(steps: Sequence[Sequence[int]], capacity: int) -> dict[str, dict[str, float]]:
    """Slots per step (averaged over the steps) of fixed padding, first-fit-decreasing bins of
    `capacity` tokens, and perfect packing; with rows (sequences of `capacity`) and the speedup
    of each over fixed padding."""
    fixed = ffd = perfect = 0
    rows_fixed = rows_ffd = 0
    for lengths in steps:
        lengths = [int(x) for x in lengths]
        bins = greedy_pack(lengths, capacity)
        fixed += len(lengths) * capacity
        ffd += len(bins) * capacity
        perfect += sum(lengths)
        rows_fixed += len(lengths)
        rows_ffd += len(bins)
    count = len(steps)
    result = {
        "fixed": {"slots": fixed / count, "rows": rows_fixed / count},
        "ffd": {"slots": ffd / count, "rows": rows_ffd / count},
        "perfect": {"slots": perfect / count, "rows": perfect / count / capacity},
    }
    for entry in result.values():
        entry["useful_fraction"] = perfect / count / entry["slots"]
        entry["speedup"] = fixed / count / entry["slots"]
    return result


def square_ratio(lengths: Sequence[int]) -> float:
    """sum(s_i^2) / (n * mean^2) = n * sum(s_i^2) / (sum s_i)^2 (= 1 + cv^2, at least 1)."""
    values = np.asarray(lengths, dtype=np.float64)
    return float(len(values) * np.sum(values**2) / np.sum(values) ** 2)


# ------------------------------------------------------------------ one packed row


def cu_seqlens(lengths: Sequence[int]) -> list[int]:
    """Cumulative sequence boundaries [0, l0, l0+l1, ...] (FlashAttention varlen)."""
    return [0, *np.cumsum(lengths).tolist()]


def sample_ids(lengths: Sequence[int]) -> np.ndarray:
    """Which sample each token of the packed row belongs to."""
    return np.repeat(np.arange(len(lengths)), lengths)


def position_ids(lengths: Sequence[int]) -> list[int]:
    """Positions restarted at 0 for every sample (RoPE sees each sample from its start)."""
    return [p for length in lengths for p in range(int(length))]


def causal_mask(total: int) -> np.ndarray:
    """Plain causal mask over a row of `total` tokens: query i sees keys j <= i (1 = seen)."""
    return np.tril(np.ones((total, total), dtype=np.int64))


def block_causal_mask(lengths: Sequence[int]) -> np.ndarray:
    """Causal within each sample, nothing across samples (block-diagonal)."""
    ids = sample_ids(lengths)
    return causal_mask(len(ids)) * (ids[:, None] == ids[None, :])


def loss_mask(lengths: Sequence[int]) -> list[int]:
    """1 where token t's next-token target belongs to the same sample, 0 at each sample's last
    token (its 'next token' is the first token of the next sample, or beyond the row)."""
    return [0 if p == int(length) - 1 else 1 for length in lengths for p in range(int(length))]


def cross_sample_pairs(lengths: Sequence[int]) -> int:
    """(query, key) pairs that a plain causal mask allows across samples:
    sum over i < j of l_i * l_j = ((sum l)^2 - sum l^2) / 2."""
    total = int(np.sum(lengths))
    return (total * total - int(np.sum(np.asarray(lengths, dtype=np.int64) ** 2))) // 2


def cross_sample_share(bins: Sequence[Sequence[int]]) -> float:
    """Share of the causal (query, key) pairs of packed rows that cross a sample boundary when
    the mask is plain causal: the pairs that leak."""
    leaked = sum(cross_sample_pairs(row) for row in bins)
    causal = sum(sum(row) * (sum(row) + 1) // 2 for row in bins)
    return leaked / causal


def greedy_pack(lengths, capacity):
    """First-fit decreasing: pack sample lengths into bins of `capacity` tokens.

    Returns a list of bins, each a list of lengths. A sample longer than the capacity is an
    error (it would be truncated, which changes D).

    Each sample goes to the first bin (lowest index) with room for it, found in a tree of the
    bins' largest free room (log n a sample, not a scan of every bin: 4,000 samples of a step
    filled some 2,000 rows one at a time)."""
    ordered = sorted(lengths, reverse=True)
    if ordered and ordered[0] > capacity:
        raise ValueError(f"sample of {ordered[0]} tokens exceeds the bin capacity {capacity}")
    size = 1
    while size < max(len(ordered), 1):
        size *= 2
    most = [-1] * (2 * size)  # most[node]: the largest free room under it (-1: no bin yet)
    bins: list[list[int]] = []
    for length in ordered:
        if most[1] >= length:  # the leftmost bin with room for it
            node = 1
            while node < size:
                node = 2 * node if most[2 * node] >= length else 2 * node + 1
            index = node - size
            bins[index].append(length)
        else:  # a new bin
            index = len(bins)
            bins.append([length])
            node = index + size
            most[node] = capacity
        most[node] -= length
        node //= 2
        while node:
            most[node] = max(most[2 * node], most[2 * node + 1])
            node //= 2
    return bins
