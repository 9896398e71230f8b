"""The package's layers, read from its imports (AST, every import statement, also those inside
functions): derive -> inputs -> evaluate -> present -> publish, each importing only the layers
before it, nothing outside the layers importing publish but the command line (and the generators,
which read any layer: docs/cli.md documents `make lab`'s parser), derive doing no I/O, the leaves
importing nothing of the package, no runtime module importing the generators
(costmodel.generate: they run at development time), and no import cycle anywhere.

Each rule is a function over a map {module name: path}, so that the tests can run it on the
package and on a small package written to make it fail (every rule proves it can fail)."""

import ast
import sys
from pathlib import Path

import costmodel

PACKAGE = Path(costmodel.__file__).resolve().parent
LAYERS = ["derive", "inputs", "evaluate", "present", "publish"]
#: The modules outside the layers that may import the last layer (publish): the command line.
TOP = {"costmodel.cli", "costmodel.__main__"}
#: Leaf modules every layer may use: they import nothing of costmodel. The course package (its
#: figures and notebooks, package data) is one: it was exempt from the layer rule, so an
#: evaluate -> course -> present chain passed. `records` is the frozen dataclasses' decorator.
LEAVES = {"costmodel.errors", "costmodel.formats", "costmodel.course", "costmodel.records"}
#: Calls that read or write files: the derive layer makes none (builtin open, pathlib's).
IO_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes"}
#: Third-party packages the derive layer may import (besides the standard library).
DERIVE_THIRD_PARTY = {"sympy", "numpy"}
#: The generators (`make numeric`, `make docs`): they import the runtime, never the reverse.
GENERATORS = "costmodel.generate"


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in package.rglob("*.py") if "notebooks" not in p.parts}


def imports(path: Path, package: Path = PACKAGE) -> set[str]:
    """Every module an import statement of `path` names (absolute and relative)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = (
                    module_name(path, package)
                    if path.name == "__init__.py"
                    else module_name(path, package).rsplit(".", 1)[0]
                )
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
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


def io_calls(path: Path) -> set[str]:
    """The file-reading or -writing calls of `path`: open(...), x.open(...), x.read_text(...)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in IO_CALLS:
                found.add(name)
    return found


# ------------------------------------------------------------------ the rules
def layer_violations(known: dict[str, Path], package: Path = PACKAGE) -> list[str]:
    """Each layer imports only the layers before it and the leaves."""
    wrong = []
    for name, path in known.items():
        layer = layer_of(name)
        if layer is None:
            continue
        rank = LAYERS.index(layer)
        for target in internal(imports(path, package), known):
            other = layer_of(target)
            if other is not None and LAYERS.index(other) > rank:
                wrong.append(f"{name} imports {target}")
            if other is None and target not in LEAVES:
                wrong.append(f"{name} imports {target} (not a layer, not a leaf)")
    return wrong


def top_violations(known: dict[str, Path], package: Path = PACKAGE) -> list[str]:
    """Outside the layers, only the command line (TOP) imports the last layer, publish: the
    tools beside the layers (validate, validate_memory) and the leaves do not. The generators
    may (GENERATORS: development time, never imported by the runtime; docs/cli.md reads the
    parser of costmodel.publish.lab)."""
    last = LAYERS[-1]
    wrong = []
    for name, path in known.items():
        if layer_of(name) is not None or name in TOP or name.startswith(GENERATORS + "."):
            continue
        for target in internal(imports(path, package), known):
            if layer_of(target) == last:
                wrong.append(f"{name} imports {target} (only {', '.join(sorted(TOP))} may)")
    return wrong


def derive_violations(known: dict[str, Path], package: Path = PACKAGE) -> list[str]:
    """derive imports the standard library, SymPy, NumPy and derive only, and does no I/O."""
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    wrong = []
    for name, path in known.items():
        if layer_of(name) != "derive":
            continue
        for target in imports(path, package):
            top = target.split(".")[0]
            if top == "costmodel":
                if target in known and layer_of(target) != "derive" and target != "costmodel":
                    wrong.append(f"{name} imports {target}")
            elif top not in stdlib and top not in DERIVE_THIRD_PARTY:
                wrong.append(f"{name} imports {target}")
            elif top in ("io", "os", "pathlib", "json", "csv", "importlib", "open", "shutil"):
                wrong.append(f"{name} imports {target} (derive does no I/O)")
        wrong += [f"{name} calls {call}() (derive does no I/O)" for call in io_calls(path)]
    return wrong


def leaf_violations(known: dict[str, Path], package: Path = PACKAGE) -> list[str]:
    """A leaf (a module, or a package with its modules) imports nothing else of costmodel."""
    wrong = []
    for name, path in known.items():
        leaf = next((x for x in LEAVES if name == x or name.startswith(x + ".")), None)
        if leaf is None:
            continue
        for target in internal(imports(path, package), known):
            if target != leaf and not target.startswith(leaf + "."):
                wrong.append(f"{name} imports {target} (a leaf imports nothing of the package)")
    return wrong


def generator_violations(known: dict[str, Path], package: Path = PACKAGE) -> list[str]:
    """No module outside the generators (the layers, the command line, the tools, the leaves)
    imports them: what costmodel runs for a user never needs the code that writes its
    generated modules."""
    wrong = []
    for name, path in known.items():
        if name == GENERATORS or name.startswith(GENERATORS + "."):
            continue
        for target in internal(imports(path, package), known):
            if target == GENERATORS or target.startswith(GENERATORS + "."):
                wrong.append(f"{name} imports {target} (a generator)")
    return wrong


def cycles(known: dict[str, Path], package: Path = PACKAGE) -> list[list[str]]:
    graph = {
        name: {t for t in internal(imports(path, package), known) if t != name}
        for name, path in known.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return found


# ------------------------------------------------------------------ the package
def test_the_five_layers_exist_and_hold_the_package():
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
            "costmodel.generate",
            "costmodel.records",
            "costmodel.validate",
            "costmodel.validate_memory",
        ]
    )


def test_each_layer_imports_only_the_layers_before_it():
    wrong = layer_violations(modules())
    assert not wrong, "\n".join(wrong)


def test_only_the_command_line_imports_publish():
    wrong = top_violations(modules())
    assert not wrong, "\n".join(wrong)


def test_derive_is_sympy_and_numpy_only_and_does_no_io():
    wrong = derive_violations(modules())
    assert not wrong, "\n".join(wrong)


def test_leaves_import_nothing_of_the_package():
    wrong = leaf_violations(modules())
    assert not wrong, "\n".join(wrong)


def test_no_runtime_module_imports_the_generators():
    wrong = generator_violations(modules())
    assert not wrong, "\n".join(wrong)


def test_the_generators_are_in_their_package():
    """`make numeric` and `make docs` run costmodel.generate's modules, none of a layer."""
    known = modules()
    assert {f"{GENERATORS}.{m}" for m in ("numeric", "course", "router", "docs")} <= set(known)
    assert not any(n.endswith(("numeric_build", "docs_tables")) for n in known)


def test_no_import_cycle():
    found = cycles(modules())
    assert not found, found


# ------------------------------------------------------------------ each rule can fail
def _package(tmp_path: Path, files: dict[str, str]) -> tuple[dict[str, Path], Path]:
    """A small costmodel package: the five layers, the leaves, and `files` ({relative path:
    source}) written over them."""
    root = tmp_path / "costmodel"
    base = {
        "__init__.py": "",
        "errors.py": "",
        "formats.py": "",
        "course/__init__.py": "",
        **{f"{layer}/__init__.py": "" for layer in LAYERS},
        **{f"{layer}/a.py": "" for layer in LAYERS},
    }
    for rel, text in {**base, **files}.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules(root), root


def test_a_clean_small_package_passes_every_rule(tmp_path):
    known, root = _package(
        tmp_path,
        {
            "publish/a.py": "from costmodel.present import a\n",
            "cli.py": "from costmodel.publish import a\n",
            "present/a.py": "from costmodel.evaluate import a\nfrom costmodel import course\n",
            "evaluate/a.py": "from costmodel.inputs import a\nimport costmodel.errors\n",
            "derive/a.py": "import sympy\nfrom costmodel.derive import b\n",
            "derive/b.py": "import math\n",
        },
    )
    assert not layer_violations(known, root) and not derive_violations(known, root)
    assert not leaf_violations(known, root) and not cycles(known, root)
    assert not top_violations(known, root)


def test_an_upward_import_fails_even_inside_a_function(tmp_path):
    known, root = _package(
        tmp_path, {"evaluate/a.py": "def f():\n    from costmodel.present import a\n"}
    )
    assert "costmodel.evaluate.a imports costmodel.present.a" in layer_violations(known, root)


def test_present_importing_publish_fails(tmp_path):
    """publish is the layer after present: formatting does not reach into the machinery."""
    known, root = _package(tmp_path, {"present/a.py": "from costmodel.publish import a\n"})
    assert sorted(layer_violations(known, root)) == [
        "costmodel.present.a imports costmodel.publish",
        "costmodel.present.a imports costmodel.publish.a",
    ]


def test_a_tool_beside_the_layers_importing_publish_fails(tmp_path):
    """Only the command line (and a generator) imports publish: not validate.py, not a leaf."""
    known, root = _package(
        tmp_path,
        {
            "cli.py": "from costmodel.publish import a\n",
            "generate/docs.py": "from costmodel.publish import a\n",
            "validate.py": "import costmodel.publish.a\n",
            "course/__init__.py": "from costmodel.publish import a\n",
        },
    )
    only = "(only costmodel.__main__, costmodel.cli may)"
    assert sorted(top_violations(known, root)) == [
        f"costmodel.course imports costmodel.publish {only}",
        f"costmodel.course imports costmodel.publish.a {only}",
        f"costmodel.validate imports costmodel.publish.a {only}",
    ]


def test_a_chain_through_the_course_package_fails(tmp_path):
    """evaluate -> course -> present: the course package is a leaf, not an exemption."""
    known, root = _package(
        tmp_path,
        {
            "evaluate/a.py": "from costmodel import course\n",
            "course/__init__.py": "from costmodel.present import a\n",
        },
    )
    assert not layer_violations(known, root)  # a leaf may be imported by any layer
    assert (
        "costmodel.course imports costmodel.present.a (a leaf imports nothing of the package)"
        in leaf_violations(known, root)
    )


def test_a_module_outside_the_layers_fails(tmp_path):
    known, root = _package(tmp_path, {"cli.py": "", "inputs/a.py": "from costmodel import cli\n"})
    assert layer_violations(known, root) == [
        "costmodel.inputs.a imports costmodel.cli (not a layer, not a leaf)"
    ]


def test_io_in_derive_fails_whether_imported_or_builtin(tmp_path):
    known, root = _package(
        tmp_path,
        {
            "derive/a.py": "def f(p):\n    return open(p).read()\n",
            "derive/b.py": "def g(p):\n    return p.read_text()\n",
            "derive/c.py": "import json\n",
            "derive/d.py": "import yaml\n",
            "derive/e.py": "from costmodel.inputs import a\n",
        },
    )
    assert sorted(derive_violations(known, root)) == [
        "costmodel.derive.a calls open() (derive does no I/O)",
        "costmodel.derive.b calls read_text() (derive does no I/O)",
        "costmodel.derive.c imports json (derive does no I/O)",
        "costmodel.derive.d imports yaml",
        "costmodel.derive.e imports costmodel.inputs",
        "costmodel.derive.e imports costmodel.inputs.a",
    ]


def test_a_runtime_module_importing_a_generator_fails(tmp_path):
    """The command line and a layer (even inside a function) importing a generator fail; a
    generator importing the layers passes."""
    known, root = _package(
        tmp_path,
        {
            "generate/__init__.py": "",
            "generate/numeric.py": "from costmodel.derive import a\n",
            "cli.py": "from costmodel.generate import numeric\n",
            "present/a.py": "def f():\n    import costmodel.generate.numeric\n",
        },
    )
    assert sorted(generator_violations(known, root)) == [
        "costmodel.cli imports costmodel.generate (a generator)",
        "costmodel.cli imports costmodel.generate.numeric (a generator)",
        "costmodel.present.a imports costmodel.generate.numeric (a generator)",
    ]


def test_a_leaf_importing_the_package_fails(tmp_path):
    known, root = _package(tmp_path, {"formats.py": "from costmodel import errors\n"})
    assert leaf_violations(known, root) == [
        "costmodel.formats imports costmodel.errors (a leaf imports nothing of the package)"
    ]


def test_an_import_cycle_fails(tmp_path):
    known, root = _package(
        tmp_path,
        {
            "inputs/a.py": "from costmodel.inputs import b\n",
            "inputs/b.py": "from costmodel.inputs import a\n",
        },
    )
    assert cycles(known, root) == [
        ["costmodel.inputs.a", "costmodel.inputs.b", "costmodel.inputs.a"]
    ]
