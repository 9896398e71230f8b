"""Why MoE and long sequences make thin, uneven work: GEMM shapes, permute traffic, stragglers.

Tokens per expert. A router sends each token to k of E experts, so over a step an expert sees
D k / E tokens on average (the course's view). A GEMM, though, runs per micro batch and layer:
a micro batch of b sequences fills b S token slots; with expert parallelism (EP) over a group
of e_p ranks, the all-to-all gathers the tokens of the group's e_p micro batches, so one
expert's GEMM has

    M_expert = e_p * b * S * k / E      rows, against      M_dense = b * S

for a dense FFN on one rank. The ratio is e_p k / E.

Permute / unpermute. Before the experts, every token is copied once per chosen expert and
regrouped by expert (permute); after them, the k outputs are gathered back (unpermute). Each
way moves tokens x hidden x beta x k bytes and does no FLOPs: memory-bound work whose time at
best is bytes / HBM bandwidth.

Load imbalance. A skewed router makes some experts hot. The experts live on EP ranks; the MoE
layer ends when the busiest rank ends, so the layer's time scales with the straggler factor
max(rank load) / mean(rank load) (1 = perfectly even). `simulate_router` draws it from a
seeded Zipf-like expert popularity, top-k routing without replacement (Gumbel top-k) and
random balanced placements of experts on ranks (which hot experts share a rank is luck, so
several placements are drawn), next to a load-aware greedy placement.

Arithmetic intensity of a weight GEMM (m x k)(k x n) with m tokens grows with m and saturates at
2 k n / (beta (k + n)); `rows_for_intensity` solves for the m that reaches a given intensity
(a machine balance), from `costmodel.roofline.gemm_intensity`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import sympy as sp

from costmodel import flops, roofline
from costmodel.symbols import E, S, b_micro, bytes_per_element, h, k, kk, m, n

#: EP group size: ranks over which one layer's experts are spread.
ep = sp.Symbol("e_p", positive=True)
#: tokens that go through one MoE layer (on one rank, or in a step).
tokens = sp.Symbol("t", positive=True)

#: The course's view: tokens per expert over a whole step (costmodel.flops).
tokens_per_expert_step = flops.tokens_per_expert
#: Rows of one dense FFN GEMM: the token slots of one micro batch.
dense_rows = b_micro * S
#: Rows of one expert's GEMM per micro batch and layer, with an EP group of e_p ranks.
expert_rows = ep * b_micro * S * k / E

#: Bytes one direction (permute, or unpermute) moves for t tokens: every token copied k times.
permute_bytes = tokens * h * bytes_per_element * k

#: Intensity of a weight GEMM with m token rows, weight (k x n), as m grows without bound.
intensity_limit = sp.limit(roofline.gemm_intensity, m, sp.oo)

#: Most experts `simulate_router` is used for in the notebooks: it draws a random score per token
#: and expert, so its time and memory grow with tokens x experts.
MAX_SIMULATED_EXPERTS = 2048
#: The course's expert parallelism (section 3 of the course: EP = 8).
COURSE_EP_SIZE = 8
#: Preset whose expert width stands in when the scenario names no model config.
EXPERT_WIDTH_PRESET = "qwen3.6-35b-a3b"


def default_ep_size(num_experts: int, num_gpus: int, preferred: int = COURSE_EP_SIZE) -> int:
    """The largest EP size <= preferred that divides both the experts and the GPUs (1 if dense)."""
    if num_experts <= 0:
        return 1
    return max(d for d in range(1, preferred + 1) if num_experts % d == 0 and num_gpus % d == 0)


@dataclass(frozen=True)
class Width:
    value: int
    source: str  # "config" (the scenario's model), "preset" or "rule"
    detail: str  # where the figure comes from, in English


def expert_width(model: str | None = None) -> Width:
    """Width of one routed expert (moe_intermediate_size): from the scenario's model config if it
    names one with experts, else from the course model's preset (an assumption)."""
    from costmodel import models

    if model:
        shape = models.load_shape(model)
        if shape.num_experts and shape.moe_intermediate_size:
            return Width(shape.moe_intermediate_size, "config",
                         f"moe_intermediate_size of {shape.name}")
    shape = models.load_shape(EXPERT_WIDTH_PRESET)
    return Width(shape.moe_intermediate_size, "preset",
                 f"moe_intermediate_size of {EXPERT_WIDTH_PRESET}")


def dense_ffn_width(hidden: int, model: str | None = None) -> Width:
    """Width of a dense FFN: intermediate_size of the scenario's model config if it has a dense
    one, else the course's rule 4 x hidden."""
    if model:
        from costmodel import models

        shape = models.load_shape(model)
        if shape.intermediate_size and not shape.num_experts:
            return Width(shape.intermediate_size, "config", f"intermediate_size of {shape.name}")
    return Width(4 * int(hidden), "rule", "4 x hidden_size (the course's dense FFN)")


@functools.lru_cache(maxsize=None)
def _numeric():
    """Fast numeric forms of the roofline expressions (lambdified once, numpy-ready)."""
    target = sp.Symbol("target", positive=True)
    (rows,) = sp.solve(sp.Eq(roofline.gemm_intensity, target), m)
    args = (kk, n, bytes_per_element)
    return (sp.lambdify((m, *args), roofline.gemm_intensity, "numpy"),
            sp.lambdify((target, *args), rows, "math"))


def intensity(rows, k_dim, n_dim, beta: int = 2):
    """Arithmetic intensity of [rows, k_dim] x [k_dim, n_dim] (roofline.gemm_intensity, lambdified;
    rows may be a numpy array)."""
    return _numeric()[0](rows, k_dim, n_dim, beta)


def gemm(rows, hidden, width, beta: int = 2) -> dict[str, float]:
    """The up projection [rows, hidden] x [hidden, width] of an FFN: shape, FLOPs, intensity."""
    rows, hidden, width = float(rows), int(hidden), int(width)
    return {"m": rows, "k": hidden, "n": width, "flops": 2 * rows * hidden * width,
            "intensity": float(intensity(rows, hidden, width, beta))}


def rows_for_intensity(target, hidden, width, beta: int = 2) -> float | None:
    """Token rows m at which a weight GEMM [m, hidden] x [hidden, width] reaches `target`
    FLOP/byte (solved from roofline.gemm_intensity); None when even m -> infinity stays below."""
    try:
        rows = float(_numeric()[1](float(target), hidden, width, beta))
    except ZeroDivisionError:  # target equals the limit: reached only as m -> infinity
        return None
    return rows if rows > 0 else None


# ------------------------------------------------------------------ the simulated router

def zipf_popularity(num_experts: int, skew: float) -> np.ndarray:
    """Expert popularity p_i proportional to (i + 1)^-skew (skew 0 = uniform), summing to 1."""
    weights = np.arange(1, num_experts + 1, dtype=float) ** -float(skew)
    return weights / weights.sum()


def route_top_k(popularity: np.ndarray, num_tokens: int, top_k: int,
                rng: np.random.Generator) -> np.ndarray:
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


def simulate_router(num_experts: int, top_k: int, ep_size: int, num_tokens: int, skew: float,
                    seed: int, placements: int = 1) -> RouterRun:
    """Route num_tokens tokens with a Zipf-like popularity, place the experts on ep_size ranks
    (`placements` random placements, and one greedy load-aware placement), and measure the
    imbalance. Deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    popularity = zipf_popularity(num_experts, skew)
    counts = route_top_k(popularity, num_tokens, top_k, rng)
    random_loads = [rank_loads(counts, place_experts(num_experts, ep_size, rng), ep_size)
                    for _ in range(max(1, placements))]
    greedy = rank_loads(counts, place_experts_greedy(counts, ep_size), ep_size)
    return RouterRun(skew=float(skew), expert_counts=counts, rank_loads=random_loads[0],
                     hottest_expert_share=float(counts.max() / counts.sum()),
                     expert_factor=straggler_factor(counts),
                     rank_factors=np.array([straggler_factor(x) for x in random_loads]),
                     greedy_factor=straggler_factor(greedy))
