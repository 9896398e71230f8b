"""Memory of the logits, and the phases of a step in which memory can peak.

logits bytes = micro_batch x seq_len x vocab x bytes per element. Fused or chunked
cross-entropy never materialises the whole tensor; chunking it in c pieces keeps 1/c of it.

A step's memory is not one sum: the logits exist only while the loss runs, the layer rebuilt by
recompute only during the backward, the optimizer's work after every activation is freed
(``phases``); the peak is the largest phase.
"""

from __future__ import annotations


def _logits_forms() -> dict:
    from costmodel.derive.symbols import S, V, b_micro, bytes_per_element, chunks

    logits = b_micro * S * V * bytes_per_element
    return {"logits_bytes": logits, "chunked_logits_bytes": logits / chunks}


def __getattr__(name: str):
    """logits_bytes and chunked_logits_bytes, SymPy forms built on first use (`phases` and
    `peak` take numbers: a cold `costmodel report` does not import SymPy)."""
    if name in ("logits_bytes", "chunked_logits_bytes"):
        return _logits_forms()[name]
    if name in ("S", "V", "b_micro", "bytes_per_element", "chunks"):  # the symbols it uses
        from costmodel.derive import symbols

        return getattr(symbols, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: The phases of a training step whose memory can peak, in the order they run.
PHASES = ("forward_end", "loss", "backward", "optimizer_step")


def phases(
    states,
    saved,
    outside=0,
    in_flight=1,
    *,
    logits=None,
    working_set=0,
    layer_gradients=0,
) -> dict[str, dict]:
    """Bytes on one GPU in each phase of a step, and what each holds (numbers or SymPy).

    - forward_end: the model states (weights, gradients, optimizer states: held all step) and
      what the forward saved for backward, ``saved`` per micro batch for the stage's layers and
      ``outside`` beyond them (token ids, RoPE, final norm, lm_head input), times the micro
      batches 1F1B holds (``in_flight``);
    - loss (only on the stage that holds the lm_head, ``logits`` not None): the same, plus what
      the cross-entropy keeps while it runs (``activations.loss_saved``);
    - backward: the forward end's tensors, plus the layer being recomputed (``working_set``: under
      full recompute one layer's (or a group's) whole set, under selective recompute the
      recomputed modules' tensors of one layer) and the gradients flowing through the layer
      boundary (``layer_gradients``); the logits are gone (the loss's backward is the first step);
    - optimizer_step: the model states only (every activation freed).

    The peak is the largest phase (``peak``), never a sum of phases that do not coexist."""
    stash = {
        "model_states": states,
        "saved_activations": saved * in_flight,
        "outside_layers": outside * in_flight,
    }
    contents = {"forward_end": stash}
    if logits is not None:
        contents["loss"] = {**stash, "logits": logits}
    contents["backward"] = {
        **stash,
        "recompute_working_set": working_set,
        "layer_gradients": layer_gradients,
    }
    contents["optimizer_step"] = {"model_states": states}
    return {name: {"bytes": sum(c.values()), "contents": c} for name, c in contents.items()}


def peak(phase_bytes: dict[str, dict]) -> str:
    """The phase with the most bytes (the earliest of equal ones)."""
    return max(phase_bytes, key=lambda name: (phase_bytes[name]["bytes"], -PHASES.index(name)))
