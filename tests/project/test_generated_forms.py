"""Every generated numeric form is named by its caller (issue 33): costmodel/derive/numeric.py
holds its forms in tables keyed by name (`COMM["bubble_fraction"]`, `LINEAR["core_training"]`),
as costmodel.derive.numeric_forms keys them, and a caller writes the key, so that grepping it
leads from the caller to the form's definition. A table whose innermost keys are a scenario's
choices (BUBBLE by pipeline_schedule, MICRO_BATCHES by batching) is indexed by the choice; its
keys are the choices the schema allows.

Two ways to break it fail here: a form reached by an assembled name (`getattr(numeric,
f"comm_{form}")`, or a string built to spell a form's key: `f"dp_{label}_grads"`), and a form
that no caller names (dead: remove it from numeric_forms and regenerate). The scan reads the
syntax trees of the runtime modules: costmodel/ but the generated module, its registry and the
generators (costmodel/generate/)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from costmodel.derive import numeric
from costmodel.inputs.fields import FIELDS

PACKAGE = Path(numeric.__file__).resolve().parents[1]
#: Where the forms are defined and printed, not called.
NOT_CALLERS = {"derive/numeric.py", "derive/numeric_forms.py"}
#: Tables whose innermost keys are a scenario key's choices, by that key.
BY_CHOICE = {"BUBBLE": "pipeline_schedule", "MICRO_BATCHES": "batching"}


def runtime_modules(package: Path = PACKAGE) -> dict[str, ast.Module]:
    """The callers' syntax trees, by path relative to the package."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel not in NOT_CALLERS and not rel.startswith("generate/"):
            out[rel] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def form_tables(module=numeric) -> dict[str, dict]:
    """The generated module's tables of forms: its dicts whose leaves are functions."""

    def forms(node) -> bool:
        if isinstance(node, dict):
            return bool(node) and all(map(forms, node.values()))
        return callable(node)

    return {k: v for k, v in vars(module).items() if isinstance(v, dict) and forms(v)}


def innermost_keys(table: dict) -> set:
    """The keys that name a form (the last key on its path)."""
    out = set()
    for key, value in table.items():
        out |= innermost_keys(value) if isinstance(value, dict) else {key}
    return out


def _pattern(node: ast.AST) -> str | None:
    """A regular expression for the strings an f-string or a `+` of strings can spell (each
    part computed at run time: `.+`); None when less than two characters are written out."""
    if isinstance(node, ast.JoinedStr):
        parts = node.values
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = []
        stack = [node]
        while stack:
            part = stack.pop()
            if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Add):
                stack += [part.right, part.left]
            else:
                parts.append(part)
    else:
        return None
    written = [p for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)]
    if sum(len(p.value) for p in written) < 2:  # `f"{mantissa}e{exponent}"` spells no name
        return None
    return "".join(
        re.escape(p.value) if isinstance(p, ast.Constant) and isinstance(p.value, str) else ".+"
        for p in parts
    )


def _reads_numeric(node: ast.AST, bound: set[str]) -> bool:
    """Whether `node` reads the generated module: it names it, or a name bound to what it read
    (`forms = numeric.DP[label]`)."""
    root = node
    while isinstance(root, ast.Subscript | ast.Attribute | ast.Call):
        root = root.func if isinstance(root, ast.Call) else root.value
    return "numeric" in ast.unparse(node) or getattr(root, "id", None) in bound


def assembled(trees: dict[str, ast.Module], names: set[str]) -> list[str]:
    """Each place that reaches a form through a name built at run time: getattr on the generated
    module with a computed name, or a string built to spell one of `names` (a form's key), but
    as the key of a dict that is not the generated module's (`v[f"attention_{key}"]`: the
    account's figures)."""
    found = []
    for path, tree in trees.items():
        bound = {
            target.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and "numeric" in ast.unparse(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        other_keys = {
            id(node.slice)
            for node in ast.walk(tree)
            if isinstance(node, ast.Subscript) and not _reads_numeric(node.value, bound)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr":
                target = ast.unparse(node.args[0]) if node.args else ""
                computed = len(node.args) > 1 and not isinstance(node.args[1], ast.Constant)
                if computed and "numeric" in target:
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            pattern = None if id(node) in other_keys else _pattern(node)
            if pattern and any(re.fullmatch(pattern, name) for name in names):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def named_keys(trees: dict[str, ast.Module]) -> set:
    """The keys the callers write in a subscript (`x["key"]`)."""
    out = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                out.add(node.slice.value)
    return out


def named_attributes(trees: dict[str, ast.Module]) -> set[str]:
    """The names the callers read of a module (`numeric.account_figures`) or import."""
    out = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                out.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                out |= {alias.name for alias in node.names}
    return out


def unnamed(tables: dict[str, dict], functions: set[str], trees: dict[str, ast.Module]):
    """The forms no caller names: a table no caller reads, a key of a table's names that no
    caller writes, a function of the module no caller reads."""
    attributes, keys = named_attributes(trees), named_keys(trees)
    out = [f"table {name}" for name in tables if name not in attributes]
    for name, table in tables.items():
        if name not in BY_CHOICE:
            out += [f"{name}: {key!r}" for key in sorted(innermost_keys(table) - keys, key=str)]
    return out + [f"function {name}" for name in sorted(functions - attributes)]


def _names(tables: dict[str, dict]) -> set[str]:
    """Every key that names a form (what a built string could spell)."""
    keys = set()
    for name, table in tables.items():
        if name not in BY_CHOICE:
            keys |= {k for k in innermost_keys(table) if isinstance(k, str)}
    return keys


def _functions() -> set[str]:
    return {
        name
        for name, value in vars(numeric).items()
        if callable(value)
        and not name.startswith("_")
        and getattr(value, "__module__", "") == numeric.__name__
    }


# ------------------------------------------------------------------ the package
def test_no_form_is_reached_by_an_assembled_name():
    found = assembled(runtime_modules(), _names(form_tables()))
    assert not found, "a generated form reached by a name built at run time:\n" + "\n".join(found)


def test_every_generated_form_is_named_by_a_caller():
    found = unnamed(form_tables(), _functions(), runtime_modules())
    assert not found, "generated forms no caller names (remove them):\n" + "\n".join(found)


def test_a_table_keyed_by_a_choice_has_a_form_for_each_choice():
    tables = form_tables()
    for name, key in BY_CHOICE.items():
        assert tuple(tables[name]) == FIELDS[key].choices, name


def test_the_forms_are_in_tables():
    """The generated module holds its forms in tables (and the account's figures): no other
    function is left to be reached by its name."""
    assert _functions() == {"account_figures"}
    assert {"COMM", "COLLECTIVES", "DP", "TP", "CP", "EP", "LINEAR"} <= set(form_tables())


# ------------------------------------------------------------------ each rule can fail
def _trees(source: str) -> dict[str, ast.Module]:
    return {"evaluate/x.py": ast.parse(source)}


def test_an_assembled_name_fails():
    """The code issue 33 found: a getattr of an f-string on the module, and strings that spell
    a form's key from its parts."""
    source = (
        "def f(form, values, label, kind, v):\n"
        '    getattr(numeric, f"comm_{form}")(values)\n'
        '    add(f"dp_{label}_grads", "intra_" + kind)\n'
        "    forms = numeric.DP[label]\n"
        '    forms[f"{kind}_grads"](values)\n'
        '    print(f"{label} GPUs", v[f"dp_{label}_grads"])\n'
    )
    names = {"dp_dense_grads", "intra_all_reduce", "n_mb"}
    found = assembled(_trees(source), names)
    assert [line.split(":")[1] for line in found] == ["2", "3", "3", "5"]


def test_a_dead_form_fails():
    tables = {"COMM": {"n_mb": abs, "pp_step": abs}, "BUBBLE": {"1f1b": abs}}
    trees = _trees('from costmodel.derive import numeric\nnumeric.COMM["n_mb"]({})\n')
    assert unnamed(tables, {"account_figures"}, trees) == [
        "table BUBBLE",
        "COMM: 'pp_step'",
        "function account_figures",
    ]
