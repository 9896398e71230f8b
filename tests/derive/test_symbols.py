"""Every symbol of the derive layer is defined once in costmodel.derive.symbols, with a unit and
a meaning, and two meanings are never the same SymPy object."""

import importlib
import pkgutil

import sympy as sp

from costmodel import derive
from costmodel.derive import (
    exercises,
    memory,
    symbols,
)
from costmodel.derive.numeric_forms import ACCOUNT_EXPRESSIONS as EXPRESSIONS

#: Every module of the derive layer, found (a new one is covered without editing this list).
MODULES = tuple(
    importlib.import_module(f"costmodel.derive.{info.name}")
    for info in pkgutil.iter_modules(derive.__path__)
    if info.name != "symbols"
)


def derive_expressions():
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, sp.Basic) and not name.startswith("__"):
                yield f"{module.__name__}.{name}", value
    yield from (("account." + key, expr) for key, expr in EXPRESSIONS.items())


def test_every_free_symbol_has_a_unit_and_a_meaning():
    missing = {
        f"{where}: {symbol}"
        for where, expr in derive_expressions()
        for symbol in expr.free_symbols
        if symbol not in symbols.MEANING
    }
    assert not missing, sorted(missing)
    for symbol, meaning in symbols.MEANING.items():
        assert meaning.unit and meaning.text, symbol


def test_module_symbols_are_the_ones_defined_in_symbols():
    for module in MODULES:
        for name, value in vars(module).items():
            if isinstance(value, sp.Symbol):
                assert value in symbols.MEANING, f"{module.__name__}.{name}"


def test_different_meanings_are_different_symbols():
    # both print "c" (the stored notebooks show it), but the number of logits chunks is a count
    assert str(memory.chunks) == str(exercises.c) == "c"
    assert memory.chunks != exercises.c
    assert symbols.MEANING[memory.chunks] != symbols.MEANING[exercises.c]
    # a printed name is shared only by those two
    names = [str(symbol) for symbol in symbols.MEANING]
    assert {n for n in names if names.count(n) > 1} == {"c"}
    # the Python name says what it is: k_top experts per token, k_dim a GEMM's inner dimension
    assert str(symbols.k_top) == "k_top" and str(symbols.k_dim) == "k"


def test_describe():
    assert symbols.describe(symbols.k_top) == "k_top [1]: routed experts per token (top-k)"
    assert symbols.describe(symbols.T) == "T [s]: wall time of one optimizer step"
