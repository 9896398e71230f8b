"""The most loaded pipeline stage, one rule for the step time (evaluate.simulate.compute_time), the memory
(evaluate.memory.gpu_memory) and the plan's search (evaluate.plan.plan_batch): the model's layer kinds, the
ceil(L / PP) layers the stage holds (or a stage's layers of a stated uneven split: `stage_sizes`),
taken from the heaviest kinds first (an upper bound whatever the placement), and their figures
added one layer after another.

Each formula of the models is written once, in plain arithmetic: the report calls it with one
layout's numbers (without importing NumPy: a cold `costmodel report` stays cheap), the plan and
the sweep with NumPy's arrays over many layouts. The few operations that differ between the two
(`maximum`, `minimum`, `where`: costmodel.derive.lanes; the sum of a stage's layers, here) dispatch on
what they are given: NumPy's where one argument is its array, Python's otherwise; the floats are
the same either way (IEEE arithmetic, one operation after another in the same order).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections import Counter

from costmodel.derive.lanes import (  # noqa: F401 (stage's names)
    as_float,
    maximum,
    minimum,
    numpy_of,
    where,
)
from costmodel.inputs.shape import FULL_ATTENTION, ModelShape
from costmodel.inputs.stages import stage_split

#: The most bytes an array over many layouts holds where its size grows with more than the
#: layouts (a few such arrays are alive at once): a stage's layers in `stage_sum` (55,440 layers
#: over thousands of layouts are added in blocks of layers), the schedules in the plan's peaks
#: (evaluate.plan.plan_batch). The search's memory stays bounded for any model.
CHUNK_BYTES = 32 * 2**20


def layer_kinds(shape: ModelShape, mtp: int) -> tuple[tuple[str, str, int], ...]:
    """(mixer, mlp, count) of the model's layers in the order the kinds first appear, its `mtp`
    trained MTP layers (full attention) counted: the mixer `mla`, `attention` (full attention)
    or `gated_deltanet`, the MLP `moe` or `dense`."""
    return _kinds_of(shape.layer_types, shape.moe_layer_flags, shape.mla, bool(shape.is_moe), mtp)


@functools.lru_cache(maxsize=64)
def _kinds_of(layer_types, moe_layer_flags, mla, is_moe, mtp) -> tuple[tuple[str, str, int], ...]:
    """`layer_kinds`, built once per structure (the plan's search asks for thousands of layouts
    of one model, the sweep for many widths of one structure)."""
    counts: dict[tuple[str, str], int] = {}
    mixer_full = "mla" if mla else "attention"
    # counted in C (a model may have 100,000 layers), in the order the kinds first appear
    for (layer_type, moe), n in Counter(zip(layer_types, moe_layer_flags)).items():
        mixer = mixer_full if layer_type == FULL_ATTENTION else "gated_deltanet"
        key = (mixer, "moe" if moe else "dense")
        counts[key] = counts.get(key, 0) + n
    if mtp:
        key = (mixer_full, "moe" if is_moe else "dense")
        counts[key] = counts.get(key, 0) + mtp
    return tuple((mixer, mlp, n) for (mixer, mlp), n in counts.items())


def routed_experts(shape: ModelShape, mtp: int) -> float:
    """The routed experts' parameters: the model's layers' and those of its `mtp` trained MTP
    layers (an MoE model's MTP layer holds a routed-expert layer like its layers: DeepSeek-V3's
    11.3 B), split by EP as theirs are, not dense parameters on every GPU."""
    experts = as_float(shape.breakdown["routed_experts_total"])
    if mtp and shape.is_moe and experts:
        experts += experts / sum(shape.moe_layer_flags) * mtp
    return experts


def stage_sizes(sc) -> dict[str, int] | None:
    """The layers of the first stage, of a middle one (PP > 2) and of the last (its MTP layers
    besides: Megatron-LM builds the MTP block on the last stage) where the scenario states an
    uneven split (first_stage_layers, last_stage_layers, or the embedding and the loss counted
    as layers: inputs.stages.stage_split); None for the
    even split, where every figure counts ceil(L / PP) layers (`heaviest_stage`)."""
    pp = sc.pipeline_parallel
    split = stage_split(
        sc.num_layers,
        pp,
        sc.first_stage_layers,
        sc.last_stage_layers,
        sc.embedding_in_pipeline_split,
        sc.loss_in_pipeline_split,
    )
    if split is None:
        return None
    sizes = {"first": split[0], "middle": split[1], "last": split[2] + sc.num_mtp_layers}
    if pp <= 2:
        del sizes["middle"]
    return sizes


def heaviest_stage(weights, counts, pp: int, room: int | None = None) -> list[tuple[int, int]]:
    """The most loaded stage's layers as runs (kind, layers) heaviest first: ceil(L / PP) of the
    L layers (or `room` layers: a stage of an uneven split, `stage_sizes`), taken from the
    heaviest kinds (`weights`; equal kinds in their order)."""
    room = -(-sum(counts) // pp) if room is None else room
    runs = []
    for kind in sorted(range(len(counts)), key=lambda k: -weights[k]):
        take = min(counts[kind], room)
        if take > 0:
            runs.append((kind, take))
        room -= take
    return runs


def stage_sum(rows, runs: list[tuple[int, int]]):
    """Each figure of the stage's layers summed, one layer after another (not n x a layer: the
    floats of adding them): `rows[k]` one layer of kind k, a dict of numbers, or NumPy's array
    [kind, figure, layout] for many layouts of one order of kinds (added by NumPy's accumulate,
    in blocks of at most CHUNK_BYTES, each starting from the sum so far: the same additions)."""
    np = numpy_of(rows)
    if np is None:
        keys = list(rows[0]) if rows else []
        totals = {}
        for key in keys:  # one addition after another (not sum: Python 3.12's compensates)
            total = 0.0
            for kind, n in runs:
                total = functools.reduce(operator.add, itertools.repeat(rows[kind][key], n), total)
            totals[key] = total
        return totals
    layers = [kind for kind, n in runs for _ in range(n)]
    block = max(1, CHUNK_BYTES // rows[0].nbytes - 1)  # layers besides the sum so far
    total = np.zeros(rows.shape[1:])
    for start in range(0, len(layers), block):
        added = rows[layers[start : start + block]]
        if start:
            added = np.concatenate([total[None], added])
        total = np.add.accumulate(added, axis=0)[-1]
    return total
