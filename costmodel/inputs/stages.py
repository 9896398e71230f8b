"""The layers of each pipeline stage: the even split (every figure counts ceil(num_layers / PP)
layers for the most loaded stage), Megatron-LM's uneven first and last stages
(first_stage_layers, last_stage_layers), or its split that counts the embedding and the loss as
layers (embedding_in_pipeline_split, loss_in_pipeline_split), and the check that it divides."""

from __future__ import annotations

import math
from typing import Any

#: The scenario keys that split the layers over the stages otherwise than evenly.
UNEVEN_KEYS = (
    "first_stage_layers",
    "last_stage_layers",
    "embedding_in_pipeline_split",
    "loss_in_pipeline_split",
)


def stage_split(
    num_layers: int, pp: int, first=None, last=None, embedding=False, loss=False
) -> tuple[int, int, int] | None:
    """(first, each middle, last) layers of the pipeline stages as Megatron-LM builds them
    (megatron/core/transformer/transformer_block.py, get_num_layers_to_build): the first and the
    last stage hold num_layers_in_first/last_pipeline_stage where set, the other stages the rest
    evenly; with the embedding or the loss counted as a layer (`embedding`, `loss`: Megatron-LM's
    account_for_embedding/loss_in_pipeline_split), every stage an equal share of the layers and
    those, the first stage one layer fewer for the embedding, the last one fewer for the loss;
    MTP layers come on the last stage besides (the callers add them). None where nothing is
    set: every figure then counts ceil(num_layers / PP) layers for the most loaded stage.
    Whether it divides is `stage_split_refusal`'s (an uneven rest here is rounded down)."""
    if (embedding or loss) and pp > 1:  # one stage holds all: nothing to split
        each = (num_layers + embedding + loss) // pp
        return (each - embedding, each, each - loss)
    if first is None and last is None:
        return None
    given = [n for n in (first, last) if n is not None]
    left = pp - len(given)
    each = (num_layers - sum(given)) // left if left > 0 else 0
    return (each if first is None else first, each, each if last is None else last)


def stage_split_refusal(values: dict[str, Any]) -> tuple[str, Any, str] | None:
    """What inputs.layout refuses in one line (key, value, what is allowed), or None where
    first_stage_layers and last_stage_layers are as Megatron-LM accepts them: a pipeline of at
    least 2 stages, the rest of the layers an equal whole share (at least one layer) of each
    other stage ("the left over layers must be divisible by left over stages"), all of them on
    the two stages of a 2-stage pipeline, and under interleaved 1F1B every stage's layers a
    multiple of virtual_pipeline (TransformerConfig's check of the first and last stages); and
    the embedding and the loss counted in the split (`_counted_refusal`)."""
    first, last = values.get("first_stage_layers"), values.get("last_stage_layers")
    if values.get("embedding_in_pipeline_split") or values.get("loss_in_pipeline_split"):
        return _counted_refusal(values, first, last)
    if first is None and last is None:
        return None
    key, value = ("last_stage_layers", last) if last is not None else ("first_stage_layers", first)
    layers, pp = values["num_layers"], values["pipeline_parallel"]
    if pp == 1:
        return (key, value, "null with pipeline_parallel 1 (one stage holds all)")
    given = [n for n in (first, last) if n is not None]
    rest, left = layers - sum(given), pp - len(given)
    if (left == 0 and rest != 0) or (left and (rest < left or rest % left)):
        stages = f"the other {left} stage(s)" if left else "no other stage"
        return (
            key,
            value,
            f"a count that leaves {stages} an equal whole share of the other layers: num_layers "
            f"({layers}) minus the stated stages' ({sum(given)}) = {rest} layers"
            + (f", at least one a stage and a multiple of {left}" if left else ", must be 0"),
        )
    chunks = values.get("virtual_pipeline")
    split = stage_split(layers, pp, first, last)
    if chunks is not None and any(n % chunks for n in split):
        return (
            "virtual_pipeline",
            chunks,
            f"a divisor of every stage's layers (first {split[0]}, middle {split[1]}, last "
            f"{split[2]}) with first_stage_layers or last_stage_layers set",
        )
    return None


def _counted_refusal(values: dict[str, Any], first, last) -> tuple[str, Any, str] | None:
    """The split that counts the embedding or the loss as a layer, as Megatron-LM accepts it:
    not with first_stage_layers or last_stage_layers (TransformerConfig raises "cannot be set at
    the same time"), and on a pipeline (with one stage the split is moot) the layers with the
    embedding and the loss counted an equal whole share of each stage, and of each of its
    virtual_pipeline chunks under interleaved 1F1B (get_num_layers_to_build's split)."""
    embedding = bool(values.get("embedding_in_pipeline_split"))
    loss = bool(values.get("loss_in_pipeline_split"))
    key = "embedding_in_pipeline_split" if embedding else "loss_in_pipeline_split"
    if first is not None or last is not None:
        return (key, True, "false with first_stage_layers or last_stage_layers set")
    pp, chunks = values["pipeline_parallel"], values.get("virtual_pipeline") or 1
    if pp == 1:  # one stage holds all: the split is moot
        return None
    units = values["num_layers"] + embedding + loss
    if units % (pp * chunks) or units // pp - max(embedding, loss) < 1:
        what = f"pipeline_parallel ({pp})" + (
            f" x virtual_pipeline ({chunks})" if chunks > 1 else ""
        )
        counted = " and ".join(
            name for name, on in (("the embedding", embedding), ("the loss", loss)) if on
        )
        return (
            key,
            True,
            f"false unless {what} divides num_layers ({values['num_layers']}) with {counted} "
            f"counted as {'layers' if embedding and loss else 'a layer'} ({units}), at least one "
            "layer a stage",
        )
    return None


def interleaving_allows(pp: int, micro_batches: float) -> bool:
    """Interleaved 1F1B needs at least PP micro batches per pipeline and step. Megatron-LM
    (d98e8a64, megatron/core/pipeline_parallel/schedules.py,
    forward_backward_pipelining_with_interleaving) runs the micro batches in groups of N
    (--microbatch-group-size-per-virtual-pipeline-stage, default PP) and raises unless PP <= N
    <= M and M mod N is 0 or at least PP: with fewer than PP micro batches no N exists (the
    first chunk's output would come back to a stage with nothing to run). M not a multiple of
    PP runs with N = M (or another N that leaves no short group), and its bubble is still
    (PP - 1) chunk-steps at each end: (p - 1) / (v m) of the compute, the formula the model
    uses (before core_v0.10.0, M had to be a multiple of PP). Packed rows may end part-filled:
    a fraction of a row is one micro batch more. One stage has nothing to interleave."""
    return pp <= 1 or math.ceil(micro_batches) >= pp


def interleaving_refusal(values: dict[str, Any]) -> tuple[str, Any, str] | None:
    """The interleaved schedule with fewer micro batches than stages (`interleaving_allows`),
    refused in one line (key, value, what is allowed); None otherwise."""
    m, pp = values.get("micro_batches_per_step"), values["pipeline_parallel"]
    if values.get("virtual_pipeline") is None or m is None or interleaving_allows(pp, m):
        return None
    return (
        "pipeline_schedule",
        "interleaved",
        f"1f1b, or at least pipeline_parallel ({pp}) micro batches per pipeline and step "
        f"(this layout has {m:g}): Megatron-LM's interleaved schedule refuses fewer",
    )
