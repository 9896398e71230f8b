"""The report's tables about the team's run (`costmodel report`): the memory of the most loaded
GPU by phase, the communication of a step, the step's time part by part, and the levers."""

from __future__ import annotations

from typing import Any

from costmodel.derive.plain import MODEL_STATES
from costmodel.formats import (
    gb,
    ratio,
    short,
    sig,
    sig4,
)
from costmodel.formats import pct as _pct
from costmodel.formats import seconds as _seconds
from costmodel.present.advice import note as advice_note

PHASE_NAMES = {
    "forward_end": "forward end",
    "loss": "loss",
    "backward": "backward",
    "optimizer_step": "optimizer step",
}


def _memory_rows(mem: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Model states, each phase with what it holds, the peak against the usable capacity, the
    settings the figures rest on and, for a run that does not fit, the changes that make it."""
    s, room = mem["settings"], mem["capacity_detail"]
    rows = [(key, gb(mem[key]), "") for key in MODEL_STATES]
    if "gathered" in mem:  # ZeRO 3's gathered layer (evaluate.memory.gpu_memory.model_states)
        rows.append(
            (
                "gathered",
                gb(mem["gathered"]),
                "ZeRO 3: two layers' weights gathered, one's gradients",
            )
        )
    for name, phase in mem["phases"].items():
        parts = ", ".join(
            f"{part.replace('_', ' ')} {gb(value)}"
            for part, value in phase["contents"].items()
            if part != "model_states" and value
        )
        mark = "peak: " if name == mem["peak_phase"] else ""
        rows.append((f"phase: {PHASE_NAMES[name]}", gb(phase["bytes"]), mark + parts))
    rows += [
        (
            "peak",
            gb(mem["total"]),
            f"{PHASE_NAMES[mem['peak_phase']]}, of {gb(mem['capacity'])} usable: "
            + ("fits" if mem["fits"] else "does NOT fit"),
        ),
        (
            "capacity",
            gb(mem["capacity"]),
            f"CUDA total {gb(room['cuda_total'])} ({room['cuda_total_kind']}) - "
            f"memory_reserve {gb(room['memory_reserve'])}",
        ),
        (
            "settings",
            "",
            f"framework {s['framework']}, cross_entropy {s['cross_entropy']}"
            + (f" ({s['ce_chunks']} chunks)" if s["cross_entropy"] == "chunked" else "")
            + f", recompute {s['recompute']}"
            + (f" ({', '.join(s['recompute_modules'])})" if s["recompute_modules"] else "")
            + (
                f" ({s['recompute_method']}, {s['recompute_num_layers']} layers)"
                if s["recompute_num_layers"] is not None
                else ""
            )
            + f", attention_kernel {s['attention_kernel']}, fp8 {s['fp8']}"
            + f" (activations {s['fp8_activations']}); micro batches in flight: {short(mem['in_flight'])}",
        ),
    ]
    for change in mem.get("fit") or []:
        rows.append(
            (
                f"to fit: {change['change']}",
                gb(change["peak"]),
                ("fits" if change["fits"] else "does not fit")
                + f"; +{_pct(change['flop_cost'])} hardware FLOPs; {change['note']}",
            )
        )
    return rows


def _communication_rows(a: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Each collective with its seconds (nothing overlapped) and what the overlap rules leave
    exposed; both totals, named; the settings the figures rest on. An estimate longer than the
    step is said once, in its own row, and no share of the step is given for it."""
    comm = a["communication"]
    rows = [
        (
            c["name"],
            _seconds(c["seconds"]),
            f"{gb(c['bytes_per_gpu'])} per GPU, {c['placement']}; exposed "
            f"{_seconds(c['exposed_seconds'])}"
            + (f"; hides behind {c['hidden_behind']}" if c["hidden_behind"] else "; not hidden"),
        )
        for c in comm["collectives"]
    ]
    longer = "longer than the step (below)"
    rows.append(
        (
            "total (upper bound: nothing overlapped)",
            _seconds(comm["seconds"]),
            f"estimated share {_pct(comm['estimated_share'])}; used {_pct(comm['share_used'])} "
            f"({comm['basis']})",
        )
    )
    if comm["exceeds_step"]:  # nothing uses the estimate; a share of the step it is not
        note = longer if comm["basis"] == "estimated" else f"{longer}; used "
        if comm["basis"] == "measured":
            note += f"{_pct(comm['share_used'])} (measured)"
        rows[-1] = (*rows[-1][:2], note)
    exposed = comm["exposed_share"]
    rows.append(
        (
            "exposed (overlap rules)",
            _seconds(comm["exposed_seconds"]),
            f"share {_pct(exposed)}: the step-time model's compute hides the rest"
            if exposed <= 1
            else longer,
        )
    )
    settings = comm["settings"]
    rows.append(
        (
            "settings",
            "",
            ", ".join(
                f"{key} {'null' if value is None else str(value).lower()}"
                for key, value in settings.items()
            ),
        )
    )
    if comm["exceeds_step"]:  # longer than the step: the estimate contradicts the measured step
        said = "predicted" if a["scenario"].get("step_time_from") == "predicted" else "measured"
        rows.append(
            (
                "estimate > step time",
                "",
                f"the estimate is longer than the {said} step "
                f"({_seconds(a['scenario']['step_time'])}): they contradict each other (check "
                "the bandwidths and the layout); no lever is derived from it",
            )
        )
    return rows


#: What each part of the step-time model is, as the report names it.
TIME_PARTS = {
    "gemms": "every weight GEMM at its roofline and its shape's efficiency, forward and backward",
    "attention": "the attention core at the kernel's efficiency, {lengths}",
    "linear_attention": "the gated-DeltaNet core",
    "memory_bound": "norms, activations, MoE permutes, the loss, the optimizer step over HBM",
    "kernel_overhead": "a fixed cost per kernel launched (kernel_launch_overhead)",
    "recompute": "the forward again of what recompute redoes",
    "communication_exposed": "what the overlap rules leave exposed",
    "pipeline_bubble": "the schedule's idle time",
}


#: The rows the attention kernel runs (step_time.predict's detail `attention_lengths`).
_ATTENTION_LENGTHS = {
    "real": "real lengths",
    "padded": "padded rows whole (attention_on_padding: computed)",
}


def _time_rows(t: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The step-time model: each part's seconds and share, the prediction, and against a
    measured step the unexplained remainder (a negative one said plainly). Where the measured
    step is so much shorter than the model's work that a share would pass 100% (a part longer
    than the step, or the remainder below minus the step), no share is given: the
    contradiction is said once, in its own row."""
    of = "of the measured step" if t["basis"] == "measured" else "of the prediction"
    shares = [part["share"] for part in t["parts"].values()] + [t["unexplained_share"] or 0.0]
    given = all(abs(share) <= 1 for share in shares)
    rows = [
        (
            name,
            _seconds(part["seconds"]),
            (f"{_pct(part['share'])} {of}; " if given else "")
            + TIME_PARTS[name].format(lengths=_ATTENTION_LENGTHS[t["detail"]["attention_lengths"]]),
        )
        for name, part in t["parts"].items()
    ]
    rows.append(
        (
            "predicted step",
            _seconds(t["predicted_seconds"]),
            f"the sum of the parts ({t['generation']} efficiencies: "
            + ", ".join(f"{k} {sig(v['value'], 3)}" for k, v in t["efficiencies"].items())
            + ")",
        )
    )
    if t["measured_seconds"] is not None:
        rows.append(("measured step", _seconds(t["measured_seconds"]), "step_time"))
        rows.append(
            (
                "unexplained",
                _seconds(t["unexplained_seconds"]),
                (f"{_pct(t['unexplained_share'])} of the measured step: " if given else "")
                + "measured - predicted, what the model does not account for",
            )
        )
    if t["contradiction"]:
        shown = t["contradiction"] + ("" if given else "; so no share of the step is given")
        rows.append(("model > measured", "", shown))
    timed = t["timed_params"]
    if timed["differs"]:
        off = f"{_pct(timed['off'])} off it" if timed["off"] is not None else "not comparable"
        rows.append(
            (
                "timed N",
                f"{timed['n']:,}",
                f"the N of the model shape the parts time ({timed['origin']}); activated_params, "
                f"the N of 6ND and MFU, is {off}: set it or the shape keys to the run's model",
            )
        )
    return rows


def _combined_row(comb: dict[str, Any]) -> tuple[str, str, str]:
    """The levers applied together to the scenario and predicted again."""
    note = f"step {_seconds(comb['step_time'])}: {', '.join(comb['levers']) or 'no lever'}"
    if comb["levers"]:
        note += (
            f" applied together and predicted again ({sig4(comb['step_before'])} s -> "
            f"{sig4(comb['step_after'])} s; peak {gb(comb['peak_after'])}: fits)"
        )
    if comb["step_time_from"] == "measured - saved":
        note += "; the measured step less the seconds saved (the unexplained part kept)"
    elif comb["step_time_from"] == "measured x after/before":
        note += "; the measured step x after / before"
    if comb["capped"]:
        note += "; capped where the hardware would reach its peak"
    if comb["apart"]:
        note += f"; not combined: {', '.join(comb['apart'])}"
    return ("combined", ratio(comb["gain"]), note)


def team_sections(a: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Layout, memory, communication and the ranked levers (issue 11)."""
    par, mem = a["parallel"], a["memory"]
    course = {k for k, v in a["assumptions"].items() if v["source"] == "course"}
    layout = [
        (
            "TP x PP x CP x DP",
            f"{par['tp']} x {par['pp']} x {par['cp']} x {par['dp']}",
            f"EP {par['ep']}" + (", sequence parallel" if par["sp"] else ""),
        ),
        ("micro batches per step", short(par["micro_batches"]), "per pipeline"),
        ("pipeline bubble", _pct(par["pipeline_bubble"]), "1F1B: (p - 1) / (m + p - 1)"),
        (
            f"bubble of the schedule ({par['pipeline_schedule']})",
            _pct(par["schedule_bubble"]),
            "of the step (derive.step_time; virtual_pipeline "
            f"{par['virtual_pipeline'] if par['virtual_pipeline'] else 'null'})",
        ),
    ]
    memory_rows = _memory_rows(mem)
    comm_rows = _communication_rows(a)
    advice_rows = [
        (
            x["lever"],
            ratio(x["gain"]),
            ("" if x["feasible"] else "not feasible; ")
            + advice_note(x)
            + (
                f" [course: {', '.join(k for k in x['rests_on'] if k in course)}]"
                if any(k in course for k in x["rests_on"])
                else ""
            ),
        )
        for x in a["advice"]
    ]
    advice_rows.append(_combined_row(a["advice_combined"]))
    return [
        ("Parallel layout", layout),
        ("Memory of the most loaded GPU", memory_rows),
        ("Communication per step", comm_rows),
        ("Where the step goes (step-time model)", _time_rows(a["time"])),
        ("Levers ranked for this run", advice_rows),
    ]
