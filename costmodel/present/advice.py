"""The levers of costmodel.evaluate.levers.advice in words: each `Lever`'s reason (a code and its
figures) written as the sentence the report and its JSON call the lever's `note`, and a lever as
the JSON object of `costmodel report --format json`. Numbers through costmodel.formats."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from costmodel.evaluate.levers.advice import JSON_FIELDS, Lever, MemoryFigure, Repredicted
from costmodel.formats import decimals, gb, num, pct, ratio, short, sig4


def fitting(mem: MemoryFigure | dict[str, Any]) -> str:
    """A memory figure as the levers state it: the peak, its phase, and whether it fits."""
    if isinstance(mem, dict):
        mem = MemoryFigure.of(mem)
    verdict = "fits" if mem.fits else "does not fit"
    return f"peak {gb(mem.peak)} ({_phase(mem)}) of {gb(mem.capacity)} usable: {verdict}"


def _phase(mem: MemoryFigure) -> str:
    return mem.phase.replace("_", " ")


def _keys(changes: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in changes.items())


def _packed(f: dict[str, Any]) -> str:
    return (
        f"documents packed into rows of {num(f['seq_len'])} tokens: {sig4(f['rows'])} micro "
        f"batches per pipeline instead of {sig4(f['micro_batches'])}"
    )


def _fewest_modules(f: dict[str, Any]) -> str:
    how = "the fewest modules that fit" if f["fits"] else "all of them, and none of the sets fits"
    return f"recompute selective ({', '.join(f['modules'])}): {how}"


def _estimate_exceeds_step(f: dict[str, Any]) -> str:
    return (
        f"no lever: the estimate ({sig4(f['seconds'])} s) is longer than the measured step "
        f"({sig4(f['seconds'] / f['share'])} s), which contradicts it; set the measured "
        "communication_share"
    )


def _overlap_flags(f: dict[str, Any]) -> str:
    text = (
        f"{_keys(f['flags'])}: the exposed communication ({sig4(f['exposed'])} s predicted) "
        "behind compute"
    )
    if "ep_overlap" in f["flags"]:
        text += " (the EP all-to-all behind another micro batch: DualPipe, or Megatron-LM's "
        text += "1F1B all-to-all overlap, an assumption)"
    return text


def _measured_share(f: dict[str, Any]) -> str:
    text = f"measured communication share {pct(f['share'])} hidden behind compute"
    if f["exposed"] < f["share"]:
        text += f" (capped at {pct(f['exposed'])}: compute at peak takes the rest)"
    return text


def _attention_exceeds_peak(f: dict[str, Any]) -> str:
    return (
        f"no lever: the attention count needs {ratio(f['hfu'], 1)} the GPUs' peak for this "
        "step, more than they have, which contradicts the measured step; its share of the time "
        "is not known"
    )


def _faster_kernel(f: dict[str, Any]) -> str:
    return (
        f"a flash kernel {short(f['speedup'])}x faster: attention_efficiency "
        f"{decimals(f['efficiency'], 3)} (the forward's {short(f['forward'])} and backward's "
        f"{short(f['backward'])} combined, {decimals(f['combined'], 3)}, x {short(f['speedup'])}"
        + (", at most 1)" if f["capped"] else ")")
    )


def _router_straggler(f: dict[str, Any]) -> str:
    return (
        f"the routed experts' GEMMs ({sig4(f['experts'])} s predicted, balanced) on the most "
        f"loaded EP rank at the simulated router's straggler factor {decimals(f['straggler'], 2)} "
        f"(router_skew {short(f['skew'])}, an assumption unless measured) -> "
        f"{decimals(f['greedy'], 2)} with a load-aware placement; predicted "
        f"{sig4(f['before'])} s -> {sig4(f['after'])} s (not a scenario key: not combined)"
    )


def _interleaved(f: dict[str, Any]) -> str:
    text = (
        f"bubble {pct(f['share'], 1)} of the predicted step; interleaving {f['chunks']} model "
        "chunks per stage"
    )
    if f["indivisible"]:
        text += f" (num_layers {f['num_layers']} not divisible by {f['divisor']})"
    return text


def _layout(f: dict[str, Any]) -> str:
    text = f"{f['label']} {f['before']} -> {f['after']}"
    if "dp" in f:
        text += f" (DP {f['dp'][0]} -> {f['dp'][1]}"
        if "ep" in f:
            text += f", EP {f['ep'][0]} -> {f['ep'][1]}"
        text += ")"
    return text


def _chunked_logits(f: dict[str, Any]) -> str:
    before = f["before"]
    return (
        f"{f['chunks']} chunks: the loss holds {gb(f['logits_after'])} of logits instead of "
        f"{gb(f['logits_before'])}; the peak goes from {gb(before.peak)} ({_phase(before)}) to "
        f"{fitting(f['after']).removeprefix('peak ')} (memory, not time)"
    )


#: reason code -> the sentence of its figures (costmodel.evaluate.levers.advice.Reason)
NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    "refused": lambda f: (
        f"{_keys(f['changes'])}: refused when resolved again (the layout does not divide)"
    ),
    "already_packed": lambda f: "already packed: nothing to gain",
    "no_pad_slots": lambda f: "no pad slots: the samples fill their rows",
    "packed": _packed,
    "selective_default": lambda f: "recompute selective (Megatron-LM's default modules)",
    "already_selective": lambda f: "already selective recompute",
    "recompute_none": lambda f: "recompute none",
    "recompute_already_none": lambda f: "no gain: recompute is already none",
    "fewest_modules": _fewest_modules,
    "fewest_modules_already": lambda f: "no lever: the scenario's modules are the fewest that fit",
    "no_module_set": lambda f: "no lever: no module set",
    "estimate_exceeds_step": _estimate_exceeds_step,
    "all_overlaps_on": lambda f: "no lever: every overlap the model knows is on",
    "overlap_flags": _overlap_flags,
    "measured_share": _measured_share,
    "micro_batch": lambda f: f"micro batch {f['size']}",
    "no_attention_core": lambda f: "no attention core",
    "attention_exceeds_peak": _attention_exceeds_peak,
    "flash_kernel": lambda f: "attention_kernel flash (no s x s scores kept)",
    "kernel_at_peak": lambda f: "no lever: the kernel runs at the peak already",
    "faster_kernel": _faster_kernel,
    "no_expert_parallelism": lambda f: "no expert parallelism",
    "too_many_experts": lambda f: "too many experts to simulate",
    "no_router_skew": lambda f: "router_skew is null: no router estimate",
    "router_straggler": _router_straggler,
    "no_pipeline": lambda f: "no pipeline",
    "schedule_without_lever": lambda f: f"no lever: pipeline_schedule is {f['schedule']} already",
    "interleaved": _interleaved,
    "layout": _layout,
    "already_fp8": lambda f: f"already fp8 {f['fp8']}",
    "no_fp8_cores": lambda f: f"no lever: the {f['gpu']} has no FP8 tensor cores",
    "fp8_hybrid": lambda f: (
        "fp8 hybrid: the layers' GEMMs at the FP8 peak (the memory model does not count FP8 "
        "weight copies)"
    ),
    "already_chunked": lambda f: f"already {f['cross_entropy']}",
    "chunked_logits": _chunked_logits,
    "no_logits_on_stage": lambda f: (
        "no lever: the most loaded GPU's pipeline stage has no lm_head, so no logits to chunk"
    ),
    "peak_without_logits": lambda f: (
        f"no lever: the peak ({_phase(f['before'])}) holds no logits; chunking the "
        f"{gb(f['logits'])} of logits leaves it at {gb(f['before'].peak)}"
    ),
    "not_offered": lambda f: (
        f"not for framework {f['framework']}: it does not offer {f['option']} ({f['key']}; "
        "inputs.frameworks)"
    ),
}


def _repredicted(again: Repredicted) -> str:
    text = (
        f"; predicted {sig4(again.before)} s -> {sig4(again.after)} s; memory "
        f"{fitting(again.memory)}"
    )
    return text if again.gain else text + "; no gain: the model says it is not faster"


def note(lever: Lever) -> str:
    """The lever's reason as a sentence, with what the changed scenario's prediction says."""
    text = NOTES[lever.reason.code](lever.reason.facts)
    return text + (_repredicted(lever.repredicted) if lever.repredicted else "")


def as_json(lever: Lever) -> dict[str, Any]:
    """The lever as `costmodel report --format json` writes it (`JSON_FIELDS`, in order)."""
    return {key: note(lever) if key == "note" else lever[key] for key in JSON_FIELDS}


def account_json(a: dict[str, Any]) -> dict[str, Any]:
    """The account with its levers written as JSON objects (a copy; the account is untouched)."""
    if not a.get("advice"):
        return a
    return {**a, "advice": [as_json(x) if isinstance(x, Lever) else x for x in a["advice"]]}
