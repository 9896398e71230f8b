"""Every time limit in the tests goes through tests/hang.py's hang_limit (a hang detector, at least
ten times the step's idle time), never a bare number: a bound written as a number was tuned to an
idle machine, and failed `make test` on a busy one (issue 32: the lab's 20 s after SIGINT, a
refused build's 20 s). Elapsed time is compared with nothing else either, and Hypothesis keeps no
per-example deadline."""

import ast
from pathlib import Path

from hang import HANG_FACTOR, MIN_LIMIT, hang_limit
from hypothesis import settings

TESTS = Path(__file__).resolve().parents[1]
#: Clocks whose readings a test may subtract or add to.
CLOCKS = {"monotonic", "perf_counter", "time"}
#: The functions a limit is written with.
LIMITS = {"hang_limit", "hang_limit_ms"}
#: Keywords that bound a wait: subprocess, psutil, urllib, Popen.wait (seconds), Playwright (ms).
LIMIT_KEYWORDS = {"timeout"}


def _is_clock_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in CLOCKS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
    )


def _has_number(node: ast.AST) -> bool:
    """A numeric literal anywhere in `node` that is not an argument of hang_limit."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in LIMITS:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return not isinstance(node.value, bool)
    return any(_has_number(child) for child in ast.iter_child_nodes(node))


def _elapsed(node: ast.AST) -> bool:
    """`clock() - x` or `x - clock()` or a name read from one (elapsed, start, sent)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return _is_clock_call(node.left) or _is_clock_call(node.right)
    return isinstance(node, ast.Name) and node.id == "elapsed"


def findings(source: str, name: str = "<test>") -> list[str]:
    """`file:line what` for each time limit in `source` written as a bare number."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.keyword) and node.arg in LIMIT_KEYWORDS:
            if _has_number(node.value):
                found.append(f"{name}:{node.value.lineno} timeout= a bare number")
        elif isinstance(node, ast.arguments):  # def run(..., timeout=120)
            named = [*node.args[len(node.args) - len(node.defaults) :], *node.kwonlyargs]
            defaults = [*node.defaults, *node.kw_defaults]
            for arg, default in zip(named, defaults):
                if arg.arg in LIMIT_KEYWORDS and default is not None and _has_number(default):
                    found.append(f"{name}:{default.lineno} timeout= a bare number")
        elif isinstance(node, ast.keyword) and node.arg == "deadline":
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                found.append(f"{name}:{node.value.lineno} a Hypothesis deadline")
        elif isinstance(node, ast.Compare) and (
            _elapsed(node.left) or any(_elapsed(c) for c in node.comparators)
        ):
            if _has_number(node):
                found.append(f"{name}:{node.lineno} elapsed time compared with a number")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if (_is_clock_call(node.left) and _has_number(node.right)) or (
                _is_clock_call(node.right) and _has_number(node.left)
            ):
                found.append(f"{name}:{node.lineno} a deadline of a bare number of seconds")
    return found


def test_no_time_limit_in_the_tests_is_a_bare_number():
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += findings(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS)))
    assert found == [], "\n".join(found)


def test_the_check_finds_each_form_of_a_bare_limit():
    """Each form the suite used before issue 32 is found; the same waits through hang_limit are
    not."""
    bare = (
        "subprocess.run(args, timeout=20)\n"
        "proc.wait(timeout=20)\n"
        "page.wait_for_selector('x', timeout=60_000)\n"
        "deadline = time.monotonic() + 90\n"
        "assert time.perf_counter() - start < 20\n"
        "assert elapsed < 10\n"
        "settings(max_examples=5)(deadline=200)\n"
        "def run(*args, cwd, timeout=120): pass\n"
    )
    assert len(findings(bare)) == 8, findings(bare)
    through = (
        "subprocess.run(args, timeout=hang_limit(2))\n"
        "page.wait_for_selector('x', timeout=hang_limit_ms(6))\n"
        "deadline = time.monotonic() + hang_limit(9)\n"
        "assert time.perf_counter() - start < hang_limit(0.05)\n"
        "settings(max_examples=5, deadline=None)\n"
        "def run(*args, cwd, timeout=hang_limit(12)): pass\n"
    )
    assert findings(through) == []


def test_hypothesis_keeps_no_deadline_unless_a_test_sets_one():
    """tests/conftest.py loads a profile without Hypothesis's per-example deadline (200 ms by
    default: a draw that resolves scenarios took longer on a busy machine)."""
    assert settings.default.deadline is None


def test_a_limit_is_ten_times_the_idle_step_and_a_minute_at_least():
    assert HANG_FACTOR == 10 and hang_limit(0.5) == MIN_LIMIT == 60
    assert hang_limit(30) == 300
