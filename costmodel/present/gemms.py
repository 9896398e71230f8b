"""`costmodel gemms` as text or JSON: the model's GEMMs per micro batch, per GPU of the
scenario's layout (TP, CP, EP), on the scenario's GPU."""

from __future__ import annotations

import json
from typing import Any

from costmodel.formats import num, printable, sci

#: The fields of a row that count something (dimensions, layers, uses, FLOPs): in JSON, a whole
#: number is written as an integer (49152, not 49152.0); a fraction (an expert's average rows)
#: stays a float.
COUNTS = ("m", "n", "k", "layers", "uses_per_token", "forward_flops_per_token")


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def render_gemms(table: dict[str, Any], fmt: str = "text") -> str:
    """The table of `costmodel.evaluate.simulate.gemms.gemm_table` (its rows `GemmRow`) as text or
    JSON, with each weight row's efficiency where the table has `efficiencies` (row key ->
    fraction of the peak: compute_time.row_efficiencies)."""
    if fmt == "json":
        rows = [
            {key: _whole(value) if key in COUNTS else value for key, value in row.as_dict().items()}
            for row in table["gemms"]
        ]
        return json.dumps({**table, "gemms": rows}, indent=2, allow_nan=False) + "\n"
    rows = table["gemms"]
    lay = table.get("layout") or {}
    tp, cp = lay.get("tensor_parallel", 1), lay.get("context_parallel", 1)
    ep, sp = lay.get("expert_parallel", 1), lay.get("sequence_parallel", False)
    split = any(r.per_gpu_fraction != 1 for r in rows)  # a column only under TP
    shaped = table.get("efficiencies") or {}  # a column where the table has them
    header = ("GEMM", "m", "k", "n", "layers", "fwd FLOP/token", "FLOP/byte", "bound")
    header += ("efficiency",) if shaped else ()
    if split:
        header = (*header[:6], "GPU share", *header[6:])
    body = [
        (
            r.name + ("" if r.weights else " [no weights]"),
            num(r.m),
            num(r.k),
            num(r.n),
            str(r.layers) + (f" x {r.uses_per_token}" if r.uses_per_token != 1 else ""),
            sci(r.forward_flops_per_token),
            *([_share(r.per_gpu_fraction)] if split else []),
            f"{r.intensity:,.1f}",
            r.bound,
            *([_efficiency(shaped, r)] if shaped else []),
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    weight_sum = sum(r.forward_flops_per_token for r in rows if r.weights)
    sources = sorted({part for r in rows for part in r.source.split("; ")})
    layout = f"TP {tp}, CP {cp}, EP {ep}" + (", SP" if sp else "")
    out = [
        f"GEMMs per micro batch of {table['micro_batch']} x {num(table['seq_len'])} tokens, "
        f"per GPU: {layout}, on {table['gpu']} "
        f"(machine balance {table['machine_balance']:,.1f} FLOP/byte, BF16)",
        "",
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))
        ),
    ]
    for line in body:
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))
            )
        )
    out += [
        "",
        f"weight GEMMs: {sci(weight_sum)} forward FLOPs per token = 2N, N = {num(weight_sum / 2)}",
        "layers x k: a routed expert runs k times per token (top-k); the attention core rows "
        f"are one head (x heads per GPU per layer), at the {table['attention_flops']} square",
        "m, k, n and FLOP/byte are one GPU's; fwd FLOP/token is the whole model's"
        + (", of which one GPU runs the GPU share for each of its tokens" if split else ""),
        *([EFFICIENCY_NOTE] if shaped else []),
        "shapes from: " + "; ".join(sources),
    ]
    return "\n".join(map(printable, out)) + "\n"  # file text (a config's name) shown escaped


#: What the efficiency column says (costmodel.inputs.gemm_efficiency).
EFFICIENCY_NOTE = (
    "efficiency: the fraction of the peak a weight GEMM of that shape reaches in the step time "
    "(tile and wave quantization over the GPU's SMs and the size ramp, under the large-GEMM "
    "efficiency; a routed expert's rows grouped over the experts a GPU holds; the attention "
    "core runs at the attention kernel's)"
)


def _efficiency(shaped: dict[str, float], row) -> str:
    return f"{shaped[row.key]:.3f}" if row.weights and row.key in shaped else "-"


def _share(fraction: float) -> str:
    """1/t as "1/4"; other shares (replicated KV heads) as a decimal."""
    inverse = 1 / fraction
    return f"1/{round(inverse)}" if abs(inverse - round(inverse)) < 1e-9 else f"{fraction:.3g}"
