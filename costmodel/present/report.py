"""The cost account as text, Markdown or JSON (`costmodel report`)."""

from __future__ import annotations

import json
from typing import Any

from costmodel.evaluate.account import check_finite
from costmodel.formats import (
    decimals,
    gb,
    markdown_cell,
    markdown_text,
    printable,
    ratio,
    short,
    sig,
    sig4,
    tflops,
)
from costmodel.formats import input_value as _input
from costmodel.formats import num as _count
from costmodel.formats import pct as _pct
from costmodel.formats import sci4 as _sci
from costmodel.formats import seconds as _seconds
from costmodel.present.advice import account_json
from costmodel.present.advice import note as advice_note


def _tflops(x):
    return tflops(x, 2)


def sections(a: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The account as titled tables of (quantity, value, note) rows."""
    given = a["scenario"]  # the JSON's resolved inputs (output data, not a Scenario)
    pad, att, proj = a["padding"], a["attention"], a["projections"]
    predicted = given.get("step_time_from") == "predicted"
    step_note = " (T predicted: step_time is null)" if predicted else ""
    rows_inputs = [
        (
            key,
            _input(value),
            "predicted by the step-time model" if key == "step_time" and predicted else "",
        )
        for key, value in given.items()
    ]
    return [
        ("Inputs", rows_inputs),
        (
            "Model FLOPs (6ND)",
            [
                ("tokens per step D", _count(given["tokens_per_step"]), "samples x mean tokens"),
                ("model FLOPs 6ND", _sci(a["model_flops_per_step"]), "N = activated matmul params"),
                (
                    "recompute factor",
                    decimals(a["recompute_factor"], 4),
                    _recompute_note(a["recompute"]),
                ),
                ("hardware FLOPs", _sci(a["hardware_flops_per_step"]), "6ND x recompute factor"),
                ("achieved, cluster", _tflops(a["achieved_flops_per_s"]), "6ND / step time"),
                ("achieved, per GPU", _tflops(a["achieved_flops_per_s_per_gpu"]), ""),
            ],
        ),
        (
            "Utilization",
            [
                ("MFU", _pct(a["mfu"]), "model FLOPs / (T x GPUs x peak)" + step_note),
                ("HFU", _pct(a["hfu"]), "MFU x recompute factor"),
                *_fp8_rows(a["fp8"]),
                (
                    "MFU if total params used",
                    _pct(a["mfu_if_total_params"]),
                    "the MoE mistake: N = total_params",
                ),
            ],
        ),
        (
            "Throughput cross-check",
            [
                ("tokens/s, from D / T", _count(a["tokens_per_s"]), step_note.strip()),
                ("tokens/s, measured", _count(a["measured_tokens_per_s"]), ""),
                ("tokens/s per GPU, from D / T", _count(a["tokens_per_s_per_gpu"], 1), ""),
                (
                    "tokens/s per GPU, measured",
                    "n/a"
                    if a["measured_tokens_per_s_per_gpu"] is None
                    else _count(a["measured_tokens_per_s_per_gpu"], 1),
                    "",
                ),
                (
                    "MFU from measured tokens/s",
                    _pct(a["mfu_from_measured_tokens_per_s"]),
                    "6N x tok/s / (GPUs x peak)",
                ),
            ],
        ),
        (
            f"Padding (batching: {pad['batching']})",
            [
                (
                    "slots",
                    _count(pad["slots"]),
                    "samples x seq_len" if pad["batching"] == "padded" else "packed: = D",
                ),
                ("useful fraction", _pct(pad["useful_fraction"]), "D / slots"),
                ("waste", _pct(pad["waste_fraction"]), "if every sample is padded"),
                ("perfect-packing speedup", ratio(pad["packing_speedup"]), "slots / D"),
                ("MFU after packing", _pct(pad["mfu_after_packing"]), ""),
                ("step time after packing", _seconds(pad["step_time_after_packing"]), ""),
            ],
        ),
        *_lengths_section(a),
        (
            f"Attention core ({att['convention']}; kernel {att['attention_kernel']})",
            [
                *_attention_rows(
                    att, "padded", f"at padded length {_count(att['padded']['seq_len'])}"
                ),
                *_attention_rows(
                    att,
                    "actual",
                    f"at real lengths (mean {_count(att['actual']['seq_len'])})",
                    f"sum of s^2 from {att['actual']['sum_squared_lengths_from']}",
                ),
                (
                    "attention width d",
                    _count(given["attention_dim"]),
                    f"from {given['attention_dim_from']}",
                ),
                (
                    "full-attention layers",
                    _count(given["num_full_attention_layers"]),
                    f"{given['num_mtp_layers']} of them MTP" if given["num_mtp_layers"] else "",
                ),
                *_linear_rows(a),
            ],
        ),
        (
            "Projections",
            [
                (
                    "perfect packing",
                    ratio(proj["packing"]["speedup"]),
                    f"step {_seconds(proj['packing']['step_time'])}, MFU {_pct(proj['packing']['mfu'])}",
                ),
                (
                    "selective recompute",
                    ratio(proj["selective_recompute"]["speedup"]),
                    f"factor {decimals(proj['selective_recompute']['factor_now'], 3)} -> "
                    f"{decimals(proj['selective_recompute']['factor_selective'], 3)}, step "
                    f"{_seconds(proj['selective_recompute']['step_time'])}",
                ),
                (
                    "both (gains multiply)",
                    ratio(proj["packing_and_selective_recompute"]["speedup"]),
                    f"step {_seconds(proj['packing_and_selective_recompute']['step_time'])}, MFU "
                    f"{_pct(proj['packing_and_selective_recompute']['mfu'])}",
                ),
            ],
        ),
        (
            "Memory and hardware",
            [
                (
                    "logits per micro batch",
                    gb(a["logits_bytes"]),
                    "micro_batch x seq_len x vocab x 2 bytes",
                ),
                (
                    "machine balance",
                    f"{decimals(a['machine_balance'], 1)} FLOP/byte",
                    "peak / HBM bandwidth",
                ),
                ("tokens per expert", _count(a["tokens_per_expert"]), "D x k / E"),
            ],
        ),
    ]


def _recompute_note(rc: dict[str, Any]) -> str:
    """What is recomputed and where the fractions come from."""
    what = f"recompute = {rc['policy']}"
    if rc["policy"] == "selective":
        what += f" ({', '.join(rc['modules'] or [])})"
    elif rc["policy"] == "full" and rc["num_layers"] is not None:
        what += f" ({rc['method']}, {rc['num_layers']} layers)"
    origin = {"scenario": "selective_recompute_fraction", "modules": "derived from the modules"}
    return (
        f"{what}; weights r = {sig(rc['weights_fraction'])}, attention core "
        f"{sig(rc['core_fraction'])}"
        + (f" ({origin[rc['fraction_from']]})" if rc["fraction_from"] in origin else "")
    )


def _fp8_rows(fp8: dict[str, Any]) -> list[tuple[str, str, str]]:
    """MFU against the BF16 and the FP8 peak, each labelled (shown when the run trains in FP8)."""
    if fp8["fp8"] == "none":
        return []
    if fp8["mfu_fp8_peak"] is None:
        return [("MFU against the FP8 peak", "n/a", "the GPU table has no FP8 peak")]
    return [
        ("MFU against the BF16 peak", _pct(fp8["mfu_bf16_peak"]), _tflops(fp8["peak_flops_bf16"])),
        (
            "MFU against the FP8 peak",
            _pct(fp8["mfu_fp8_peak"]),
            f"{_tflops(fp8['peak_flops_fp8'])} (fp8: {fp8['fp8']}); HFU {_pct(fp8['hfu_fp8_peak'])}",
        ),
    ]


def _attention_rows(att, key: str, label: str, extra: str = "") -> list[tuple[str, str, str]]:
    x = att[key]
    return [
        (
            label,
            _sci(x["flops_per_step"]),
            f"share {_pct(x['share'])}, MFU with attention {_pct(x['mfu_with_attention'])}"
            + (f"; {extra}" if extra else ""),
        ),
        (
            "  hardware FLOPs",
            _sci(x["hardware_flops_per_step"]),
            f"{att['hardware_convention']}, with recompute; HFU with attention "
            f"{_pct(x['hfu_with_attention'])}",
        ),
    ]


def _linear_rows(a: dict[str, Any]) -> list[tuple[str, str, str]]:
    lin = a["linear_attention"]
    if lin is None:
        return []
    if lin["flops_per_step"] is None:
        return [("linear attention (gated DeltaNet)", "unknown", lin["note"])]
    return [
        (
            "linear attention (gated DeltaNet)",
            _sci(lin["flops_per_step"]),
            f"{lin['layers']} layers, chunk {lin['chunk_size']}, share {_pct(lin['share'])}; "
            "included in every 'with attention' figure",
        ),
        ("  hardware FLOPs", _sci(lin["hardware_flops_per_step"]), "with recompute"),
    ]


def _lengths_section(a: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    lengths = a["lengths"]
    if lengths is None:
        return []
    return [
        (
            "Sequence lengths (sequence_lengths)",
            [
                ("file", lengths["file"], lengths["reading"]),
                ("samples in the file", _count(lengths["count"]), ""),
                ("mean length", _count(lengths["mean"], 1), "after truncation to seq_len"),
                ("mean of squares", _sci(lengths["mean_of_squares"]), ""),
                ("longest", _count(lengths["longest"]), ""),
                (
                    "truncated samples",
                    _count(lengths["truncated_samples"]),
                    f"{_count(lengths['truncated_tokens'])} tokens cut (in the file)",
                ),
            ],
        )
    ]


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
    rows = [(key, gb(mem[key]), "") for key in ("weights", "gradients", "optimizer")]
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
    exposed; both totals, named; the settings the figures rest on."""
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
    rows.append(
        (
            "total (upper bound: nothing overlapped)",
            _seconds(comm["seconds"]),
            f"estimated share {_pct(comm['estimated_share'])}; used {_pct(comm['share_used'])} "
            f"({comm['basis']})",
        )
    )
    if comm["exceeds_step"] and comm["basis"] == "estimated":  # nothing uses the estimate
        rows[-1] = (*rows[-1][:2], f"estimated share {_pct(comm['share'])}")
    rows.append(
        (
            "exposed (overlap rules)",
            _seconds(comm["exposed_seconds"]),
            f"share {_pct(comm['exposed_share'])}: the step-time model's compute hides the rest",
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
        rows.append(
            (
                "estimate > step time",
                "",
                "the estimate is longer than the measured step "
                f"({_seconds(a['scenario']['step_time'])}): they contradict each other (check "
                "the bandwidths and the layout); no lever is derived from it",
            )
        )
    return rows


#: What each part of the step-time model is, as the report names it.
TIME_PARTS = {
    "gemms": "every weight GEMM at its roofline, forward and backward",
    "attention": "the attention core at the kernel's efficiency, real lengths",
    "linear_attention": "the gated-DeltaNet core",
    "memory_bound": "norms, activations, MoE permutes, the loss, the optimizer step over HBM",
    "recompute": "the forward again of what recompute redoes",
    "communication_exposed": "what the overlap rules leave exposed",
    "pipeline_bubble": "the schedule's idle time",
}


def _time_rows(t: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The step-time model: each part's seconds and share, the prediction, and against a
    measured step the unexplained remainder (a negative one said plainly)."""
    of = "of the measured step" if t["basis"] == "measured" else "of the prediction"
    rows = [
        (name, _seconds(part["seconds"]), f"{_pct(part['share'])} {of}; {TIME_PARTS[name]}")
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
                f"{_pct(t['unexplained_share'])} of the measured step: measured - predicted, "
                "what the model does not account for",
            )
        )
    if t["contradiction"]:
        rows.append(("model > measured", "", t["contradiction"]))
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
    return ("combined", ratio(comb["speedup"]), note)


def _team_sections(a: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
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
            ratio(x["speedup"]),
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


def render(a: dict[str, Any], fmt: str = "text") -> str:
    """The account as text, Markdown or JSON. Text from the scenario or a file (the name, a path)
    is shown inert: in text with its control characters escaped (formats.printable), in
    Markdown as formats.markdown_text (no HTML, markup, link or math; a | does not end a
    cell), in JSON as json.dumps escapes it (ASCII only)."""
    if fmt == "json":
        a = account_json(a)  # the levers as JSON objects, their notes written
        check_finite(a)  # strict JSON: never Infinity or NaN (account() refuses them already)
        return json.dumps(a, indent=2, sort_keys=False, allow_nan=False) + "\n"
    tables = sections(a) + _team_sections(a)
    out: list[str] = []
    if fmt == "markdown":
        out.append(f"# Cost account: {markdown_text(a['scenario']['name'])}\n")
        for name, rows in tables:
            out += [f"## {markdown_text(name)}\n", "| quantity | value | note |", "|---|---:|---|"]
            out += ["| " + " | ".join(markdown_cell(x) for x in row) + " |" for row in rows]
            out.append("")
        return "\n".join(out)
    title = f"Cost account: {printable(a['scenario']['name'])}"
    out += [title, "=" * len(title)]
    for name, rows in tables:
        rows = [tuple(printable(x) for x in row) for row in rows]
        out += ["", name, "-" * len(name)]
        width = max(len(q) for q, _, _ in rows)
        vwidth = max(len(v) for _, v, _ in rows)
        out += [f"  {q:<{width}}  {v:>{vwidth}}  {n}".rstrip() for q, v, n in rows]
    return "\n".join(out) + "\n"
