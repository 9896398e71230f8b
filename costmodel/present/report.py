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
    sig,
    tflops,
)
from costmodel.formats import input_value as _input
from costmodel.formats import num as _count
from costmodel.formats import pct as _pct
from costmodel.formats import sci4 as _sci
from costmodel.formats import seconds as _seconds
from costmodel.present.advice import account_json
from costmodel.present.report_team import team_sections as _team_sections

#: A titled table of (quantity, value, note) rows.
Section = tuple[str, list[tuple[str, str, str]]]


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
        _flops_section(a, given),
        _utilization_section(a, step_note),
        _throughput_section(a, step_note),
        _padding_section(pad),
        *_lengths_section(a),
        _attention_section(a, given, att),
        _projections_section(proj),
        _hardware_section(a),
    ]


def _flops_section(a: dict[str, Any], given: dict[str, Any]) -> Section:
    """The Model FLOPs (6ND) table of the report."""
    return (
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
    )


def _utilization_section(a: dict[str, Any], step_note: str) -> Section:
    """The utilization table of the report."""
    return (
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
    )


def _throughput_section(a: dict[str, Any], step_note: str) -> Section:
    """The throughput table of the report."""
    return (
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
    )


def _padding_section(pad: dict[str, Any]) -> Section:
    """The padding table of the report."""
    return (
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
    )


def _attention_section(a: dict[str, Any], given: dict[str, Any], att: dict[str, Any]) -> Section:
    """The attention core table of the report."""
    return (
        f"Attention core ({att['convention']}; kernel {att['attention_kernel']})",
        [
            *_attention_rows(att, "padded", f"at padded length {_count(att['padded']['seq_len'])}"),
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
    )


def _projections_section(proj: dict[str, Any]) -> Section:
    """The projections table of the report."""
    return (
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
    )


def _hardware_section(a: dict[str, Any]) -> Section:
    """The memory and hardware table of the report."""
    return (
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
    )


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
