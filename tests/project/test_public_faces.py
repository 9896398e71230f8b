"""evaluate/ grouped by feature, each group with a public face, and no private name used across
modules (issue 33): a module's `_name` is its own business, so a change to it can stay local."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "costmodel"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in ROOT.rglob("*.py")}


def private_uses(modules: dict[str, Path]) -> list[str]:
    """`from M import _x` and `m._x` (m an imported costmodel module) across modules."""
    found = []
    for me, path in modules.items():
        tree = ast.parse(path.read_text())
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("costmodel"):
                for name in node.names:
                    full = f"{node.module}.{name.name}"
                    if full in modules:
                        aliases[name.asname or name.name] = full
                    elif name.name.startswith("_") and not name.name.startswith("__"):
                        if node.module != me:
                            found.append(f"{me}: from {node.module} import {name.name}")
            elif isinstance(node, ast.Import):
                for name in node.names:
                    if name.name in modules and name.asname:
                        aliases[name.asname] = name.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and aliases[node.value.id] != me
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{me}: {aliases[node.value.id]}.{node.attr}")
    return sorted(set(found))


def test_no_private_name_is_used_across_modules():
    assert private_uses(MODULES) == []


def test_the_check_finds_a_private_import(tmp_path):
    home = tmp_path / "costmodel" / "a.py"
    home.parent.mkdir()
    home.write_text("_x = 1\n")
    user = tmp_path / "costmodel" / "b.py"
    user.write_text("from costmodel.a import _x\nfrom costmodel import a\ny = a._x\n")
    modules = {"costmodel.a": home, "costmodel.b": user}
    assert private_uses(modules) == [
        "costmodel.b: costmodel.a._x",
        "costmodel.b: from costmodel.a import _x",
    ]


def test_evaluate_is_grouped_by_feature():
    evaluate = ROOT / "evaluate"
    loose = sorted(p.name for p in evaluate.glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"modules outside a feature package: {loose}"
    groups = sorted(p.parent.name for p in evaluate.glob("*/__init__.py"))
    assert len(groups) >= 5, groups


def test_each_group_is_its_docstring_and_defines_no_name():
    """A group's face is its docstring (what to call); it defines no name, so a module of the
    group is never shadowed by one (`from costmodel.evaluate.account import account` is the
    module)."""
    for init in (ROOT / "evaluate").glob("*/__init__.py"):
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), init
        assert len(tree.body) == 1, f"{init}: defines names besides its docstring"
