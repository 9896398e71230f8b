"""The cost account as text, Markdown or JSON (`costmodel report`)."""

from __future__ import annotations

import json
from typing import Any

from costmodel.evaluate.account.account import check_finite
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
from costmodel.inputs import hardware
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
    said, bound = ("predicted" if predicted else "measured"), peak_bound(a)
    return [
        ("Inputs", rows_inputs),
        _flops_section(a, given),
        _utilization_section(a, step_note),
        _throughput_section(a, step_note),
        _padding_section(pad),
        *_lengths_section(a),
        _attention_section(a, given, att, said, bound),
        _projections_section(proj, said, bound),
        _hardware_section(a),
    ]


def _over(x: float | None, bound: float = 1.0) -> bool:
    """Above the peak: a utilization past `bound` (100%; not float rounding at exactly it)."""
    return x is not None and x > bound * (1 + 1e-9)


def peak_bound(a: dict[str, Any]) -> float:
    """What a utilization against `peak_flops` may reach: 1, or, for a predicted step of an FP8
    run, the FP8 over the BF16 peak (its GEMMs timed at the FP8 peak: the account checks its
    MFU against that, `account.gemm_peak`)."""
    given = a["scenario"]
    ratio = hardware.fp8_gemm_ratio(given["gpu"], a["fp8"]["fp8"])
    return ratio if ratio and given.get("step_time_from") == "predicted" else 1.0


def hypothetical_reading(a: dict[str, Any]) -> str | None:
    """The attention reading that is no work of the run: a packed run computes no padded slots,
    so its reading at the padded length is a what-if (None for a padded run)."""
    return "padded" if a["padding"]["batching"] == "packed" else None


def _over_peak_line(what: str, said: str, needs: float) -> tuple[str, str, str]:
    """The one row a table gets when a figure of the step would pass 100%: the contradiction,
    not the figure."""
    return (
        f"{what} > peak",
        "",
        f"the {said} step is shorter than the work this count gives at the GPUs' peak "
        f"({ratio(needs, 2)} the peak): the step contradicts the count, so the figures above "
        "100% are not given",
    )


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
            *_fp8_convention_rows(a),
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


def _attention_section(
    a: dict[str, Any], given: dict[str, Any], att: dict[str, Any], said: str, bound: float
) -> Section:
    """The attention core table of the report. A reading of the run's own work whose MFU or
    HFU with attention would pass 100% gives neither: one row says the step contradicts it
    (a packed run's reading at the padded length is a what-if, shown as it is)."""
    what_if = hypothetical_reading(a)
    over = [
        att[key]["hfu_with_attention"]
        for key in ("padded", "actual")
        if key != what_if and _over(att[key]["hfu_with_attention"], bound)
    ]
    return (
        f"Attention core ({att['convention']}; kernel {att['attention_kernel']})",
        [
            *_attention_rows(
                att,
                "padded",
                f"at padded length {_count(att['padded']['seq_len'])}",
                given=what_if == "padded",
                bound=bound,
            ),
            *_attention_rows(
                att,
                "actual",
                f"at real lengths (mean {_count(att['actual']['seq_len'])})",
                f"sum of s^2 from {att['actual']['sum_squared_lengths_from']}",
                given=False,
                bound=bound,
            ),
            *([_over_peak_line("with attention", said, max(over))] if over else []),
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


def _projections_section(proj: dict[str, Any], said: str, bound: float) -> Section:
    """The projections table of the report. A projection whose MFU would pass 100% (the step
    is shorter than the work with attention at the peak) gives none: one row says so."""
    over = [p["mfu"] for p in proj.values() if _over(p["mfu"], bound)]

    def mfu(key: str) -> str:
        return "n/a (above 100%)" if _over(proj[key]["mfu"], bound) else _pct(proj[key]["mfu"])

    return (
        "Projections",
        [
            (
                "perfect packing",
                ratio(proj["packing"]["speedup"]),
                f"step {_seconds(proj['packing']['step_time'])}, MFU {mfu('packing')}",
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
                f"{mfu('packing_and_selective_recompute')}",
            ),
            *([_over_peak_line("projection", said, max(over))] if over else []),
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


def _fp8_convention_rows(a: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A predicted step of an FP8 run times its GEMMs at the FP8 peak: the figures against the
    BF16 peak may pass 100%, which one row says (none where they do not)."""
    fp8, pad, proj, att = a["fp8"], a["padding"], a["projections"], a["attention"]
    figures = [a["mfu"], a["hfu"], pad["mfu_after_packing"], pad["hfu_of_slots"]]
    figures += [p["mfu"] for p in proj.values()]
    figures += [
        att[k][f]
        for k in ("padded", "actual")
        for f in ("mfu_with_attention", "hfu_with_attention")
        if k != hypothetical_reading(a)
    ]
    if peak_bound(a) == 1 or not any(_over(x) for x in figures):
        return []
    return [
        (
            "above 100%",
            "",
            "against the BF16 peak (peak_flops): the GEMMs run at the FP8 peak (fp8: "
            f"{fp8['fp8']}), against which MFU is {_pct(fp8['mfu_fp8_peak'])}",
        )
    ]


def _with_attention(x: dict[str, Any], key: str, given: bool, bound: float) -> str:
    return _pct(x[key]) if given or not _over(x[key], bound) else "n/a (above 100%)"


def _attention_rows(
    att, key: str, label: str, extra: str = "", given: bool = True, bound: float = 1.0
) -> list[tuple[str, str, str]]:
    """A reading of the attention core; `given` False: its MFU and HFU with attention are shown
    only up to 100% (the run's own work: past the peak, the step contradicts it)."""
    x = att[key]
    return [
        (
            label,
            _sci(x["flops_per_step"]),
            f"share {_pct(x['share'])}, MFU with attention "
            f"{_with_attention(x, 'mfu_with_attention', given, bound)}"
            + (f"; {extra}" if extra else ""),
        ),
        (
            "  hardware FLOPs",
            _sci(x["hardware_flops_per_step"]),
            f"{att['hardware_convention']}, with recompute; HFU with attention "
            f"{_with_attention(x, 'hfu_with_attention', given, bound)}",
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


def _beyond(share: float | None) -> bool:
    return share is not None and abs(share) > 1


def no_impossible_shares(a: dict[str, Any]) -> dict[str, Any]:
    """The account with every share of the step that passes 100% (a measured step shorter than
    the model's work: a part, the remainder, the communication estimate) set to null, as the
    text leaves it out: the contradiction says it once (`time.contradiction`,
    `communication.exceeds_step`). A copy where anything changes; the account is untouched."""
    t, comm = a.get("time"), a.get("communication")
    if t is None or comm is None:
        return a
    shares = [p["share"] for p in t["parts"].values()] + [t["unexplained_share"]]
    if any(_beyond(x) for x in shares):
        parts = {name: {**p, "share": None} for name, p in t["parts"].items()}
        a = {**a, "time": {**t, "parts": parts, "unexplained_share": None}}
    keys = ("share", "estimated_share", "exposed_share", "share_used")
    if any(_beyond(comm[key]) for key in keys) or any(
        _beyond(c["share"]) for c in comm["collectives"]
    ):
        comm = {key: (None if key in keys and _beyond(v) else v) for key, v in comm.items()}
        comm["collectives"] = [
            {**c, "share": None if _beyond(c["share"]) else c["share"]} for c in comm["collectives"]
        ]
        a = {**a, "communication": comm}
        used = a["assumptions"]["communication_share"]
        if _beyond(used["value"]):
            assumptions = {**a["assumptions"], "communication_share": {**used, "value": None}}
            a = {**a, "assumptions": assumptions}
    return a


def no_figures_past_peak(a: dict[str, Any]) -> dict[str, Any]:
    """The account with the MFU and HFU with attention of the run's own readings, and the
    projections' MFU, set to null where they pass the peak (`peak_bound`), as the text leaves
    them out (the step contradicts the work they count); a packed run's reading at the padded
    length is a what-if and stays. A copy where anything changes; the account is untouched."""
    bound, what_if = peak_bound(a), hypothetical_reading(a)
    att = {
        key: {
            name: (None if name.endswith("_with_attention") and _over(v, bound) else v)
            for name, v in reading.items()
        }
        if key in ("padded", "actual") and key != what_if
        else reading
        for key, reading in a["attention"].items()
    }
    proj = {
        key: {**p, "mfu": None if _over(p["mfu"], bound) else p["mfu"]}
        for key, p in a["projections"].items()
    }
    if att != a["attention"] or proj != a["projections"]:
        a = {**a, "attention": att, "projections": proj}
    return a


def render(a: dict[str, Any], fmt: str = "text") -> str:
    """The account as text, Markdown or JSON. Text from the scenario or a file (the name, a path)
    is shown inert: in text with its control characters escaped (formats.printable), in
    Markdown as formats.markdown_text (no HTML, markup, link or math; a | does not end a
    cell), in JSON as json.dumps escapes it (ASCII only)."""
    if fmt == "json":
        # the levers as JSON objects, their notes written; no figure the text does not give
        a = no_figures_past_peak(no_impossible_shares(account_json(a)))
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
