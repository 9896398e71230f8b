"""Write costmodel/derive/numeric.py, the numeric forms of the SymPy derivations that the
commands evaluate instead of SymPy: `make numeric`, or `python -m costmodel.generate.numeric`.
tests/derive/test_numeric.py fails when the written file differs from `source()` (a derivation
changed without regenerating it).

The registry (which forms, by table and key, and how each is evaluated today) is
costmodel.derive.numeric_forms; this module prints it as plain Python, each form the way SymPy
evaluates it (that module's docstring), so that the numbers stay bit-identical:

- each table a dict of the same name and keys, each form `lambda v: ...`;
- the constants the run-time path reads as data, and the account's figures as
  `sympy.lambdify(..., modules="math")` prints them (`account_figures`).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import sympy as sp
from sympy.core.sorting import default_sort_key

from costmodel.derive import symbols
from costmodel.derive.numeric_forms import (
    ACCOUNT_EXPRESSIONS,
    constants,
    subs_tables,
    xreplace_tables,
)
from costmodel.generate import PACKAGE, run, write_generated

TARGET = PACKAGE / "derive" / "numeric.py"
HEADER = '"""GENERATED from the SymPy derivations'
COMMAND = "`make numeric` (`python -m costmodel.generate.numeric`)"


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


_PRELUDE = '''"""GENERATED from the SymPy derivations (costmodel.derive.numeric_forms) by
costmodel.generate.numeric: do not edit. Regenerate with {command};
tests/derive/test_numeric.py fails when this file is stale.

Each form takes `v`, a mapping from the names of costmodel.derive.symbols to numbers, and
evaluates one derived expression as SymPy evaluates it (integers stay exact: Fractions). The
forms are in tables (dicts) keyed by name, as costmodel.derive.numeric_forms keys them: a caller
names its form (`COMM["bubble_fraction"]`), or a scenario's choice (`BUBBLE[schedule]`).
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


def _key(key) -> str:
    """A table's key as the callers write it: a name in double quotes, a tuple of keys, a
    number."""
    if isinstance(key, str):
        return f'"{key}"'
    if isinstance(key, tuple):
        return "(" + ", ".join(map(_key, key)) + ")"
    return repr(key)


def _table(name: str, table: dict, code) -> str:
    """`name = {...}`: the table's keys as it keys them, each form `lambda v: <code(form)>`."""

    def nested(node: dict, depth: int) -> str:
        pad = "    " * (depth + 1)
        rows = [
            f"{pad}{_key(key)}: "
            + (nested(value, depth + 1) if isinstance(value, dict) else f"lambda v: {code(value)}")
            + ",\n"
            for key, value in node.items()
        ]
        return "{\n" + "".join(rows) + "    " * depth + "}"

    return f"\n\n{name} = {nested(table, 0)}\n"


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
    for name, table in xreplace_tables().items():
        parts.append(_table(name, table, lambda e: _code(e, names)))
    for name, table in subs_tables().items():
        parts.append(_table(name, table, lambda e: _subs_code(e, names)))
    return "".join(parts)


def write(path: Path = TARGET) -> bool:
    """Write the generated source to `path`; returns whether the file changed. Refuses a file
    there that is not a generated one (it was not written by this command)."""
    return write_generated(path, source(), HEADER, "numeric.py")


def main() -> int:
    return run(TARGET, write)


if __name__ == "__main__":
    raise SystemExit(main())
