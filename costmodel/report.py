"""The whole cost account of a training step, from a resolved scenario.

`account(scenario)` evaluates every expression of the model once (through lambdify) and
returns a nested dict of numbers: the public JSON interface (fractions, not percent).
`render(account, fmt)` turns it into text, Markdown or JSON.

An impossible account is refused, not printed: `account` raises `CostModelError` when MFU, HFU
or the MFU implied by the measured throughput exceeds 100% (the inputs contradict each other),
or when any figure is not a finite number. `mfu_if_total_params` may exceed 100%: it is the
demonstration of a mistake (N = total parameters), reported as it is.
"""

from __future__ import annotations

import json
import math
from typing import Any

import sympy as sp

from costmodel import attention, padding, roofline, utilization
from costmodel.flops import model_flops, tokens_per_expert
from costmodel.memory import logits_bytes
from costmodel.recompute import factor as recompute_policy_factor
from costmodel.recompute import recompute_factor
from costmodel.errors import CostModelError
from costmodel.scenario import Scenario
from costmodel.symbols import E, N, N_total, bytes_per_element

BF16_BYTES = 2

#: Every quantity of the account, as an expression of the scenario's symbols.
EXPRESSIONS: dict[str, sp.Expr] = {
    "model_flops_per_step": model_flops,
    "hardware_flops_per_step": utilization.hardware_flops,
    "recompute_factor": recompute_factor,
    "achieved_flops_per_s": utilization.achieved_flops_per_s,
    "achieved_flops_per_s_per_gpu": utilization.achieved_flops_per_s_per_gpu,
    "mfu": utilization.mfu,
    "hfu": utilization.hfu,
    "tokens_per_s": utilization.tokens_per_s,
    "tokens_per_s_per_gpu": utilization.tokens_per_s_per_gpu,
    "mfu_if_total_params": utilization.mfu.subs(N, N_total),
    "mfu_from_measured_tokens_per_s": utilization.mfu_from_throughput,
    "slots": padding.slots,
    "useful_fraction": padding.useful_fraction,
    "waste_fraction": padding.waste_fraction,
    "packing_speedup": padding.packing_speedup,
    "mfu_after_packing": padding.mfu_after_packing,
    "step_time_after_packing": padding.step_time_after_packing,
    "attention_padded": attention.attention_padded,
    "attention_actual": attention.attention_actual,
    "share_padded": attention.share(attention.attention_padded),
    "share_actual": attention.share(attention.attention_actual),
    "mfu_with_attention_padded": attention.mfu_with_attention(attention.attention_padded),
    "mfu_with_attention_actual": attention.mfu_with_attention(attention.attention_actual),
    "logits_bytes": logits_bytes.subs(bytes_per_element, BF16_BYTES),
    "machine_balance": roofline.machine_balance,
    "tokens_per_expert": tokens_per_expert,
}

_ARGS = sorted(set().union(*(e.free_symbols for e in EXPRESSIONS.values())), key=str)
_evaluate = None


def evaluate(scenario: Scenario) -> dict[str, float | None]:
    """Every expression in EXPRESSIONS as a float for this scenario (None where undefined)."""
    global _evaluate
    if _evaluate is None:
        _evaluate = sp.lambdify(_ARGS, list(EXPRESSIONS.values()), modules="math")
    subs = scenario.substitutions()
    if subs.get(E) == 0:  # a dense model: no experts, tokens per expert is undefined
        subs[E] = math.nan
    args = [subs.get(symbol, math.nan) for symbol in _ARGS]
    values = [float(v) for v in _evaluate(*args)]
    return {key: (None if math.isnan(value) else value)
            for key, value in zip(EXPRESSIONS, values)}


#: Figures that cannot exceed 100% for consistent inputs, in the order they are checked, with
#: the scenario keys each one comes from (named in the message when it does).
UTILIZATIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("mfu", "MFU", ("step_time", "num_gpus", "peak_flops", "tokens_per_step",
                    "activated_params")),
    ("hfu", "HFU", ("step_time", "num_gpus", "peak_flops", "tokens_per_step",
                    "activated_params", "recompute")),
    ("mfu_from_measured_tokens_per_s", "MFU from measured_tokens_per_s",
     ("measured_tokens_per_s", "num_gpus", "peak_flops", "activated_params")),
)


def _input_text(scenario: Scenario, key: str) -> str:
    if key == "tokens_per_step":
        return ("samples_per_step x mean_tokens_per_sample = "
                f"{_input(scenario['samples_per_step'])} x "
                f"{_input(scenario['mean_tokens_per_sample'])}")
    if key == "recompute" and scenario["recompute"] == "selective":
        return (f"recompute = selective (fraction "
                f"{_input(scenario['selective_recompute_fraction'])})")
    return f"{key} = {_input(scenario[key])}"


def check_possible(scenario: Scenario, figures: dict[str, float | None]) -> None:
    """Raise CostModelError if a utilization in UTILIZATIONS exceeds 100%: one line naming the
    figure and the inputs it comes from."""
    for key, label, inputs in UTILIZATIONS:
        value = figures.get(key)
        if value is not None and value > 1 + 1e-9:  # not float rounding at exactly 100%
            checks = ", ".join(_input_text(scenario, name) for name in inputs)
            raise CostModelError(
                f"impossible result: {label} = {_pct(value)} is not allowed; expected at most "
                f"100% (the inputs contradict each other; check {checks})")


def check_finite(a: dict[str, Any], where: str = "") -> None:
    """Raise CostModelError if any number of the account is inf or nan (JSON has neither)."""
    for key, value in a.items():
        name = f"{where}{key}"
        if isinstance(value, dict):
            check_finite(value, name + ".")
        elif isinstance(value, float) and not math.isfinite(value):
            raise CostModelError(f"impossible result: {name} = {value} is not allowed; expected a "
                                 "finite number (check the scenario's inputs)")


def account(scenario: Scenario) -> dict[str, Any]:
    """The cost account of `scenario` (see the module docstring); raises CostModelError for an
    impossible one (a utilization above 100%, a figure that is not finite)."""
    v = evaluate(scenario)
    check_possible(scenario, v)
    policy = scenario["recompute"]
    fraction = scenario["selective_recompute_fraction"]
    now = float(recompute_policy_factor(policy, fraction))
    selective = float(recompute_policy_factor("selective", fraction))
    selective_speedup = max(1.0, now / selective)
    combined = v["packing_speedup"] * selective_speedup
    measured = scenario["measured_tokens_per_s"]
    result = {
        "model_flops_per_step": v["model_flops_per_step"],
        "hardware_flops_per_step": v["hardware_flops_per_step"],
        "recompute_factor": v["recompute_factor"],
        "achieved_flops_per_s": v["achieved_flops_per_s"],
        "achieved_flops_per_s_per_gpu": v["achieved_flops_per_s_per_gpu"],
        "mfu": v["mfu"],
        "hfu": v["hfu"],
        "tokens_per_s": v["tokens_per_s"],
        "tokens_per_s_per_gpu": v["tokens_per_s_per_gpu"],
        "measured_tokens_per_s": measured,
        "measured_tokens_per_s_per_gpu": measured / scenario["num_gpus"] if measured else None,
        "mfu_from_measured_tokens_per_s": v["mfu_from_measured_tokens_per_s"],
        "mfu_if_total_params": v["mfu_if_total_params"],
        "padding": {
            "slots": v["slots"],
            "useful_fraction": v["useful_fraction"],
            "waste_fraction": v["waste_fraction"],
            "packing_speedup": v["packing_speedup"],
            "mfu_after_packing": v["mfu_after_packing"],
            "step_time_after_packing": v["step_time_after_packing"],
        },
        "attention": {
            "convention": attention.CONVENTIONS["course"].name,
            "padded": {
                "seq_len": scenario["seq_len"],
                "flops_per_step": v["attention_padded"],
                "share": v["share_padded"],
                "mfu_with_attention": v["mfu_with_attention_padded"],
            },
            "actual": {
                "seq_len": scenario["mean_tokens_per_sample"],
                "flops_per_step": v["attention_actual"],
                "share": v["share_actual"],
                "mfu_with_attention": v["mfu_with_attention_actual"],
            },
        },
        "projections": {
            "packing": {"speedup": v["packing_speedup"],
                        "step_time": v["step_time_after_packing"],
                        "mfu": v["mfu_after_packing"]},
            "selective_recompute": {"factor_now": now, "factor_selective": selective,
                                    "speedup": selective_speedup,
                                    "step_time": scenario["step_time"] / selective_speedup,
                                    "mfu": v["mfu"] * selective_speedup},
            "packing_and_selective_recompute": {"speedup": combined,
                                                "step_time": scenario["step_time"] / combined,
                                                "mfu": v["mfu"] * combined},
        },
        "logits_bytes": v["logits_bytes"],
        "machine_balance": v["machine_balance"],
        "tokens_per_expert": v["tokens_per_expert"],
        "scenario": dict(scenario.values),
    }
    check_finite(result)
    return result


# ---------------------------------------------------------------- rendering

def _sci(x):
    return "n/a" if x is None else f"{x:.4g}" if abs(x) < 1e4 else f"{x:.4e}"


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.2f}%"


def _tflops(x):
    return "n/a" if x is None else f"{x / 1e12:,.2f} TFLOP/s"


def _count(x):
    return "n/a" if x is None else f"{x:,.0f}"


def _seconds(x):
    return f"{x:,.1f} s"


def _input(value) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if abs(value) >= 1e12:
        return f"{value:.4g}"
    return _count(value) if abs(value) >= 1000 else str(value)


def sections(a: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """The account as titled tables of (quantity, value, note) rows."""
    sc = a["scenario"]
    pad, att, proj = a["padding"], a["attention"], a["projections"]
    rows_inputs = [(key, _input(value), "") for key, value in sc.items()]
    return [
        ("Inputs", rows_inputs),
        ("Model FLOPs (6ND)", [
            ("tokens per step D", _count(sc["tokens_per_step"]), "samples x mean tokens"),
            ("model FLOPs 6ND", _sci(a["model_flops_per_step"]), "N = activated matmul params"),
            ("recompute factor", f"{a['recompute_factor']:.4f}", f"recompute = {sc['recompute']}"),
            ("hardware FLOPs", _sci(a["hardware_flops_per_step"]), "6ND x recompute factor"),
            ("achieved, cluster", _tflops(a["achieved_flops_per_s"]), "6ND / step time"),
            ("achieved, per GPU", _tflops(a["achieved_flops_per_s_per_gpu"]), ""),
        ]),
        ("Utilization", [
            ("MFU", _pct(a["mfu"]), "model FLOPs / (T x GPUs x peak)"),
            ("HFU", _pct(a["hfu"]), "MFU x recompute factor"),
            ("MFU if total params used", _pct(a["mfu_if_total_params"]),
             "the MoE mistake: N = total_params"),
        ]),
        ("Throughput cross-check", [
            ("tokens/s, from D / T", _count(a["tokens_per_s"]), ""),
            ("tokens/s, measured", _count(a["measured_tokens_per_s"]), ""),
            ("tokens/s per GPU, from D / T", f"{a['tokens_per_s_per_gpu']:,.1f}", ""),
            ("tokens/s per GPU, measured", "n/a" if a["measured_tokens_per_s_per_gpu"] is None
             else f"{a['measured_tokens_per_s_per_gpu']:,.1f}", ""),
            ("MFU from measured tokens/s", _pct(a["mfu_from_measured_tokens_per_s"]),
             "6N x tok/s / (GPUs x peak)"),
        ]),
        ("Padding", [
            ("slots", _count(pad["slots"]), "samples x seq_len"),
            ("useful fraction", _pct(pad["useful_fraction"]), "D / slots"),
            ("waste", _pct(pad["waste_fraction"]), "if every sample is padded"),
            ("perfect-packing speedup", f"{pad['packing_speedup']:.3f}x", "slots / D"),
            ("MFU after packing", _pct(pad["mfu_after_packing"]), ""),
            ("step time after packing", _seconds(pad["step_time_after_packing"]), ""),
        ]),
        (f"Attention core ({att['convention']})", [
            (f"at padded length {_count(att['padded']['seq_len'])}",
             _sci(att["padded"]["flops_per_step"]),
             f"share {_pct(att['padded']['share'])}, MFU with attention "
             f"{_pct(att['padded']['mfu_with_attention'])}"),
            (f"at mean length {_count(att['actual']['seq_len'])}",
             _sci(att["actual"]["flops_per_step"]),
             f"share {_pct(att['actual']['share'])}, MFU with attention "
             f"{_pct(att['actual']['mfu_with_attention'])}"),
            ("attention width d", _count(sc["attention_dim"]), f"from {sc['attention_dim_from']}"),
            ("full-attention layers", _count(sc["num_full_attention_layers"]), ""),
        ]),
        ("Projections", [
            ("perfect packing", f"{proj['packing']['speedup']:.3f}x",
             f"step {_seconds(proj['packing']['step_time'])}, MFU {_pct(proj['packing']['mfu'])}"),
            ("selective recompute",
             f"{proj['selective_recompute']['speedup']:.3f}x",
             f"factor {proj['selective_recompute']['factor_now']:.3f} -> "
             f"{proj['selective_recompute']['factor_selective']:.3f}, step "
             f"{_seconds(proj['selective_recompute']['step_time'])}"),
            ("both (gains multiply)", f"{proj['packing_and_selective_recompute']['speedup']:.3f}x",
             f"step {_seconds(proj['packing_and_selective_recompute']['step_time'])}, MFU "
             f"{_pct(proj['packing_and_selective_recompute']['mfu'])}"),
        ]),
        ("Memory and hardware", [
            ("logits per micro batch", f"{a['logits_bytes'] / 1e9:,.1f} GB",
             "micro_batch x seq_len x vocab x 2 bytes"),
            ("machine balance", f"{a['machine_balance']:.1f} FLOP/byte", "peak / HBM bandwidth"),
            ("tokens per expert", _count(a["tokens_per_expert"]), "D x k / E"),
        ]),
    ]


def render(a: dict[str, Any], fmt: str = "text") -> str:
    if fmt == "json":
        check_finite(a)  # strict JSON: never Infinity or NaN (account() refuses them already)
        return json.dumps(a, indent=2, sort_keys=False, allow_nan=False) + "\n"
    title = f"Cost account: {a['scenario']['name']}"
    out: list[str] = []
    if fmt == "markdown":
        out.append(f"# {title}\n")
        for name, rows in sections(a):
            out += [f"## {name}\n", "| quantity | value | note |", "|---|---:|---|"]
            out += [f"| {q} | {v} | {n} |" for q, v, n in rows]
            out.append("")
        return "\n".join(out)
    out += [title, "=" * len(title)]
    for name, rows in sections(a):
        out += ["", name, "-" * len(name)]
        width = max(len(q) for q, _, _ in rows)
        vwidth = max(len(v) for _, v, _ in rows)
        out += [f"  {q:<{width}}  {v:>{vwidth}}  {n}".rstrip() for q, v, n in rows]
    return "\n".join(out) + "\n"
