"""Where the groups of a parallel layout run (costmodel.evaluate.communication.communication's placement):
ranks are numbered TP fastest, then CP, then EP, then the rest of DP, then PP outermost; rank r
sits on node r // gpus_per_node. `placement` says whether a kind of group spans nodes and the
fewest of its ranks a group has on one node, from the layout's strides (not rank by rank).
"""

from __future__ import annotations

import functools
import math

#: The placement rule, as the result states it.
PLACEMENT_RULE = (
    "ranks numbered TP fastest, then CP, EP, the rest of DP, PP outermost; node = rank // "
    "gpus_per_node; a group runs intra-node when every group of its kind lies on one node, "
    "else it uses NVLink and the network at once, g_n of its ranks on each node"
)

#: With expert_tensor_parallel (MoE parallel folding), the expert layers' groups (EP, DP
#: experts) are placed on their own order: Megatron-Core's expert rank generator numbers a
#: stage's ranks ETP fastest, then EP, then the expert data parallel EDP (parallel_state's
#: `expert_decoder_rank_generator`, order tp-ep-dp-pp), whatever CP the dense layers use.
EXPERT_PLACEMENT_RULE = (
    f"{PLACEMENT_RULE}; the expert layers' groups (EP, DP experts) numbered on their own: "
    "ETP fastest, then EP, the expert data parallel EDP, PP outermost (MoE parallel folding)"
)


def expert_sizes(etp: int, ep: int, edp: int, pp: int) -> tuple[int, ...]:
    """The expert layers' layout as sizes of DIMS (innermost first): ETP in TP's place, no CP
    (folded into EDP), EP, EDP, PP."""
    return (etp, 1, ep, edp, pp)


#: The parallel dimensions, innermost first, and the ones each group varies.
DIMS = ("tp", "cp", "ep", "edp", "pp")
GROUPS = {
    "TP": ("tp",),
    "CP": ("cp",),
    "EP": ("ep",),
    "DP": ("cp", "ep", "edp"),  # dense weights: every DP and CP rank holds them
    "DP experts": ("cp", "edp"),  # an expert shard: the same EP rank of every EP group
    "PP": ("pp",),
}


@functools.lru_cache(maxsize=256)
def placement(sizes: tuple[int, ...], varies: tuple[str, ...], gpus_per_node: int):
    """(spans nodes, g_n) for the groups that vary the dimensions `varies`, with `sizes` the
    sizes of DIMS (innermost first): whether any such group spans nodes, and the fewest of its
    ranks that a group has on one node.

    Computed from the layout's strides, not rank by rank (a job of 10 million GPUs is as quick
    as one of 8): `_fewest_on_a_node` finds the fewest ranks any group has on any node it
    touches; a group spans nodes exactly when that is fewer than the group's size (a group with
    all of its ranks on one node has them all there)."""
    varying = tuple(dim in varies for dim in DIMS)
    group = math.prod(size for size, var in zip(sizes, varying) if var)
    fewest = _fewest_on_a_node(tuple(sizes), varying, gpus_per_node)
    return fewest < group, fewest


def _fewest_on_a_node(sizes: tuple[int, ...], varying: tuple[bool, ...], per_node: int) -> int:
    """The fewest ranks of one group on one node, over every group and node, without visiting
    every rank.

    Rank r sits on node r // G (G = per_node) and belongs to the group of its fixed (not
    varying) coordinates. A node holds G consecutive ranks; what it holds of each group depends
    only on where those ranks fall in the layout's strides, and few positions differ. Let `low`
    be the largest stride below G and `block` >= G the next one (a block of ranks shares every
    coordinate above it). A node inside one block looks like any other node whose first rank
    has the same remainder modulo `low` (moving by `low` changes one coordinate of every rank
    in step, keeping which ranks share a group). A node across the border of blocks m - 1 and m looks like any other
    with the same offset of the border modulo G and the same answer to "is every coordinate the
    border changes a varying one" (then the ranks on both sides can share groups). So one node
    of each kind is counted, rank by rank, with the world's last node when it is partial: at
    most about 3 G nodes of G ranks, whatever the number of GPUs."""
    world = math.prod(sizes)
    if per_node == 1:
        return 1
    strides = [math.prod(sizes[:i]) for i in range(len(sizes) + 1)]
    k = next((i for i, stride in enumerate(strides) if stride >= per_node), None)
    starts = {("last", 0): world - world % per_node} if world % per_node else {}
    if k is None:  # the whole world is on one (partial) node
        return _fewest_in([0], sizes, varying, strides, per_node, world)
    low, block = strides[k - 1], strides[k]
    blocks = world // block
    # nodes inside one block: one per remainder of their first rank modulo `low`
    kinds = low // math.gcd(per_node, low)
    inside: dict[int, int] = {}
    for b in range(min(blocks, per_node // math.gcd(per_node, block))):
        first = -(-b * block // per_node) * per_node
        count = (b * block + block - per_node - first) // per_node + 1
        for x in range(first, first + per_node * min(count, kinds), per_node):
            inside.setdefault(x % low, x)
        if len(inside) == kinds:
            break
    starts.update((("inside", kind), x) for kind, x in inside.items())
    # nodes across the border between blocks m - 1 and m (m < blocks), by the lowest coordinate
    # above the block that the border changes (c) and the border's offset on its node
    place = 1
    for c in range(k, len(sizes)):
        if sizes[c] > 1:
            all_varying = all(varying[i] for i in range(k, c + 1) if sizes[i] > 1)
            # borders m = place x n with n not a multiple of sizes[c]; n up to 2 G meets every
            # offset a border can have (of two n with the same remainder modulo G, one is not
            # a multiple of sizes[c], unless every such n is)
            for n in range(1, min((blocks - 1) // place, 2 * per_node) + 1):
                border = place * n * block
                offset = border % per_node
                if n % sizes[c] and offset and border - offset + per_node <= world:
                    starts.setdefault(("across", offset, all_varying), border - offset)
        place *= sizes[c]
    return _fewest_in(list(starts.values()), sizes, varying, strides, per_node, world)


def _fewest_in(starts, sizes, varying, strides, per_node: int, world: int) -> int:
    """The fewest ranks of one group on the nodes that begin at `starts`, rank by rank (at most
    about 3 G nodes of G ranks: plain Python, no NumPy to import)."""
    fewest = per_node
    varied = [(size, stride) for size, stride, var in zip(sizes, strides, varying) if var]
    for first in starts:
        counts: dict[int, int] = {}
        for rank in range(first, min(first + per_node, world)):  # the last node may be partial
            # the group's first rank: the rank with its varying coordinates set to 0
            base = rank - sum(rank // stride % size * stride for size, stride in varied)
            counts[base] = counts.get(base, 0) + 1
        fewest = min(fewest, min(counts.values()))
    return fewest
