"""The whole cost account of a training step, from a resolved scenario.

`account(scenario)` evaluates every expression of the model once (their generated numeric forms) and
returns a nested dict of numbers: the public JSON interface (fractions, not percent).
`render(account, fmt)` turns it into text, Markdown or JSON.

An impossible account is refused, not printed: `account` raises `CostModelError` when MFU, HFU
or the MFU implied by the measured throughput exceeds 100%, or, with padded batching, the HFU
counting every padded slot does (the inputs contradict each other),
or when any figure is not a finite number. `mfu_if_total_params` may exceed 100%: it is the
demonstration of a mistake (N = total parameters), reported as it is.
"""

from __future__ import annotations

import collections
import copy
import math
from typing import Any

from costmodel.derive import numeric, plain
from costmodel.derive.activations import DEFAULT_RECOMPUTE_MODULES
from costmodel.errors import CostModelError
from costmodel.evaluate.simulate.linear import linear_attention
from costmodel.formats import input_value, pct
from costmodel.inputs import attention_kernels, hardware
from costmodel.inputs.assumptions import SCENARIO_ASSUMPTION_KEYS
from costmodel.inputs.scenario import Scenario, as_scenario

#: Every quantity of the account, by name: the expressions of
#: costmodel.derive.numeric_forms.ACCOUNT_EXPRESSIONS, evaluated by their generated form
#: (costmodel.derive.numeric.account_figures, the source lambdify prints for them).
EXPRESSIONS = numeric.ACCOUNT_FIGURES


def evaluate(scenario: Scenario, linear_flops: float = 0.0) -> dict[str, float | None]:
    """Every expression in EXPRESSIONS as a float for this scenario (None where undefined);
    `linear_flops` is F_lin, the linear-attention core FLOPs of the step (linear.py)."""
    subs = scenario.numbers()
    subs["F_lin"] = linear_flops
    if subs.get("E") == 0:  # a dense model: no experts, tokens per expert is undefined
        subs["E"] = math.nan
    args = [subs.get(name, math.nan) for name in numeric.ACCOUNT_ARGS]
    values = [float(v) for v in numeric.account_figures(*args)]
    return {key: (None if math.isnan(value) else value) for key, value in zip(EXPRESSIONS, values)}


#: Figures that cannot exceed 100% for consistent inputs, in the order they are checked, with
#: the scenario keys each one comes from (named in the message when it does).
UTILIZATIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("mfu", "MFU", ("step_time", "num_gpus", "peak_flops", "tokens_per_step", "activated_params")),
    (
        "hfu",
        "HFU",
        ("step_time", "num_gpus", "peak_flops", "tokens_per_step", "activated_params", "recompute"),
    ),
    (
        "mfu_from_measured_tokens_per_s",
        "MFU from measured_tokens_per_s",
        ("measured_tokens_per_s", "num_gpus", "peak_flops", "activated_params"),
    ),
)


def _input_text(scenario: Scenario, key: str) -> str:
    if key == "tokens_per_step":
        return (
            "samples_per_step x mean_tokens_per_sample = "
            f"{input_value(scenario.samples_per_step)} x "
            f"{input_value(scenario.mean_tokens_per_sample)}"
        )
    if key == "recompute" and scenario.recompute == "selective":
        return (
            f"recompute = selective (fraction {input_value(scenario.recompute_weights_fraction)})"
        )
    return f"{key} = {input_value(scenario[key])}"


#: With padded batching every slot runs through the matmuls, so the HFU of the slots is bounded
#: too (a step cannot be faster than its padded work at peak).
PADDED_UTILIZATION = (
    "padded.hfu_of_slots",
    "HFU counting the padded slots",
    (
        "step_time",
        "num_gpus",
        "peak_flops",
        "samples_per_step",
        "seq_len",
        "activated_params",
        "recompute",
    ),
)


def check_possible(scenario: Scenario, figures: dict[str, float | None]) -> None:
    """Raise CostModelError if a utilization in UTILIZATIONS (and, with padded batching,
    PADDED_UTILIZATION) exceeds 100%: one line naming the figure and the inputs it comes from.
    A predicted step (step_time null) is checked against the peak its GEMMs run at
    (`gemm_peak`: the FP8 one under fp8: hybrid, where MFU against the BF16 peak may pass 100%
    as a named convention): the step-time model times at least the GEMMs' FLOPs at that peak,
    so a predicted step below it is no input contradiction but an error of the model, or of an
    N that is not the shape's (`predicted_over_peak`)."""
    checks = UTILIZATIONS
    if scenario.batching == "padded":
        checks = (*UTILIZATIONS, PADDED_UTILIZATION)
    predicted = scenario.step_time_from == "predicted"
    bound = gemm_peak(scenario) / scenario.peak_flops if predicted else 1.0
    for key, label, inputs in checks:
        value = figures.get(key)
        if value is None or value <= bound * (1 + 1e-9):  # not float rounding at exactly 100%
            continue
        if predicted and "step_time" in inputs:
            raise CostModelError(predicted_over_peak(scenario, label, value / bound))
        checks = ", ".join(_input_text(scenario, name) for name in inputs)
        raise CostModelError(
            f"impossible result: {label} = {pct(value)} is not allowed; expected at most "
            f"100% (the inputs contradict each other; check {checks})"
        )


def gemm_peak(scenario: Scenario) -> float:
    """The peak the layers' GEMMs run at in the step-time model (`compute_time.gemm_rates`):
    `peak_flops`, or its FP8 counterpart under fp8: hybrid on a GPU with one."""
    from costmodel.evaluate.simulate import compute_time
    from costmodel.inputs import efficiency

    rates = compute_time.gemm_rates(scenario, efficiency.efficiencies(scenario.values), "layers")
    return rates[0]


def timed_params(scenario: Scenario) -> dict[str, Any]:
    """The N of the model shape whose GEMMs the step-time model times (resolution.shape_params),
    where the shape comes from, and how far the scenario's activated_params (the N of 6ND) lies
    from it (`off`, a share; `differs`: beyond resolution.PARAMS_TOLERANCE, the report says so)."""
    from costmodel.inputs.resolution import PARAMS_TOLERANCE, shape_params

    n, origin = shape_params(scenario.values)
    off = abs(scenario.activated_params / n - 1) if n > 0 else None
    return {"n": n, "origin": origin, "off": off, "differs": off is None or off > PARAMS_TOLERANCE}


def predicted_over_peak(scenario: Scenario, label: str, value: float) -> str:
    """The one line for a figure of a predicted step above the peak its GEMMs run at: the N 6ND
    counts and the one the step-time model times when they differ, else the model's error."""
    from costmodel.inputs.resolution import shape_params

    n, origin = shape_params(scenario.values)
    peak = "the FP8 peak" if gemm_peak(scenario) != scenario.peak_flops else "the peak"
    head = (
        f"impossible result: {label} = {pct(value)} of {peak} from the predicted step "
        "(step_time null) is not allowed; expected at most 100%"
    )
    if n != scenario.activated_params:
        return (
            f"{head} (6ND counts activated_params = {input_value(scenario.activated_params)}, "
            f"the step-time model times the GEMMs of N = {input_value(n)} ({origin}): set "
            "activated_params to it, or give the measured step_time)"
        )
    if "HFU" in label:  # 6ND x (1 + r/3) counts the lm_head again under full recompute
        return (
            f"{head} (the recompute factor counts work the step-time model does not time, as "
            "the lm_head's forward again under full recompute; lower gemm_efficiency, or give "
            "the measured step_time)"
        )
    return f"{head} (an error of the step-time model: please report the scenario)"


def check_finite(a: dict[str, Any], where: str = "") -> None:
    """Raise CostModelError if any number of the account is inf or nan (JSON has neither)."""
    for key, value in a.items():
        name = f"{where}{key}"
        if isinstance(value, dict):
            check_finite(value, name + ".")
        elif isinstance(value, float) and not math.isfinite(value):
            raise CostModelError(
                f"impossible result: {name} = {value} is not allowed; expected a "
                "finite number (check the scenario's inputs)"
            )


_ORIGIN = {"file": "scenario", "--set": "scenario", "model": "scenario", "course": "course"}


def assumption_sources(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """key -> {value, source}: `scenario` (the team gave it), `course` (the course's default,
    an assumption about the team's run) or `derived` (computed from other keys)."""
    out = {}
    for key in SCENARIO_ASSUMPTION_KEYS:
        value, source = scenario[key], _ORIGIN.get(scenario.sources.get(key, ""), "derived")
        if key == "communication_share" and value is None:  # the layout's estimate (team_run)
            source = "derived"
        if key == "selective_recompute_fraction" and value is None:  # from recompute_modules
            source = "derived"
        out[key] = {"value": value, "source": source}
    return out


def _reading(v: dict, key: str, seq_len) -> dict[str, Any]:
    return {
        "seq_len": seq_len,
        "flops_per_step": v[f"attention_{key}"],
        "hardware_flops_per_step": v[f"attention_{key}_hardware"],
        "share": v[f"share_{key}"],
        "mfu_with_attention": v[f"mfu_with_attention_{key}"],
        "hfu_with_attention": v[f"hfu_with_attention_{key}"],
    }


#: Accounts already worked out in this process, by what they depend on (the resolved values,
#: where each came from, and the lengths file): a notebook kernel that runs the suite works out
#: the scenario's account once, not once per notebook. Each caller gets its own copy.
_ACCOUNTS: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
_KEPT = 16


def fill_step_time(scenario: Scenario) -> Scenario:
    """A scenario without a measured step (`step_time: null`) as a new Scenario with the
    step-time model's prediction as its step, source `predicted` (`step_time_from` says which it
    is), so that every figure that divides by the step time is the predicted one; a scenario with
    a measured step as it is. The prediction times the GEMMs of the model shape: an
    activated_params off its N by more than `resolution.PARAMS_TOLERANCE` is refused
    (`resolution.params_contradiction`), as 6ND / the predicted step would mix two models."""
    if scenario.step_time is not None:
        return scenario
    from costmodel.evaluate.simulate import step_time
    from costmodel.inputs.resolution import params_contradiction

    contradiction = params_contradiction(scenario.values)
    if contradiction:
        raise CostModelError(contradiction)

    key = repr(sorted(scenario.values.items()))
    if key not in _PREDICTED:
        # the share of the step a collective takes does not change what is exposed
        _PREDICTED[key] = step_time.predict(scenario.replace(step_time=1.0))["seconds"]
    return scenario.replace(
        step_time=_PREDICTED[key], step_time_from="predicted", sources={"step_time": "predicted"}
    )


_PREDICTED: dict[str, float] = {}


def account(scenario: Scenario, kept: bool = True) -> dict[str, Any]:
    """The cost account of `scenario` (see the module docstring); raises CostModelError for an
    impossible one (a utilization above 100%, a figure that is not finite). A null step_time is
    filled with the predicted step first (`fill_step_time`). `kept=False` (the command line: one
    account per process) works it out without keeping it, so without copying it."""
    scenario = fill_step_time(scenario)
    if not kept:
        return _account(scenario)
    key = repr(
        (sorted(scenario.values.items()), sorted(scenario.sources.items()), scenario.lengths)
    )
    if key not in _ACCOUNTS:
        _ACCOUNTS[key] = _account(scenario)
        while len(_ACCOUNTS) > _KEPT:
            _ACCOUNTS.popitem(last=False)
    _ACCOUNTS.move_to_end(key)
    return copy.deepcopy(_ACCOUNTS[key])


def _account(scenario: Scenario) -> dict[str, Any]:
    linear = linear_attention(scenario)
    v = evaluate(scenario, (linear or {}).get("flops_per_step") or 0.0)
    check_possible(scenario, v)
    batching = scenario.batching
    pad = {key: v[f"{batching}.{key}"] for key in numeric.PADDING_FIGURES}
    measured = scenario.measured_tokens_per_s
    kernel_convention = plain.convention_of(scenario.attention_flops, scenario.attention_kernel)
    model_convention = plain.convention_of(scenario.attention_flops, "eager")
    if linear is not None and linear["flops_per_step"] is not None:
        linear = {
            **linear,
            "hardware_flops_per_step": v["linear_attention_hardware"],
            "share": v["linear_share"],
        }
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
        "measured_tokens_per_s_per_gpu": measured / scenario.num_gpus if measured else None,
        "mfu_from_measured_tokens_per_s": v["mfu_from_measured_tokens_per_s"],
        "mfu_if_total_params": v["mfu_if_total_params"],
        "padding": {"batching": batching, **pad},
        "attention": {
            "convention": numeric.CONVENTION_NAMES[model_convention],
            "hardware_convention": numeric.CONVENTION_NAMES[kernel_convention],
            "attention_flops": scenario.attention_flops,
            "attention_kernel": scenario.attention_kernel,
            "padded": _reading(v, "padded", scenario.seq_len),
            "actual": {
                **_reading(v, "actual", scenario.mean_tokens_per_sample),
                "sum_squared_lengths": scenario.sum_squared_lengths,
                "sum_squared_lengths_from": scenario.sum_squared_lengths_from,
            },
        },
        "linear_attention": linear,
        "lengths": scenario.lengths.summary() if scenario.lengths is not None else None,
        "projections": projections(scenario, v, pad),
        "recompute": recompute_block(scenario, v),
        "fp8": fp8_block(scenario, v),
        "logits_bytes": v["logits_bytes"],
        "machine_balance": v["machine_balance"],
        "tokens_per_expert": v["tokens_per_expert"],
        "assumptions": assumption_sources(scenario),
        "scenario": dict(scenario.values),
    }
    result.update(team_run(scenario, result))
    check_finite(result)
    return result


def projections(scenario: Scenario, v: dict[str, Any], pad: dict[str, Any]) -> dict[str, Any]:
    """What packing, selective recompute, no recompute and packing with selective recompute
    would make of the step (speedup, step time, MFU), from the hardware FLOPs of each
    recompute policy with the attention core (`hardware_with_attention`)."""
    now = v["recompute_factor"]
    work_now = hardware_with_attention(scenario, v)
    work_selective = hardware_with_attention(scenario, v, "selective")
    work_off = hardware_with_attention(scenario, v, "none")
    off_speedup = max(1.0, work_now["flops"] / work_off["flops"])
    selective = work_selective["factor"]
    selective_speedup = max(1.0, work_now["flops"] / work_selective["flops"])
    combined = pad["packing_speedup"] * selective_speedup
    return {
        "packing": {
            "speedup": pad["packing_speedup"],
            "step_time": pad["step_time_after_packing"],
            "mfu": pad["mfu_after_packing"],
        },
        "selective_recompute": {
            "factor_now": now,
            "factor_selective": selective,
            "modules": work_selective["modules"],
            "weights_fraction": work_selective["weights_fraction"],
            "core_fraction": work_selective["core_fraction"],
            "fraction_from": work_selective["fraction_from"],
            "hardware_flops_now": work_now["flops"],
            "hardware_flops_selective": work_selective["flops"],
            "speedup": selective_speedup,
            "step_time": scenario.step_time / selective_speedup,
            "mfu": v["mfu"] * selective_speedup,
        },
        "recompute_off": {
            "hardware_flops": work_off["flops"],
            "speedup": off_speedup,
            "step_time": scenario.step_time / off_speedup,
            "mfu": v["mfu"] * off_speedup,
        },
        "packing_and_selective_recompute": {
            "speedup": combined,
            "step_time": scenario.step_time / combined,
            "mfu": v["mfu"] * combined,
        },
    }


def hardware_with_attention(
    sc: Scenario, v: dict[str, Any], policy: str | None = None
) -> dict[str, Any]:
    """Hardware FLOPs of a step with the attention core (real lengths) and linear attention, under
    the scenario's recompute or another policy (its modules: `scenario.recompute_fractions`):
    6ND x (1 + r/3), the core's forward x (1 + r_core + kappa), F_lin x (1 + r_core/3). The
    recompute projections compare these, so a policy that redoes the attention core pays for it."""
    sc = as_scenario(sc)
    from costmodel.inputs.scenario import recompute_fractions

    got = recompute_fractions(sc.values, policy)
    factor = 1 + got["weights"] / 3
    forward = v["attention_actual"] / 3  # model FLOPs are 3 x the core's forward
    kappa = float(numeric.KERNEL_BACKWARD_OVER_FORWARD[attention_kernels.KIND[sc.attention_kernel]])
    linear = (v["linear_attention_hardware"] or 0.0) / (1 + sc.recompute_core_fraction / 3)
    flops = (
        factor * v["model_flops_per_step"]
        + forward * (1 + got["core"] + kappa)
        + linear * (1 + got["core"] / 3)
    )
    modules = sc.recompute_modules if policy is None else None
    if (policy or sc.recompute) == "selective" and modules is None:
        modules = list(sc.recompute_modules or DEFAULT_RECOMPUTE_MODULES)
    return {
        "factor": factor,
        "flops": flops,
        "modules": modules,
        "weights_fraction": got["weights"],
        "core_fraction": got["core"],
        "fraction_from": got["from"],
    }


def recompute_block(sc: Scenario, v: dict[str, Any]) -> dict[str, Any]:
    """What is recomputed and the two fractions it gives (derive.recompute)."""
    sc = as_scenario(sc)
    return {
        "policy": sc.recompute,
        "modules": sc.recompute_modules,
        "num_layers": sc.recompute_num_layers,
        "method": sc.recompute_method if sc.recompute == "full" else None,
        "weights_fraction": sc.recompute_weights_fraction,
        "core_fraction": sc.recompute_core_fraction,
        "fraction_from": sc.recompute_fraction_from,
        "factor": v["recompute_factor"],
    }


def fp8_block(sc: Scenario, v: dict[str, Any]) -> dict[str, Any]:
    """FP8 training and MFU against the GPU's dense FP8 peak, beside the BF16 one (the account's
    `mfu`): each labelled; null where the GPU table has no FP8 figure."""
    sc = as_scenario(sc)
    fp8_peak = hardware.GPUS[sc.gpu].fp8_flops
    cluster = sc.step_time * sc.num_gpus
    return {
        "fp8": sc.fp8,
        "fp8_activations": sc.fp8_activations,
        "peak_flops_bf16": sc.peak_flops,
        "peak_flops_fp8": fp8_peak,
        "mfu_bf16_peak": v["mfu"],
        "mfu_fp8_peak": v["model_flops_per_step"] / (cluster * fp8_peak) if fp8_peak else None,
        "hfu_fp8_peak": v["hardware_flops_per_step"] / (cluster * fp8_peak) if fp8_peak else None,
    }


def team_run(sc: Scenario, acc: dict[str, Any]) -> dict[str, Any]:
    """The layout, the memory of the most loaded GPU, the communication of a step and the
    levers ranked for this run (evaluate.simulate.run, evaluate.levers.advice)."""
    sc = as_scenario(sc)
    from costmodel.evaluate.levers import advice
    from costmodel.evaluate.simulate import run, step_time

    shape = sc.shape
    mem = run.memory(sc, shape, fit=True)
    comm = run.comm(sc, shape)
    predicted = step_time.predict(sc, shape, comm)
    ranked = advice.advice(sc, acc, mem, comm, predicted)
    if comm["basis"] == "estimated":
        acc["assumptions"]["communication_share"]["value"] = comm["estimated_share"]
    return {
        "parallel": run.parallel(sc),
        "memory": mem,
        "communication": comm,
        "time": {
            **step_time.account(
                predicted, sc.step_time if sc.step_time_from == "measured" else None
            ),
            "timed_params": timed_params(sc),
        },
        "advice": ranked,
        # the hardware cannot go past its peak
        "advice_combined": advice.combined(
            ranked, sc.step_time, advice.busy_share(acc), sc, predicted
        ),
    }
