"""The package's layers, read from its imports (AST, every import statement, also those inside
functions): derive -> inputs -> evaluate -> present, each importing only the layers before it,
and no import cycle anywhere in the package."""

import ast
import sys
from pathlib import Path

import costmodel

PACKAGE = Path(costmodel.__file__).resolve().parent
LAYERS = ["derive", "inputs", "evaluate", "present"]
#: Leaf modules every layer may use: they import nothing of costmodel.
LEAVES = {"costmodel.errors", "costmodel.formats"}
#: Third-party packages the derive layer may import (besides the standard library).
DERIVE_THIRD_PARTY = {"sympy", "numpy"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "notebooks" not in p.parts}


def imports(path: Path) -> set[str]:
    """Every module an import statement of `path` names (absolute and relative)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = (
                    module_name(path)
                    if path.name == "__init__.py"
                    else module_name(path).rsplit(".", 1)[0]
                )
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return found


def internal(names: set[str], known: dict[str, Path]) -> set[str]:
    """The costmodel modules among imported names (a `from pkg import module` names both)."""
    return {n for n in names if n in known and n != "costmodel"}


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_the_four_layers_exist_and_hold_the_package():
    known = modules()
    for layer in LAYERS:
        assert f"costmodel.{layer}" in known
    loose = sorted(n for n in known if n.count(".") == 1 and layer_of(n) is None)
    assert loose == sorted(
        [
            "costmodel.__main__",
            "costmodel.cli",
            "costmodel.course",
            "costmodel.errors",
            "costmodel.formats",
            "costmodel.validate",
            "costmodel.validate_memory",
        ]
    )


def test_each_layer_imports_only_the_layers_before_it():
    known = modules()
    wrong = []
    for name, path in known.items():
        layer = layer_of(name)
        if layer is None:
            continue
        rank = LAYERS.index(layer)
        for target in internal(imports(path), known):
            other = layer_of(target)
            if other is not None and LAYERS.index(other) > rank:
                wrong.append(f"{name} imports {target}")
            if other is None and target not in LEAVES and target != "costmodel.course":
                wrong.append(f"{name} imports {target} (not a layer, not a leaf)")
    assert not wrong, "\n".join(wrong)


def test_derive_is_sympy_and_numpy_only():
    known = modules()
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    wrong = []
    for name, path in known.items():
        if layer_of(name) != "derive":
            continue
        for target in imports(path):
            top = target.split(".")[0]
            if top == "costmodel":
                if target in known and layer_of(target) not in ("derive", None):
                    wrong.append(f"{name} imports {target}")
                if target in known and layer_of(target) is None and target != "costmodel":
                    wrong.append(f"{name} imports {target}")
            elif top not in stdlib and top not in DERIVE_THIRD_PARTY:
                wrong.append(f"{name} imports {target}")
            elif top in ("io", "os", "pathlib", "json", "csv", "importlib", "open"):
                wrong.append(f"{name} imports {target} (derive does no I/O)")
    assert not wrong, "\n".join(wrong)


def test_leaves_import_nothing_of_the_package():
    known = modules()
    for leaf in LEAVES:
        assert not internal(imports(known[leaf]), known), leaf


def test_no_import_cycle():
    known = modules()
    graph = {
        name: {t for t in internal(imports(path), known) if t != name}
        for name, path in known.items()
    }
    # a package's __init__ is not an edge target worth following when empty of imports
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, cycles


def test_the_checker_sees_a_violation(tmp_path):
    """The rule is not vacuous: an upward import is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from costmodel.present import display\n")
    assert "costmodel.present.display" in imports(bad)
