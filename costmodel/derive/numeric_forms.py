"""The numeric forms of the derivations, printed as plain Python: the source of
`costmodel.derive.numeric`, which `costmodel report`, `params`, `gemms` and the step-time model
evaluate instead of SymPy (a cold command pays no SymPy import and no simplification).

The SymPy expressions stay the source of truth: `source()` walks the registry below (a name,
an expression, how it is evaluated today) and prints each as a function of one mapping `v`
from the names of `costmodel.derive.symbols` to numbers. `make numeric` (`python -m
costmodel.numeric_build`) writes the result; tests/derive/test_numeric.py fails when the written
file differs from `source()` (a derivation changed without regenerating it).

Each form is printed the way SymPy evaluates it, so the numbers stay bit-identical:

- `xreplace` (every symbol replaced by a number at once, then the tree evaluated bottom-up): an
  Add or a Mul folds its arguments left to right in SymPy's order; a Rational is a Fraction and
  x**-1 of an integer stays exact, so integer inputs give the exact value (float() rounds once),
  and float inputs round at each operation as SymPy's Floats do;
- `subs` (one symbol after another, in SymPy's order): monomials, folded in that order;
- `lambdify` (the account's figures): the source `sympy.lambdify(..., modules="math")` prints.
"""

from __future__ import annotations

import inspect
import re

import sympy as sp
from sympy.core.sorting import default_sort_key

from costmodel.derive import (
    attention,
    model_states,
    moe,
    padding,
    recompute,
    roofline,
    symbols,
    utilization,
)
from costmodel.derive import communication as comm
from costmodel.derive import linear_attention as la
from costmodel.derive import step_time as steps
from costmodel.derive.flops import model_flops, tokens_per_expert
from costmodel.derive.memory import logits_bytes

#: The module `source()` prints, and the command that writes it.
MODULE = "costmodel/derive/numeric.py"
COMMAND = "`make numeric` (`python -m costmodel.numeric_build`)"

BF16_BYTES = 2

#: Every quantity of the account (evaluate.account), as an expression of the scenario's symbols.
ACCOUNT_EXPRESSIONS: dict[str, sp.Expr] = {
    "model_flops_per_step": model_flops,
    "hardware_flops_per_step": utilization.hardware_flops,
    "recompute_factor": recompute.recompute_factor,
    "achieved_flops_per_s": utilization.achieved_flops_per_s,
    "achieved_flops_per_s_per_gpu": utilization.achieved_flops_per_s_per_gpu,
    "mfu": utilization.mfu,
    "hfu": utilization.hfu,
    "tokens_per_s": utilization.tokens_per_s,
    "tokens_per_s_per_gpu": utilization.tokens_per_s_per_gpu,
    "mfu_if_total_params": utilization.mfu.subs(symbols.N, symbols.N_total),
    "mfu_from_measured_tokens_per_s": utilization.mfu_from_throughput,
    **{
        f"{batching}.{key}": expr
        for batching in padding.SLOTS
        for key, expr in padding.figures(batching).items()
    },
    "attention_padded": attention.attention_padded,
    "attention_actual": attention.attention_actual,
    "attention_padded_hardware": attention.attention_padded_hardware,
    "attention_actual_hardware": attention.attention_actual_hardware,
    "share_padded": attention.share(attention.attention_padded),
    "share_actual": attention.share(attention.attention_actual),
    "mfu_with_attention_padded": attention.mfu_with_attention(attention.attention_padded),
    "mfu_with_attention_actual": attention.mfu_with_attention(attention.attention_actual),
    "hfu_with_attention_padded": attention.hfu_with_attention(attention.attention_padded_hardware),
    "hfu_with_attention_actual": attention.hfu_with_attention(attention.attention_actual_hardware),
    "linear_attention_hardware": attention.linear_attention_hardware,
    "linear_share": attention.linear_share(attention.attention_actual),
    "logits_bytes": logits_bytes.subs(symbols.bytes_per_element, BF16_BYTES),
    "machine_balance": roofline.machine_balance,
    "tokens_per_expert": tokens_per_expert,
}


def _kind(kind: str) -> str:
    return kind.replace("-", "_")


def communication_forms() -> dict[str, sp.Expr]:
    """The forms evaluate.communication evaluates, by name, built as it built them (the DP,
    TP, CP, EP and PP rows of derive.communication, each collective's bytes and split)."""
    s = symbols
    forms: dict[str, sp.Expr] = {"n_mb": s.n_mb, "two_n_mb": 2 * s.n_mb}
    for kind, sent in comm.COLLECTIVES.items():
        forms[f"sent_{_kind(kind)}"] = sent
        intra, inter = comm.across_nodes(kind)
        forms[f"intra_{_kind(kind)}"] = intra
        forms[f"inter_{_kind(kind)}"] = inter
    for label, held, group_size in (
        ("dense", comm.dense_params_per_rank, comm.dense_dp_group),
        ("experts", comm.expert_params_per_rank, comm.expert_dp_group),
    ):
        on = {s.N_rank: held, s.n_r: group_size}
        forms[f"dp_{label}_grads"] = held * s.beta_g
        forms[f"dp_{label}_weights"] = held * s.bytes_per_element
        forms[f"dp_{label}_zero0"] = comm.dp_zero0.subs(on)
        forms[f"dp_{label}_reduce_scatter"] = 1 * comm.dp_grad_reduce_scatter.subs(on)
        forms[f"dp_{label}_reduce_scatter_each"] = s.n_mb * comm.dp_grad_reduce_scatter.subs(on)
        forms[f"dp_{label}_all_gather"] = 1 * comm.dp_param_all_gather.subs(on)
        forms[f"dp_{label}_all_gathers_zero3"] = 2 * s.n_mb * comm.dp_param_all_gather.subs(on)
    forms["tp_buffer"] = comm.tp_buffer
    for sequence_parallel in (False, True):
        for recompute_ in (0, 1):
            for kind, forward, backward in comm.TP_COLLECTIVES[sequence_parallel]:
                calls = comm.stage_layers * s.n_mb * (forward * (1 + recompute_) + backward)
                one = comm.COLLECTIVES[kind].subs({s.n_r: s.t_p, s.buffer_bytes: comm.tp_buffer})
                name = f"tp_{int(sequence_parallel)}_{recompute_}_{_kind(kind)}"
                forms[f"{name}_calls"] = calls
                forms[f"{name}_bytes"] = calls * one
    for cp_comm_type, rows in comm.CP_COLLECTIVES.items():
        for recompute_ in (0, 1):
            for i, (kind, buffer, forward, backward) in enumerate(rows):
                calls = (
                    comm.stage_full_attention_layers
                    * s.n_mb
                    * (forward * (1 + recompute_) + backward)
                )
                one = comm.COLLECTIVES[kind].subs({s.n_r: s.c_p, s.buffer_bytes: buffer})
                name = f"cp_{cp_comm_type}_{recompute_}_{i}"
                forms[f"{name}_buffer"] = buffer
                forms[f"{name}_calls"] = calls
                forms[f"{name}_bytes"] = calls * one
    for recompute_ in (0, 1):
        forms[f"ep_{recompute_}_calls"] = comm.stage_moe_layers * s.n_mb * (1 + recompute_ + 1)
    for direction, beta in comm.EP_DIRECTIONS.items():
        forms[f"ep_{direction}_buffer"] = comm.ep_buffer * beta
        forms[f"ep_{direction}_nvlink"] = comm.ep_nvlink_bytes * beta
        forms[f"ep_{direction}_network"] = comm.ep_network_bytes * beta
    forms["pp_buffer"] = comm.pp_buffer
    forms["pp_buffer_sequence_parallel"] = comm.pp_buffer_sequence_parallel
    forms["pp_step"] = comm.pp_step
    forms["pp_step_sequence_parallel"] = comm.pp_step_sequence_parallel
    forms["bubble_fraction"] = comm.bubble_fraction
    return {f"comm_{name}": expr for name, expr in forms.items()}


def xreplace_forms() -> dict[str, sp.Expr]:
    """Forms evaluated today by replacing every symbol at once (xreplace)."""
    return {
        **communication_forms(),
        **{f"micro_batches_{batching}": expr for batching, expr in comm.MICRO_BATCHES.items()},
        **{f"bubble_{name}": expr for name, expr in steps.BUBBLE_OVER_COMPUTE.items()},
        **{
            f"model_state_{part}_{stage}": forms[stage]
            for part, forms in (
                ("weights", model_states.weights),
                ("gradients", model_states.gradients),
                ("optimizer", model_states.optimizer),
            )
            for stage in model_states.STAGES
        },
        "attention_actual": attention.attention_actual,
        "linear_core_forward_per_token": la.core_forward_per_token,
        "linear_conv_forward_per_token": la.conv_forward_per_token,
        "linear_core_training": la.core_training,
    }


def subs_forms() -> dict[str, sp.Expr]:
    """Monomials evaluated today with .subs (one symbol after another)."""
    return {
        "expert_rows": moe.expert_rows,
        "sum_sq_of_mean": attention.sum_sq_of_mean,
        "modules_fraction": recompute.modules_fraction,
    }


def constants() -> dict[str, object]:
    """Numbers and names of the derivations that the run-time path reads as data."""

    def exact(x):
        x = sp.nsimplify(x)
        return int(x) if x.is_Integer else _Exact(x)

    return {
        "SQUARE_FRACTION": {key: exact(v) for key, v in attention.SQUARE_FRACTION.items()},
        "KERNEL_BACKWARD_OVER_FORWARD": {
            key: exact(v) for key, v in attention.KERNEL_BACKWARD_OVER_FORWARD.items()
        },
        "CONVENTION_NAMES": {key: c.name for key, c in attention.CONVENTIONS.items()},
        "RECOMPUTE_POLICIES": {key: exact(v) for key, v in recompute.POLICIES.items()},
        "PADDING_FIGURES": tuple(padding.figures("padded")),
        "BATCHINGS": tuple(padding.SLOTS),
        "SCHEDULES": tuple(steps.BUBBLE_OVER_COMPUTE),
        "FP8_DISPATCH_BYTES": exact(comm.FP8_DISPATCH_BYTES),
        "COLLECTIVE_KINDS": tuple(comm.COLLECTIVES),
        "TP_COLLECTIVES": {k: tuple(row) for k, row in comm.TP_COLLECTIVES.items()},
        "CP_COLLECTIVES": {
            key: tuple(kind for kind, *_ in rows) for key, rows in comm.CP_COLLECTIVES.items()
        },
        "EP_DIRECTIONS": tuple(comm.EP_DIRECTIONS),
        "ACCOUNT_FIGURES": tuple(ACCOUNT_EXPRESSIONS),
    }


class _Exact:
    """A Rational printed as a Fraction."""

    def __init__(self, x: sp.Rational):
        self.x = x

    def __repr__(self) -> str:
        return f"_Q({self.x.p}, {self.x.q})"


# ------------------------------------------------------------------ printing
def symbol_names() -> dict[sp.Symbol, str]:
    """Each symbol of costmodel.derive.symbols by its attribute name there (a Python name)."""
    names: dict[sp.Symbol, str] = {}
    for key, value in vars(symbols).items():
        if isinstance(value, sp.Symbol):
            names.setdefault(value, key)
    return names


def _code(e: sp.Basic, names: dict) -> str:
    """Python for `e` evaluated as xreplace evaluates it (module docstring)."""
    if e.is_Symbol:
        return f'v["{names[e]}"]'
    if e.is_Integer:
        return str(int(e)) if e >= 0 else f"({int(e)})"
    if e.is_Rational:
        return f"_Q({e.p}, {e.q})"
    if e.is_Float:
        return repr(float(e))
    if e.is_Add or e.is_Mul:
        op = " + " if e.is_Add else " * "
        return "(" + op.join(_code(a, names) for a in e.args) + ")"
    if e.is_Pow:
        base, power = e.args
        if not power.is_Integer:
            raise NotImplementedError(f"power {power} of {e}")
        if power == -1:
            return f"_inv({_code(base, names)})"
        if power > 0:
            return f"_pow({_code(base, names)}, {int(power)})"
        return f"_inv_pow({_code(base, names)}, {-int(power)})"
    if isinstance(e, sp.ceiling):
        return f"_ceil({_code(e.args[0], names)})"
    if isinstance(e, (sp.Min, sp.Max)):
        func = "min" if isinstance(e, sp.Min) else "max"
        return f"{func}(" + ", ".join(_code(a, names) for a in e.args) + ")"
    raise NotImplementedError(f"{type(e).__name__}: {e}")


def _subs_code(e: sp.Expr, names: dict) -> str:
    """Python for the monomial `e` evaluated as .subs evaluates it: the coefficient times each
    symbol's power, in the order subs substitutes them (SymPy's default sort key)."""
    coeff, powers = e.as_coeff_mul()
    factors = dict(p.as_base_exp() for p in powers)
    if not all(base.is_Symbol and power.is_Integer for base, power in factors.items()):
        raise NotImplementedError(f"not a monomial: {e}")
    code = _code(coeff, names)
    for base in sorted(factors, key=default_sort_key):
        code = f"({code} * {_code(base ** factors[base], names)})"
    return code


def _lambdified(name: str, exprs: list[sp.Expr], args: list[sp.Symbol], names: dict) -> str:
    """The source sympy.lambdify prints for `exprs` (the math module), renamed `name`, its
    arguments the symbols' names (a dummy stands for a symbol whose name is no identifier)."""
    text = inspect.getsource(sp.lambdify(args, exprs, modules="math"))
    text = text.replace("def _lambdifygenerated(", f"def {name}(", 1)
    header, body = text.split("\n", 1)
    params = header[header.index("(") + 1 : header.rindex(")")].split(", ")
    for param, symbol in zip(params, args):
        if param != names[symbol]:
            header = re.sub(rf"\b{re.escape(param)}\b", names[symbol], header)
            body = re.sub(rf"\b{re.escape(param)}\b", names[symbol], body)
    return header + "\n" + body


_PRELUDE = '''"""GENERATED from the SymPy derivations by costmodel.derive.numeric_forms: do not edit.
Regenerate with {command};
tests/derive/test_numeric.py fails when this file is stale.

Each function takes `v`, a mapping from the names of costmodel.derive.symbols to numbers, and
evaluates one derived expression as SymPy evaluates it (integers stay exact: Fractions).
"""

# ruff: noqa: E501

import math
from fractions import Fraction as _Q


def _inv(x):
    return 1 / x if isinstance(x, float) else _Q(1) / x


def _pow(x, n):
    return float(_Q(x) ** n) if isinstance(x, float) else x**n


def _inv_pow(x, n):
    """1 / x**n as SymPy's Floats compute it (mpmath: x**n to 58 bits, then its inverse)."""
    if not isinstance(x, float):
        return _Q(1) / x**n
    power = _Q(x) ** n
    shift = 58 - (power.numerator.bit_length() - power.denominator.bit_length())
    while not (1 << 57) <= power * _Q(2) ** shift < (1 << 58):
        shift += 1 if power * _Q(2) ** shift < (1 << 57) else -1
    rounded = _Q(round(power * _Q(2) ** shift), 1) / _Q(2) ** shift
    return float(1 / rounded)


def _ceil(x):
    return math.ceil(x)

'''


def source() -> str:
    """The text of costmodel/derive/numeric.py (no I/O)."""
    names = symbol_names()
    parts = [_PRELUDE.format(command=COMMAND)]
    for key, value in constants().items():
        parts.append(f"{key} = {value!r}\n")
    account_args = sorted(
        set().union(*(e.free_symbols for e in ACCOUNT_EXPRESSIONS.values())), key=str
    )
    parts.append(f"ACCOUNT_ARGS = {tuple(names[a] for a in account_args)!r}\n\n")
    parts.append(
        "\n"
        + _lambdified(
            "account_figures", list(ACCOUNT_EXPRESSIONS.values()), account_args, names
        ).rstrip()
        + "\n"
    )
    for name, expr in {**xreplace_forms()}.items():
        parts.append(f"\n\ndef {name}(v):\n    return {_code(expr, names)}\n")
    for name, expr in subs_forms().items():
        parts.append(f"\n\ndef {name}(v):\n    return {_subs_code(expr, names)}\n")
    return "".join(parts)
