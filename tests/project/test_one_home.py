"""One home per fact (issue 33): a table of names or numbers, a distinctive number, or a named
value the model rests on is written in one module, and every other module imports it. The scan
reads the code of costmodel/ and benchmarks/ (their syntax trees, not their docstrings) and fails
on a fact written in two modules, naming both.

Three kinds of copy are found:

- a table: a tuple, list or set of three or more literals whose set of elements another module
  writes again (or writes as the keys of a dict of literals), or a dict literal with three or
  more literal keys that another module writes again, keys and values (a dict keyed by a
  table's names that maps each to something else, words or what code computes, holds facts of
  its own about each name: not a copy); and a scenario key's choices (`choices=` of two or
  more literals) that another module writes again, as names, data or the keys of a dict of
  formulas (the pipeline schedules are the keys of derive.step_time.BUBBLE_IDLE: the schema
  reads them, generated, as derive.numeric.SCHEDULES);
- a distinctive number: a literal that is not a unit factor, a small count or a tolerance
  (ALLOWED_NUMBERS, each said why) written in two modules;
- a named value: the same number bound to a name with the same last word in two modules (a
  constant, a field's or a parameter's default, a keyword argument, a dict entry: the
  memory model's `chunk = 64` beside the assumption `"linear_attention_chunk": 64`);
- a rule (`rules`): a link's bandwidth filled in, a GPU generation spelled, or the head-width
  rule (a width over the heads) written outside its home.

Generated modules (GENERATED) are copies by design, of a home that a test keeps them true to.
"""

from __future__ import annotations

import ast
import math
import re
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Written by a program from a home elsewhere (a test fails where one is stale).
GENERATED = {
    "costmodel/derive/numeric.py",  # `make numeric`, from the SymPy derivations
    "costmodel/inputs/course_scenario.py",  # `make numeric`, from inputs/scenarios/course.yaml
    "costmodel/evaluate/levers/router_table.py",  # `make numeric`, the router simulation's results
    "costmodel/inputs/fitted.py",  # `make calibrate`, the efficiencies fitted on published runs
}
#: Numbers that are not facts of the model: counts and small factors every formula writes,
#: unit factors (decimal and binary prefixes, seconds in a minute or an hour, percent) and the
#: float-rounding tolerance of a comparison. A power of two or ten is a unit or a size, never
#: by itself distinctive; a number below 16 is a count.
ALLOWED_NUMBERS = {
    0.5,  # a half: a midpoint, a mean of two
    0.25,  # a quarter
    1.5,  # one and a half: a half more
    1e-9,  # a float-rounding tolerance ("not float rounding at exactly 100%")
    1e-12,  # a float-rounding tolerance
    60,  # seconds in a minute
    60.0,
    3600,  # seconds in an hour
    3600.0,
    2**30,  # GiB (a unit; any power of two is one by `_is_round`, a named one too)
}
#: The same number written in two modules as two different facts (checked, each said why): a
#: third module writing it fails, and so does either module writing it once more elsewhere.
COINCIDENCES = {
    # plan.TIGHT_MEMORY (headroom named as a limit) and validate_memory.TOLERANCE (|measured /
    # predicted - 1| allowed per row of the memory check)
    (0.05, frozenset({"costmodel/evaluate/plan/plan.py", "costmodel/validate_memory.py"})),
    # the gridlines' alpha of the notebooks' figures (display's rcParams: SymPy and IPython
    # loaded) and of the sweep's SVG (NumPy alone: it cannot import display), and DeepSeek-V3's
    # MTP loss weight lambda in the FLOP check
    (
        0.3,
        frozenset(
            {
                "costmodel/present/display.py",
                "costmodel/present/sweep.py",
                "costmodel/validate/flop_models.py",
            }
        ),
    ),
    # transformers' q_lora_rank default for a DeepSeek config without one, and DeepSeek-V3's
    # own config.json that the Megatron memory benchmark writes (the default was taken from it)
    (
        1536,
        frozenset({"benchmarks/megatron_memory.py", "costmodel/inputs/families/deepseek.py"}),
    ),
}


def _is_round(value: float) -> bool:
    """A count below 16, or a power of two or of ten (a unit factor or a size): not a fact by
    itself."""
    if value == int(value) and abs(value) < 16:
        return True
    x = abs(value)
    if x == 0:
        return True
    for base in (2, 10):
        exponent = math.log(x, base)
        if abs(exponent - round(exponent)) < 1e-12:
            return True
    return False


def _is_count(value: float) -> bool:
    """A count below 16: a factor every formula writes."""
    return value == int(value) and abs(value) < 16


def distinctive(value: object) -> bool:
    """A number that names something by itself: a fraction or a measurement with decimals
    (0.803, 3.35), or a whole number of four digits or more that is not a power of two or ten
    nor a multiple of a thousand (28875). A whole number under a thousand (a width, a count, a
    size) is left to `named_values`: alone it says too little to be called a copy."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if value in ALLOWED_NUMBERS or not math.isfinite(value) or _is_round(value):
        return False
    if value == int(value):
        return abs(value) >= 1000 and value % 1000 != 0
    return True


def modules() -> dict[str, ast.Module]:
    """costmodel/**.py and benchmarks/*.py, parsed, by path (generated ones left out)."""
    paths = [
        *sorted((REPO / "costmodel").rglob("*.py")),
        *sorted((REPO / "benchmarks").glob("*.py")),
    ]
    out = {}
    for path in paths:
        rel = path.relative_to(REPO).as_posix()
        if rel not in GENERATED:
            out[rel] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants (text, not code)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                out.add(id(body[0].value))
    return out


def _literal(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Constant)
        and node.value is not None
        and not isinstance(node.value, bool)
    )


def _value(node: ast.AST) -> object:
    """A number written as a literal, a negated one, or a product of literals (`128 * 2**20`);
    else None."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Pow | ast.Div):
            left, right = _value(node.left), _value(node.right)
            if isinstance(left, int | float) and isinstance(right, int | float):
                try:
                    return eval(compile(ast.Expression(node), "<n>", "eval"), {})  # noqa: S307
                except (ArithmeticError, ValueError):
                    return None
        return None
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _words(node: ast.AST) -> bool:
    """Text (a string, an f-string, text joined or None): a dict of these says something of
    each name, it does not copy the names' table."""
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, str)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _words(node.left) and _words(node.right)
    return isinstance(node, ast.JoinedStr)


def _data(node: ast.AST) -> bool:
    """A literal, or a tuple, list or set of literals: a dict of these is a table of data; one
    whose values are computed (a formula per name, a result keyed by its parts) is code."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return all(map(_data, node.elts))
    return _value(node) is not None or _literal(node)


def tables(tree: ast.Module) -> list[tuple[frozenset, str, int, str | None]]:
    """(elements, kind, line, the dict's values dumped or None) of each table of the module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "choices":
            elts = getattr(node.value, "elts", [])
            if len(elts) >= 2 and all(_literal(e) for e in elts):
                out.append((frozenset(e.value for e in elts), "choices", node.value.lineno, None))
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) >= 3:
            if all(_literal(e) for e in node.elts):
                out.append((frozenset(e.value for e in node.elts), "seq", node.lineno, None))
        elif isinstance(node, ast.Dict) and len(node.keys) >= 3:
            if all(k is not None and _literal(k) for k in node.keys):
                keys = frozenset(k.value for k in node.keys)
                values = repr(
                    sorted((repr(k.value), ast.dump(v)) for k, v in zip(node.keys, node.values))
                )
                kind = "words" if all(map(_words, node.values)) else "dict"
                kind = kind if kind == "words" or all(map(_data, node.values)) else "code"
                out.append((keys, kind, node.lineno, values))
    return out


def numbers(tree: ast.Module) -> list[tuple[object, int]]:
    """(value, line) of each distinctive number literal (docstrings left out)."""
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs and distinctive(node.value):
            out.append((node.value, node.lineno))
    return out


def _last_word(name: str) -> str:
    return re.split(r"_+", name.strip("_").lower())[-1]


def named_values(tree: ast.Module) -> list[tuple[str, object, int]]:
    """(last word of the name, number, line) of each number a definition binds to a name: a
    module's constant, a class's field default, a parameter's default, and a registry's entry
    (`"name": Record(number, ...)`, as `Assumption(64, ...)`). A keyword argument of a call or
    an entry of a configuration dict is a use, not a definition."""
    out = []

    def add(name: str, node: ast.AST | None) -> None:
        value = None if node is None else _value(node)
        if value is not None and value not in ALLOWED_NUMBERS and not _is_count(value):
            out.append((_last_word(name), value, node.lineno))

    def bind(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        add(target.id, node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                add(node.target.id, node.value)

    bind(tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bind(node.body)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                named = isinstance(key, ast.Constant) and isinstance(key.value, str)
                if named and isinstance(value, ast.Call) and value.args:
                    add(key.value, value.args[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(
                positional[len(positional) - len(args.defaults) :], args.defaults
            ):
                add(arg.arg, default)
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                add(arg.arg, default)
    return out


def _copy(one: tuple, other: tuple) -> bool:
    """Whether two tables with the same elements are one written twice: two sequences; a
    sequence and the keys of a dict of data (literals); two dicts with the same values. A dict
    that maps each name to words, or to what code computes, holds facts of its own."""
    kinds = {one[1], other[1]}
    if "choices" in kinds:  # a key's choices written again: as names, data or formulas' keys
        return "words" not in kinds
    if kinds == {"seq"}:
        return True
    if len(kinds) == 1:
        return one[3] == other[3]
    return kinds == {"seq", "dict"}


def _several(places) -> bool:
    """Places in two modules or more, one of them in costmodel/ (benchmarks/ is scanned for
    copies of the package's facts: two benchmark scripts that mirror one outside tool, as
    Megatron-LM's defaults, are independent scripts)."""
    paths = {p[0] for p in places}
    return len(paths) >= 2 and any(p.startswith("costmodel/") for p in paths)


def copies() -> list[str]:
    """Every fact written in more than one module, one line each: what, then where."""
    parsed = modules()
    found: list[str] = []
    by_set: dict[frozenset, list[tuple[str, str, int, str | None]]] = defaultdict(list)
    by_number: dict[object, list[tuple[str, int]]] = defaultdict(list)
    by_name: dict[tuple[str, object], list[tuple[str, int]]] = defaultdict(list)
    for path, tree in parsed.items():
        for elements, kind, line, values in tables(tree):
            by_set[elements].append((path, kind, line, values))
        for value, line in numbers(tree):
            by_number[value].append((path, line))
        for word, value, line in named_values(tree):
            by_name[(word, value)].append((path, line))
    for elements, places in by_set.items():
        if not _several(places):
            continue
        kept = []
        for place in places:
            others = [q for q in places if q[0] != place[0]]
            if any(_copy(place, q) for q in others):
                kept.append(place)
        if _several(kept):
            where = ", ".join(sorted({f"{p[0]}:{p[2]}" for p in kept}))
            found.append(f"table {sorted(map(str, elements))}: {where}")
    for value, places in by_number.items():
        if _several(places) and (value, frozenset(p[0] for p in places)) not in COINCIDENCES:
            where = ", ".join(sorted({f"{p[0]}:{p[1]}" for p in places}))
            found.append(f"number {value!r}: {where}")
    for (word, value), places in by_name.items():
        if _several(places) and not distinctive(value):
            where = ", ".join(sorted({f"{p[0]}:{p[1]}" for p in places}))
            found.append(f"named {word} = {value!r}: {where}")
    return sorted(found)


#: The head-width rule (derive.plain.head_width): a width over the query heads.
WIDTH_NAMES = {"hidden", "hidden_size", "width", "attention_dim"}
HEADS_NAMES = {"heads", "num_heads", "num_attention_heads"}
HEAD_WIDTH_HOME = "costmodel/derive/plain.py"


def _name(node: ast.AST) -> str:
    """The last name of `x` or `a.b.x`, else ''."""
    return getattr(node, "id", None) or getattr(node, "attr", "")


def head_widths(path: str, tree: ast.Module) -> list[str]:
    """Each `width / heads` or `hidden // heads` of `tree` (outside the rule's home)."""
    if path == HEAD_WIDTH_HOME:
        return []
    return [
        f"head width rule: {path}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Div | ast.FloorDiv)
        and _name(node.left) in WIDTH_NAMES
        and _name(node.right) in HEADS_NAMES
    ]


def rules() -> list[str]:
    """The facts that are rules rather than literals, each written outside its home: a link's
    bandwidth filled in from the GPU table (`x or gpu.network_bandwidth`: hardware.
    link_bandwidths), a GPU's generation spelled outside the GPU table and the efficiencies
    (hardware's GPU.generation; the efficiencies and the attention kernels' curves), and a head's width worked out as a width over the heads
    (derive.plain.head_width)."""
    homes = {
        "costmodel/inputs/hardware.py",
        "costmodel/inputs/efficiency.py",
        "costmodel/inputs/attention_kernels.py",
    }
    found = []
    for path, tree in modules().items():
        found += head_widths(path, tree)
        if path in homes:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
                for value in node.values:
                    target = value.func if isinstance(value, ast.Call) else value
                    if getattr(target, "attr", "") in ("network_bandwidth", "intra_node_bandwidth"):
                        found.append(f"link filled in: {path}:{node.lineno}")
            if isinstance(node, ast.Constant) and node.value in ("ampere", "hopper", "blackwell"):
                found.append(f"GPU generation {node.value!r}: {path}:{node.lineno}")
    return sorted(set(found))


def test_each_fact_has_one_home():
    found = copies() + rules()
    assert not found, "facts in more than one place:\n" + "\n".join(found)


def test_a_key_s_choices_written_again_as_a_dict_s_keys_are_a_copy():
    """The pipeline schedules as a field's choices and as the keys of the bubble's formulas
    (issue 33: fields.py and derive/step_time.py each wrote the four names)."""
    fields = ast.parse('F = Field("choice", "x", choices=("1f1b", "interleaved", "dualpipe"))')
    formulas = ast.parse('IDLE = {"1f1b": p - 1, "interleaved": (p - 1) / v, "dualpipe": p}')
    one = next(table for table in tables(fields) if table[1] == "choices")
    (other,) = tables(formulas)
    assert other[1] == "code" and one[0] == other[0] and _copy(one, other)


def test_the_head_width_rule_outside_its_home_is_found():
    """`hidden // heads` (the families' default), `x.hidden // x.heads` (the memory model's) and
    `width / heads` (the shape from keys) were three forms of one rule (issue 33)."""
    tree = ast.parse("a = hidden // num_heads\nb = x.hidden // x.heads\nc = width / heads\n")
    assert len(head_widths("costmodel/inputs/x.py", tree)) == 3
    assert head_widths(HEAD_WIDTH_HOME, tree) == []
    kv = ast.parse("kv_width = width * kv_heads / heads\n")  # kv heads' share: not the rule
    assert head_widths("costmodel/inputs/x.py", kv) == []


if __name__ == "__main__":
    for line in copies() + rules():
        print(line)
