"""What a model saves outside its decoder layers (embedding, RoPE, final norm, logits, the
loss), the micro batches a pipeline stage holds, and a stage's activation bytes."""

from __future__ import annotations

from costmodel.derive.activations.layer import per_gpu
from costmodel.derive.activations.ops import rmsnorm_saved
from costmodel.derive.activations.tables import (
    CROSS_ENTROPY,
    FP32,
    FRAMEWORKS,
    INDEX,
    Saved,
    check,
)


def model_activation_bytes(
    *,
    b,
    s,
    hidden,
    vocab,
    rope_head_dim=0,
    elementwise: str = "fused",
    norm_offset: bool = False,
    loss_fp32: bool = True,
    logits_chunks=1,
    output_logits: bool = True,
    checkpointed: bool = False,
    attention_kernel: str = "flash",
    tp=1,
    sp: bool = True,
    cp=1,
    bytes_per_element=2,
) -> dict[str, float]:
    """Bytes outside the decoder layers, per micro batch on one GPU: the token ids (int64, saved by
    the embedding and, as targets, by the loss), RoPE's cos and sin (computed once for the
    (1, s) positions and shared by every layer), the final norm, the lm_head input and the
    logits.

    Logits (``costmodel.derive.memory``): b·s·V·β for the model's output, held while the loss
    runs (not saved for backward: ``output_logits=False`` leaves it out), and b·s·V·4 for the fp32
    log-softmax the loss keeps when it upcasts (``loss_fp32``). Chunked cross-entropy keeps
    1/``logits_chunks`` of both; a vocabulary-parallel lm_head divides them by tp.

    ``checkpointed`` (every layer under ``torch.utils.checkpoint``, as transformers' gradient
    checkpointing runs it): the checkpoints also keep the keyword arguments transformers passes to
    every layer until the backward: the (1, s) int64 position ids and, for ``eager`` attention
    (``attention_kernel``), the b x 1 x s x s additive causal mask in the working dtype (SDPA's
    and flash kernels take no mask: is_causal).
    """
    beta = bytes_per_element
    local = s / cp if cp != 1 else s
    tokens = b * local
    saved = [Saved("embedding.token_ids", INDEX * tokens, False)]
    if rope_head_dim:
        saved += [
            Saved("rope.cos", beta * local * rope_head_dim, False),
            Saved("rope.sin", beta * local * rope_head_dim, False),
        ]
    saved += rmsnorm_saved("final_norm", tokens, hidden, beta, elementwise, offset=norm_offset)
    saved.append(Saved("lm_head.input", beta * tokens * hidden, False))
    if checkpointed:
        saved.append(Saved("checkpoint.position_ids", INDEX * local, False))
        if attention_kernel == "eager":
            saved.append(Saved("checkpoint.attention_mask", beta * tokens * s, False))
    saved += logits_saved(tokens, vocab, beta, loss_fp32, logits_chunks, output_logits)
    return per_gpu(saved, tp=tp, sp=sp)


def logits_saved(tokens, vocab, beta, loss_fp32=True, logits_chunks=1, output_logits=True):
    """The logits terms (split: a vocabulary-parallel lm_head divides them by tp)."""
    saved = []
    if output_logits:
        saved.append(Saved("logits", beta * tokens * vocab / logits_chunks, True))
    if loss_fp32:
        saved.append(Saved("logits_fp32", FP32 * tokens * vocab / logits_chunks, True))
    return saved


def loss_saved(
    tokens, vocab, beta=2, cross_entropy: str = "fused", chunks=1, framework: str = "megatron"
) -> list[Saved]:
    """What the cross-entropy keeps while the loss runs, over ``tokens`` rows of ``vocab``
    logits (split: a vocabulary-parallel lm_head divides them by tp); see ``CROSS_ENTROPY``."""
    check("cross_entropy", cross_entropy, CROSS_ENTROPY)
    check("framework", framework, tuple(FRAMEWORKS))
    logits = tokens * vocab
    if cross_entropy == "fused_linear":
        return []
    if cross_entropy == "fused":
        return [Saved("logits", beta * logits, True)]
    if cross_entropy == "chunked":
        return [Saved("logits_chunk", beta * logits / chunks, True)]
    saved = [Saved("logits", beta * logits, True), Saved("logits_fp32", FP32 * logits, True)]
    if FRAMEWORKS[framework].fp32_loss_copies > 1:
        saved.append(Saved("log_softmax_fp32", FP32 * logits, True))
    return saved


def in_flight_micro_batches(pp=1, num_micro_batches=None, virtual_stages=1):
    """Micro batches whose activations the first pipeline stage holds at the peak (1F1B).

    1F1B (Narayanan et al., arXiv:2104.04473) runs p forwards on the first stage before its first
    backward: p micro batches in flight (fewer if the step has fewer, m < p). The interleaved
    schedule with v model chunks per stage holds p + (p - 1)/v: Megatron-LM's
    ``interleaved_schedule_memory_penalty`` 1 + (p - 1)/(p·v), times p."""
    if pp == 1:
        return 1
    if virtual_stages and virtual_stages > 1:
        return pp + (pp - 1) / virtual_stages
    return pp if num_micro_batches is None else min(num_micro_batches, pp)


def stage_activation_bytes(
    layers: list[dict[str, float]],
    *,
    in_flight=1,
    recompute_working_set: dict[str, float] | None = None,
    extra: dict[str, float] | None = None,
) -> dict[str, float]:
    """Activation bytes of one pipeline stage: its layers' bytes (one dict per layer, from
    ``layer_activation_bytes``) times the micro batches in flight, plus, under full recompute,
    one layer's full set (``recompute_working_set``: the largest layer with recompute ``none``,
    rebuilt during that layer's backward, once), plus ``extra`` (``model_activation_bytes`` on
    the first or last stage) times the micro batches in flight."""
    per_micro_batch = sum(sum(layer.values()) for layer in layers)
    out = {"layers": per_micro_batch * in_flight}
    if recompute_working_set:
        out["recompute_working_set"] = sum(recompute_working_set.values())
    if extra:
        out["outside_layers"] = sum(extra.values()) * in_flight
    out["total"] = sum(out.values())
    return out
