"""The router, simulated: expert popularity (Zipf), top-k routing of a step's tokens, expert
placement on EP ranks, and the straggler factor (the most loaded rank over the mean)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Most experts `simulate_router` is used for in the notebooks: it draws a random score per token
#: and expert, so its time and memory grow with tokens x experts.
MAX_SIMULATED_EXPERTS = 2048


def zipf_popularity(num_experts: int, skew: float) -> np.ndarray:
    """Expert popularity p_i proportional to (i + 1)^-skew (skew 0 = uniform), summing to 1."""
    weights = np.arange(1, num_experts + 1, dtype=float) ** -float(skew)
    return weights / weights.sum()


def route_top_k(
    popularity: np.ndarray, num_tokens: int, top_k: int, rng: np.random.Generator
) -> np.ndarray:
    """Tokens routed to top_k distinct experts each (Gumbel top-k: sampling without replacement
    in proportion to popularity). Returns the token count of every expert. Tokens are scored in
    chunks of about 2**20 scores (the same random stream as one draw), to bound the memory."""
    log_popularity = np.log(popularity).astype(np.float32)
    counts = np.zeros(popularity.size, dtype=np.int64)
    chunk = max(1, 2**20 // popularity.size)
    for start in range(0, num_tokens, chunk):
        rows = min(chunk, num_tokens - start)
        uniform = rng.random((rows, popularity.size), dtype=np.float32)
        gumbel = -np.log(-np.log(np.maximum(uniform, np.finfo(np.float32).tiny)))
        chosen = np.argpartition(-(log_popularity + gumbel), top_k - 1, axis=1)[:, :top_k]
        counts += np.bincount(chosen.ravel(), minlength=popularity.size)
    return counts


def place_experts(num_experts: int, ep_size: int, rng: np.random.Generator) -> np.ndarray:
    """Rank of each expert: a random placement with E / ep_size experts per rank."""
    if num_experts % ep_size:
        raise ValueError(f"{num_experts} experts cannot be split evenly over {ep_size} ranks")
    return rng.permutation(np.repeat(np.arange(ep_size), num_experts // ep_size))


def place_experts_greedy(counts, ep_size: int) -> np.ndarray:
    """Rank of each expert, placed knowing the loads: hottest first, each onto the least-loaded
    rank that still has room (E / ep_size experts per rank)."""
    counts = np.asarray(counts)
    if counts.size % ep_size:
        raise ValueError(f"{counts.size} experts cannot be split evenly over {ep_size} ranks")
    room = np.full(ep_size, counts.size // ep_size)
    loads = np.zeros(ep_size)
    placement = np.empty(counts.size, dtype=int)
    for expert in np.argsort(-counts, kind="stable"):
        open_ranks = np.flatnonzero(room > 0)
        rank = open_ranks[np.argmin(loads[open_ranks])]
        placement[expert] = rank
        loads[rank] += counts[expert]
        room[rank] -= 1
    return placement


def rank_loads(counts, placement, ep_size: int) -> np.ndarray:
    """Tokens each EP rank processes, given the expert counts and the placement."""
    return np.bincount(placement, weights=counts, minlength=ep_size)


def straggler_factor(loads) -> float:
    """max / mean: how much longer the busiest worker runs than an even split would take."""
    loads = np.asarray(loads, dtype=float)
    return float(loads.max() / loads.mean())


@dataclass(frozen=True)
class RouterRun:
    skew: float
    expert_counts: np.ndarray
    rank_loads: np.ndarray  # under the first random placement
    hottest_expert_share: float  # share of routed assignments the hottest expert takes
    expert_factor: float  # max / mean over experts
    rank_factors: np.ndarray  # straggler factor over EP ranks, one per random placement
    greedy_factor: float  # straggler factor with the load-aware greedy placement

    @property
    def rank_factor(self) -> float:
        """Straggler factor of the first random placement."""
        return float(self.rank_factors[0])


def simulate_router(
    num_experts: int,
    top_k: int,
    ep_size: int,
    num_tokens: int,
    skew: float,
    seed: int,
    placements: int = 1,
) -> RouterRun:
    """Route num_tokens tokens with a Zipf-like popularity, place the experts on ep_size ranks
    (`placements` random placements, and one greedy load-aware placement), and measure the
    imbalance. Deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    popularity = zipf_popularity(num_experts, skew)
    counts = route_top_k(popularity, num_tokens, top_k, rng)
    random_loads = [
        rank_loads(counts, place_experts(num_experts, ep_size, rng), ep_size)
        for _ in range(max(1, placements))
    ]
    greedy = rank_loads(counts, place_experts_greedy(counts, ep_size), ep_size)
    return RouterRun(
        skew=float(skew),
        expert_counts=counts,
        rank_loads=random_loads[0],
        hottest_expert_share=float(counts.max() / counts.sum()),
        expert_factor=straggler_factor(counts),
        rank_factors=np.array([straggler_factor(x) for x in random_loads]),
        greedy_factor=straggler_factor(greedy),
    )
