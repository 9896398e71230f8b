"""The notebook sources read a resolved scenario's keys as attributes (`sc.seq_len`), never by
string (`sc["seq_len"]`), and never write into one (issue 21, item 1: "nothing downstream reads
a key by string").

The check is static, over each source's syntax tree (notebooks/NN_*.py). Which
names hold a `Scenario` is worked out per notebook, flow-insensitively, from where scenarios come
from and how the notebooks pass them on:

- `d.load(...)` gives a pair (scenario, account); `scenario.resolve(...)` (or a bare
  `resolve(...)`) gives a scenario;
- a notebook's own function gives what its `return` gives, and its parameters (a lambda's too)
  take what the calls pass them;
- tuples and lists keep their items apart, dicts their values; `.items()`, `.values()`,
  indexing and `for`/comprehension targets unpack them.

A name bound to a scenario anywhere in a notebook counts as a scenario everywhere in it. Then
each of these is an error:

- any subscript of a scenario (`sc["seq_len"]`, `sc[key]`);
- a subscript of its `values` with a scenario key, or `.get(KEY)` on either;
- a subscript assignment or deletion into its `values` or `sources` (resolve the scenario with
  the key given instead).

Not errors: `sc.sources[KEY]` (where a key came from, a mapping by design) and every other
mapping (the account, lever rows, GEMM rows) even when it holds a key of the same name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from costmodel.inputs import scenario
from costmodel.inputs.fields import FIELDS

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))

#: What resolution adds to FIELDS (also taken from a resolved scenario below, so that a key added
#: later is covered without editing this list).
DERIVED = {
    "tokens_per_step",
    "data_parallel",
    "micro_batches_per_step",
    "num_full_attention_layers",
    "num_mtp_layers",
    "recompute_weights_fraction",
    "recompute_core_fraction",
    "recompute_fraction_from",
    "step_time_from",
    "attention_dim_from",
    "sum_squared_lengths",
    "sum_squared_lengths_from",
}
KEYS = set(FIELDS) | DERIVED | set(scenario.resolve().values)

SCENARIO, VALUES, SOURCES_MAP = "scenario", "values", "sources"


def _tuple(*kinds):
    return ("tuple", tuple(kinds))


def _known(kind) -> bool:
    """Whether `kind` says anything: a scenario somewhere in it."""
    if isinstance(kind, tuple):
        items = kind[1] if kind[0] == "tuple" else (kind[1],)
        return any(_known(item) for item in items)
    return kind is not None


def _first(kinds):
    return next((k for k in kinds if _known(k)), None)


class Kinds:
    """Which names of one module hold a scenario, its values or sources, or containers of them."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.env: dict[str, object] = {}
        self.functions = {
            n.name: n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }
        self.returns: dict[str, object] = {}
        for _ in range(20):  # to a fixed point: each pass can only add kinds
            before = (dict(self.env), dict(self.returns))
            self._pass()
            if (self.env, self.returns) == before:
                break

    # -------------------------------------------------------------- kinds of expressions
    def kind(self, node):
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, (ast.Tuple, ast.List)):
            return _tuple(*(self.kind(e) for e in node.elts))
        if isinstance(node, ast.Dict):
            return ("map", _first(self.kind(v) for v in node.values))
        if isinstance(node, ast.DictComp):
            return ("map", self.kind(node.value))
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return ("seq", self.kind(node.elt))
        if isinstance(node, ast.IfExp):
            return _first((self.kind(node.body), self.kind(node.orelse)))
        if isinstance(node, ast.Attribute) and self.kind(node.value) == SCENARIO:
            return {"values": VALUES, "sources": SOURCES_MAP}.get(node.attr)
        if isinstance(node, ast.Subscript):
            return self._item(self.kind(node.value), node.slice)
        return None

    def _call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner == "d" and func.attr == "load":
                return _tuple(SCENARIO, None)
            if owner == "scenario" and func.attr == "resolve":
                return SCENARIO
            inner = self.kind(func.value)
            if isinstance(inner, tuple) and inner[0] == "map":
                if func.attr == "items":
                    return ("seq", _tuple(None, inner[1]))
                if func.attr == "values":
                    return ("seq", inner[1])
            return None
        if isinstance(func, ast.Name):
            if func.id == "resolve":
                return SCENARIO
            return self.returns.get(func.id)
        if isinstance(func, ast.Lambda):
            return self.kind(func.body)
        return None

    @staticmethod
    def _item(container, index):
        if not isinstance(container, tuple):
            return None
        if container[0] in ("map", "seq"):
            return container[1]
        if isinstance(index, ast.Constant) and isinstance(index.value, int):
            items = container[1]
            return items[index.value] if -len(items) <= index.value < len(items) else None
        return None

    @staticmethod
    def _element(container):
        """The kind of what iterating over `container` gives."""
        if not isinstance(container, tuple):
            return None
        if container[0] == "seq":
            return container[1]
        if container[0] == "tuple":
            return _first(container[1])
        return None  # a dict iterates over its keys

    # -------------------------------------------------------------- binding
    def bind(self, target, kind) -> None:
        if not _known(kind):
            return
        if isinstance(target, ast.Name):
            if not _known(self.env.get(target.id)):
                self.env[target.id] = kind
        elif isinstance(target, (ast.Tuple, ast.List)) and kind[0] == "tuple":
            for element, item in zip(target.elts, kind[1]):
                if not isinstance(element, ast.Starred):
                    self.bind(element, item)
        elif isinstance(target, ast.arg):
            self.bind(ast.Name(id=target.arg), kind)

    def _parameters(self, params: ast.arguments, call: ast.Call) -> None:
        positional = [*params.posonlyargs, *params.args]
        for param, arg in zip(positional, call.args):
            self.bind(param, self.kind(arg))
        by_name = {p.arg: p for p in [*positional, *params.kwonlyargs]}
        for keyword in call.keywords:
            if keyword.arg in by_name:
                self.bind(by_name[keyword.arg], self.kind(keyword.value))

    def _pass(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self.bind(target, self.kind(node.value))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self.bind(node.target, self.kind(node.value))
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self.bind(node.target, self._element(self.kind(node.iter)))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returned = _first(
                    self.kind(r.value)
                    for r in ast.walk(node)
                    if isinstance(r, ast.Return) and r.value is not None
                )
                if _known(returned) and not _known(self.returns.get(node.name)):
                    self.returns[node.name] = returned
            elif isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name) and node.func.id in self.functions:
                    self._parameters(self.functions[node.func.id].args, node)
                elif isinstance(node.func, ast.Lambda):
                    self._parameters(node.func.args, node)


def _key(node) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KEYS:
        return node.value
    return None


def string_reads(source: str) -> list[str]:
    """`line: code` for each read of a scenario key by string, and each write into a scenario."""
    tree = ast.parse(source)
    kinds = Kinds(tree)
    found = []
    for node in ast.walk(tree):
        problem = None
        if isinstance(node, ast.Subscript):
            owner = kinds.kind(node.value)
            writes = isinstance(node.ctx, (ast.Store, ast.Del))
            if owner == SCENARIO:
                problem = "a scenario read by string"
            elif owner in (VALUES, SOURCES_MAP) and writes:
                problem = "a write into a resolved scenario"
            elif owner == VALUES and _key(node.slice):
                problem = "a scenario key read by string"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and _key(node.args[0])
            and kinds.kind(node.func.value) in (SCENARIO, VALUES)
        ):
            problem = "a scenario key read by string"
        if problem:
            found.append(f"{node.lineno}: {ast.unparse(node)} ({problem})")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def scenario_names(source: str) -> set[str]:
    return {name for name, kind in Kinds(ast.parse(source)).env.items() if kind == SCENARIO}


def test_there_are_notebook_sources():
    assert len(SOURCES) == 10, [p.name for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_notebook_reads_scenario_keys_as_attributes(source):
    text = source.read_text(encoding="utf-8")
    assert "sc" in scenario_names(text), "the check found no scenario in this notebook"
    assert string_reads(text) == [], (
        f"{source.name}: read scenario keys as attributes (sc.seq_len), never by string"
    )


# The check can fail: each way a notebook gets hold of a scenario is followed.
FLAGGED = {
    "load": 'sc, acc = d.load(scenario_file, overrides)\nx = sc["seq_len"]\n',
    "resolve": "base = scenario.resolve(None)\nx = f\"{base['vocab_size']}\"\n",
    "variable key": "sc, acc = d.load(None)\nkey = 'seq_len'\nx = sc[key]\n",
    "get on values": 'sc, acc = d.load(None)\nx = sc.values.get("seq_len")\n',
    "values read": 'sc = scenario.resolve(None)\nx = sc.values["step_time"]\n',
    "write into values": (
        'sc, acc = d.load(None)\nhsc = scenario.resolve(None)\nhsc.values["step_time"] = 1\n'
    ),
    "write into sources": 'hsc = scenario.resolve(None)\nhsc.sources["step_time"] = "p"\n',
    "own function, pair": (
        "def resolve_with(**keys):\n"
        "    hsc = scenario.resolve(None, keys)\n"
        "    return hsc, account(hsc)\n"
        "rsc, racc = resolve_with(num_layers=4)\n"
        'x = rsc["num_full_attention_layers"]\n'
    ),
    "dict of pairs, for": (
        "def resolve_with(**keys):\n"
        "    return scenario.resolve(None, keys), None\n"
        "hyp = {k: resolve_with(num_layers=k) for k in (1, 2)}\n"
        "for k, (hsc, hacc) in hyp.items():\n"
        '    print(hsc["attention_dim"])\n'
    ),
    "comprehension": (
        "def resolve_with(**keys):\n"
        "    return scenario.resolve(None, keys), None\n"
        "hyp = {k: resolve_with(num_layers=k) for k in (1, 2)}\n"
        'x = [h["attention_dim"] for h, _ in hyp.values()]\n'
    ),
    "parameter": (
        "def phi_of(hsc, hacc):\n"
        '    return hsc["tokens_per_step"]\n'
        "sc, acc = d.load(None)\nphi_of(sc, acc)\n"
    ),
    "lambda": '(lambda csc: csc["seq_len"])(scenario.resolve(None))\n',
    "tuple of tuples": (
        "rsc = scenario.resolve(None)\n"
        'for label, (xsc, x) in (("a", (rsc, None)),):\n'
        '    print(xsc["seq_len"])\n'
    ),
}


@pytest.mark.parametrize("snippet", FLAGGED.values(), ids=FLAGGED.keys())
def test_a_string_read_is_found(snippet):
    assert len(string_reads(snippet)) == 1, string_reads(snippet)


def test_other_mappings_and_attributes_pass():
    """The account, rows and `sources` may hold keys of the same names: no error."""
    snippet = (
        "sc, acc = d.load(None)\n"
        'pad = acc["padding"]\n'
        'x = pad["batching"], acc["attention"]["actual"]["seq_len"]\n'
        'rows = [{"step_time": 1}]\n'
        'y = [r["step_time"] for r in rows], rows[0].get("seq_len")\n'
        'z = sc.seq_len, sc.sources["seq_len"], sc.sources.get("attention_dim")\n'
        'w = {**sc.values, "attention_kernel": "flash"}\n'
    )
    assert string_reads(snippet) == []
    assert scenario_names(snippet) == {"sc"}
