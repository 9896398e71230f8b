"""The measurement of ``python -m costmodel.validate_memory``: the bytes of the storages a
forward pass and its loss save for backward (``saved_tensors_hooks``), attributed to the decoder
layer that saved them or to the rest of the model; and, with every layer under
``torch.utils.checkpoint``, what the checkpoints keep, each layer's recompute working set and the
backward's peak. See ``costmodel/validate_memory.py``'s docstring for the method."""

from __future__ import annotations

import gc
from contextlib import contextmanager, nullcontext
from functools import partial

#: The part of the rows for what the model saves outside its decoder layers.
OUTSIDE = "outside layers"


def import_torch():
    try:
        import torch
        import transformers
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "costmodel.validate_memory needs torch and transformers: "
            "pip install -r validate-requirements.txt"
        ) from exc
    transformers.logging.set_verbosity_error()
    return torch, transformers


class _Held:
    """What the pack hook returns: the saved tensor, alive as long as its autograd node."""

    __slots__ = ("tensor", "where", "__weakref__")

    def __init__(self, tensor, where):
        self.tensor = tensor
        self.where = where


class _Layers:
    """Forward hooks on the decoder layers: which layer runs (``active``), and weak references
    to the storages of the keyword arguments the layers receive (computed outside them)."""

    def __init__(self, model):
        self.active: str | None = None
        self.arguments: dict[int, tuple] = {}  # data_ptr -> (StorageWeakRef, nbytes)
        self.handles = []
        for i, layer in enumerate(model.model.layers):
            self.handles.append(
                layer.register_forward_pre_hook(partial(self._enter, i), with_kwargs=True)
            )
            self.handles.append(layer.register_forward_hook(self._leave, with_kwargs=True))

    def _enter(self, i, module, args, kwargs):
        torch, _ = import_torch()
        from torch.multiprocessing.reductions import StorageWeakRef
        from torch.utils._pytree import tree_flatten

        self.active = f"layer {i}"
        for tensor in tree_flatten((args[1:], kwargs))[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                self.arguments[storage.data_ptr()] = (StorageWeakRef(storage), storage.nbytes())

    def _leave(self, module, args, kwargs, output):
        self.active = None

    def live_arguments(self) -> dict[int, int]:
        return {ptr: n for ptr, (ref, n) in self.arguments.items() if not ref.expired()}

    def remove(self):
        for handle in self.handles:
            handle.remove()


def _excluded(model) -> set[int]:
    storages = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return storages | {buf.untyped_storage().data_ptr() for buf in model.buffers()}


def _forward_and_loss(model, ids, layers: _Layers):
    """One forward and the loss under ``saved_tensors_hooks``: the loss and the holders."""
    import weakref

    torch, _ = import_torch()
    held: weakref.WeakSet = weakref.WeakSet()

    def pack(tensor):
        item = _Held(tensor.detach(), layers.active)
        held.add(item)
        return item

    def unpack(item):
        return item.tensor

    vocab = model.config.vocab_size
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        logits = model(input_ids=ids, use_cache=False).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), ids.reshape(-1))
    del logits
    gc.collect()
    return loss, held


def _held_storages(held, excluded: set[int]) -> dict[int, dict]:
    """data_ptr -> {where (set), bytes} of the storages the holders still alive keep."""
    storages: dict[int, dict] = {}
    for item in list(held):
        storage = item.tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in excluded:
            continue
        entry = storages.setdefault(ptr, {"where": set(), "bytes": storage.nbytes()})
        entry["where"].add(item.where)
    return storages


def _placed(storages: dict[int, dict], shared: set[int]) -> dict[str, int]:
    """Bytes per place: ``layer <i>`` for a storage saved only inside layer i, else OUTSIDE."""
    measured: dict[str, int] = {}
    for ptr, entry in storages.items():
        where = entry["where"]
        single = len(where) == 1 and None not in where and ptr not in shared
        place = next(iter(where)) if single else OUTSIDE
        measured[place] = measured.get(place, 0) + entry["bytes"]
    return measured


def saved_bytes(model, ids) -> dict[str, int]:
    """Bytes the forward and the loss save for backward, per place (``layer <i>``, OUTSIDE)."""
    layers = _Layers(model)
    try:
        loss, held = _forward_and_loss(model, ids, layers)
        storages = _held_storages(held, _excluded(model))
        shared = set(layers.live_arguments())
        del loss
    finally:
        layers.remove()
    return _placed(storages, shared)


@contextmanager
def _marking(flag: list, layer: int):
    flag[0] = layer
    try:
        yield
    finally:
        flag[0] = None


def _checkpoint_layers(model) -> list:
    """Every decoder layer under non-reentrant ``torch.utils.checkpoint`` (transformers' gradient
    checkpointing), each with a ``context_fn`` whose recompute context marks the layer in the
    returned one-item list while it is recomputed."""
    from torch.utils.checkpoint import checkpoint

    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    recomputing: list = [None]
    for i, layer in enumerate(model.model.layers):

        def contexts(i=i):
            return nullcontext(), _marking(recomputing, i)

        layer._gradient_checkpointing_func = partial(
            checkpoint, use_reentrant=False, context_fn=contexts
        )
    return recomputing


def _tracker(recomputing, held, layers: _Layers, excluded: set[int]):
    """A TorchDispatchMode for the backward: the working set of each recomputed layer and the
    peak of every live saved storage after a recompute (see the module docstring)."""
    torch, _ = import_torch()
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Tracker(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.recorded: dict[int, dict[int, tuple]] = {}
            self.working: dict[int, int] = {}
            self.peak = 0
            self.layer = None  # the layer last recomputed
            self.collected = None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if recomputing[0] is not None:
                self.layer = recomputing[0]
                self._record(self.recorded.setdefault(self.layer, {}), out)
            elif self.layer is not None:
                self._measure()
            return out

        def _record(self, recorded, out):
            kept = layers.live_arguments()  # a freed argument's address may be reused
            for tensor in tree_flatten(out)[0]:
                if isinstance(tensor, torch.Tensor):
                    storage = tensor.untyped_storage()
                    ptr = storage.data_ptr()
                    if storage.nbytes() and ptr not in excluded and ptr not in kept:
                        recorded[ptr] = (StorageWeakRef(storage), storage.nbytes())

        def _measure(self):
            if self.collected != self.layer:  # once after each recompute
                self.collected = self.layer
                gc.collect()
            live = {
                ptr: n for ptr, (ref, n) in self.recorded[self.layer].items() if not ref.expired()
            }
            self.working[self.layer] = max(self.working.get(self.layer, 0), sum(live.values()))
            everything = {ptr: e["bytes"] for ptr, e in _held_storages(held, excluded).items()}
            everything.update(layers.live_arguments())
            everything.update(live)
            self.peak = max(self.peak, sum(everything.values()))

    return Tracker()


def checkpointed_bytes(model, ids) -> tuple[dict[str, int], dict[int, int], int]:
    """The step with every layer checkpointed: bytes kept after the forward and the loss per
    place, the working set of each layer's recompute, and the peak of live saved storages during
    the layers' backward."""
    recomputing = _checkpoint_layers(model)
    layers = _Layers(model)
    excluded = _excluded(model)
    try:
        loss, held = _forward_and_loss(model, ids, layers)
        saved = _held_storages(held, excluded)
        arguments = layers.live_arguments()
        kept = _placed(saved, set(arguments))
        kept[OUTSIDE] = kept.get(OUTSIDE, 0) + sum(
            n for ptr, n in arguments.items() if ptr not in saved
        )
        tracker = _tracker(recomputing, held, layers, excluded)
        with tracker:
            loss.backward()
        del loss
    finally:
        layers.remove()
        model.activation_checkpointing_disable()
    return kept, tracker.working, tracker.peak
