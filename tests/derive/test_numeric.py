"""The one numeric path: costmodel/derive/numeric.py is generated from the SymPy derivations
(the registry costmodel.derive.numeric_forms, printed by costmodel.generate.numeric), agrees with
them, and the commands never import SymPy."""

import random
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
from generated import check_written_only_over_its_own_file
from hang import hang_limit

from costmodel.derive import numeric, numeric_forms
from costmodel.generate import numeric as generate

NAMES = generate.symbol_names()
XREPLACE = numeric_forms.leaves(numeric_forms.xreplace_tables())
SUBS = numeric_forms.leaves(numeric_forms.subs_tables())


def test_generated_module_is_current():
    """Regenerating the source gives the committed file, byte for byte (else: make numeric).
    In a fresh process, as `make numeric` runs: SymPy prints a sum's terms in an order that can
    follow what earlier tests left in its caches (one load run printed `F_lin + ...` first)."""
    written = Path(numeric.__file__).read_bytes()
    code = (
        "import sys; from costmodel.generate import numeric as g; "
        "sys.stdout.buffer.write(g.source().encode('utf-8'))"
    )
    fresh = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        timeout=hang_limit(4),
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    assert fresh == written, "costmodel/derive/numeric.py is stale: run `make numeric`"


def _points(expr, rng, exact):
    """Values for the symbols of `expr`: whole numbers (exact) or floats, all positive."""
    for _ in range(3):
        if exact:
            yield {s: rng.randint(1, 64) for s in expr.free_symbols}
        else:
            yield {s: rng.uniform(1.0, 1e4) for s in expr.free_symbols}


def _generated(path, point):
    """The generated form at `path` (its table's name, then its keys) evaluated at `point`."""
    form = vars(numeric)[path[0]]
    for key in path[1:]:
        form = form[key]
    return form({NAMES[s]: value for s, value in point.items()})


@pytest.mark.parametrize("path", list(XREPLACE), ids=map(repr, XREPLACE))
def test_xreplace_forms_are_sympys_numbers(path):
    """Each form equals SymPy's xreplace at random points: bit for bit with floats (SymPy's
    Floats), exactly with whole numbers."""
    expr, name = XREPLACE[path], repr(path)
    rng = random.Random(name)
    for exact in (False, True):
        for point in _points(expr, rng, exact):
            numbers = {s: (sp.Integer(v) if exact else sp.Float(v)) for s, v in point.items()}
            want = expr.xreplace(numbers)
            got = _generated(path, point)
            if exact:
                assert sp.Rational(got) == want, (name, point)
            else:
                assert float(got) == float(want), (name, point)
            assert float(got) == pytest.approx(float(expr.evalf(subs=numbers)), rel=1e-12)


@pytest.mark.parametrize("path", list(SUBS), ids=map(repr, SUBS))
def test_subs_forms_are_sympys_numbers(path):
    expr = SUBS[path]
    rng = random.Random(repr(path))
    for exact in (False, True):
        for point in _points(expr, rng, exact):
            want = expr.subs(point)
            got = _generated(path, point)
            assert (sp.Rational(got) if exact else float(got)) == (
                want if exact else float(want)
            ), (path, point)


def test_account_figures_are_the_expressions():
    """The account's generated figures agree with their expressions (rel 1e-12)."""
    exprs = numeric_forms.ACCOUNT_EXPRESSIONS
    assert numeric.ACCOUNT_FIGURES == tuple(exprs)
    rng = random.Random(21)
    symbols = {NAMES[s]: s for e in exprs.values() for s in e.free_symbols}
    for _ in range(5):
        point = {name: rng.uniform(0.5, 100.0) for name in numeric.ACCOUNT_ARGS}
        got = numeric.account_figures(*(point[name] for name in numeric.ACCOUNT_ARGS))
        subs = {symbols[name]: value for name, value in point.items()}
        for key, value in zip(exprs, got):
            want = float(exprs[key].evalf(subs=subs))
            assert float(value) == pytest.approx(want, rel=1e-12), key


#: A fresh interpreter runs one command and says which heavy modules it imported.
PROBE = """
import contextlib, io, sys
from costmodel import cli
with contextlib.redirect_stdout(io.StringIO()):
    code = {call}
assert code in (0, None), code
print(sorted(m for m in ("numpy", "sympy", "yaml") if m in sys.modules))
"""

COMMANDS = {
    "report": "cli.main(['report'])",
    "report-dense": "cli.main(['report', '--scenario', 'scenarios/llama-3.1-70b-512xH100.yaml'])",
    "gemms": "cli.main(['gemms'])",
    "params": "cli.main(['params', 'qwen3.6-35b-a3b'])",
    "predict": "__import__('costmodel.evaluate.simulate.step_time', fromlist=['x']).predict("
    "__import__('costmodel.inputs.scenario', fromlist=['x']).resolve()) and 0",
}


#: What each command may import of the three: neither NumPy nor SymPy (the MoE report's router
#: simulation comes from its generated table, costmodel/evaluate/levers/router_table.py); PyYAML only to
#: read a scenario file (the course's values are generated: costmodel/inputs/course_scenario.py).
ALLOWED = {
    "report": "[]",
    "report-dense": "['yaml']",
    "gemms": "[]",
    "params": "[]",
    "predict": "[]",
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_commands_do_not_import_sympy(command):
    """`costmodel report`, `gemms`, `params` and the step-time model's predict() of the course
    scenario run without SymPy (a cold report paid half a second for it) and without NumPy
    (a tenth of a second: the course's MoE report took its router simulation from NumPy); the
    course's scenario without PyYAML (a sixth of the rest)."""
    probe = PROBE.format(call=COMMANDS[command])
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=hang_limit(12),
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip().splitlines()[-1] == ALLOWED[command], out.stdout


def test_make_numeric_writes_only_its_own_file(tmp_path):
    """`make numeric` writes the generated module, says when nothing changed, and refuses to
    overwrite a file it did not write (the file stays as it was)."""
    check_written_only_over_its_own_file(generate.write, tmp_path / "numeric.py", generate.source())
