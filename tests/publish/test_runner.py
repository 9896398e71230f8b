"""The handouts' notebook runner: one kernel per worker, reused from notebook to notebook, each
notebook seeing a kernel that looks new; parameters injected as papermill injects them."""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_text import python_notebook

from costmodel.publish import runner, suite


def _notebook(*sources: str, parameters: str | None = None):
    nb = python_notebook()
    if parameters is not None:
        cell = nbformat.v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    return nb


def _write(folder, stem: str, nb) -> None:
    nbformat.write(nb, folder / f"{stem}.ipynb")


def _text(cell) -> str:
    return "".join(
        output.get("text", "") or output.get("data", {}).get("text/plain", "")
        for output in cell.outputs
    )


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One kernel for this module's tests, as a worker reuses one: each test's first notebook
    sees a kernel that ran the previous test's notebooks (or that one replaced after it died)."""
    suite.inline_figures()
    k = runner.Kernel(tmp_path_factory.mktemp("kernel"))
    yield k
    k.shutdown()


def test_each_notebook_sees_a_new_kernel(tmp_path, kernel):
    """The second notebook in the same kernel: the first one's names are gone, its cells are
    numbered from 1, matplotlib's settings are back and no figure is left open; the kernel is
    the same process (no second start)."""
    first = _notebook(
        "import os, matplotlib, matplotlib.pyplot as plt\nsecret = 42\n",
        "matplotlib.rcParams['lines.linewidth'] = 9.0\nfig = plt.figure()\n",
        "print(os.getpid())",
    )
    second = _notebook(
        "print('secret' in globals(), 'plt' in globals())",
        "import os, matplotlib, matplotlib.pyplot as plt\n"
        "print(matplotlib.rcParams['lines.linewidth'], len(plt.get_fignums()), os.getpid())",
    )
    _write(tmp_path, "a", first)
    _write(tmp_path, "b", second)
    ran_a, error = runner.run_notebook("a", {}, kernel, tmp_path)
    assert error is None
    ran_b, error = runner.run_notebook("b", {}, kernel, tmp_path)
    assert error is None
    counts = [c.execution_count for c in ran_b.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))  # the injected cell is 1
    assert _text(ran_b.cells[-2]).strip() == "False False"
    width, figures, pid = _text(ran_b.cells[-1]).split()
    assert float(width) == 1.5 and figures == "0"  # matplotlib's default line width
    assert pid == _text(ran_a.cells[-1]).strip()  # one kernel for both
    assert kernel.seconds["kernel"] < kernel.seconds["execute"] + 5


def test_a_failing_cell_is_named_and_the_next_notebook_runs(tmp_path, kernel):
    _write(tmp_path, "bad", _notebook("x = 1", "y = x / 0  # boom"))
    _write(tmp_path, "good", _notebook("print('fine')"))
    nb, error = runner.run_notebook("bad", {}, kernel, tmp_path)
    assert nb is None
    assert error.startswith("bad: cell 3 raised ZeroDivisionError: division by zero")
    assert error.endswith("at `y = x / 0  # boom`")
    nb, error = runner.run_notebook("good", {}, kernel, tmp_path)
    assert error is None and _text(nb.cells[-1]).strip() == "fine"


def test_the_tests_kernels_keep_their_history_in_memory(tmp_path, kernel):
    """tests/conftest.py gives the test run an IPython folder of its own: a kernel the tests
    start keeps its history in memory, not in the user's ~/.ipython/.../history.sqlite."""
    shell = "get_ipython().history_manager.hist_file, get_ipython().profile_dir.location"
    _write(tmp_path, "h", _notebook(f"print(*({shell}), sep=chr(10))"))
    nb, error = runner.run_notebook("h", {}, kernel, tmp_path)
    assert error is None
    hist_file, profile = _text(nb.cells[-1]).splitlines()
    assert hist_file == ":memory:"
    assert Path(profile).parent == Path(os.environ["IPYTHONDIR"]) != Path.home() / ".ipython"


def test_a_dead_kernel_is_replaced(tmp_path, kernel):
    _write(tmp_path, "dies", _notebook("import os\nprint(os.getpid())", "os._exit(1)"))
    _write(tmp_path, "after", _notebook("import os\nprint(os.getpid())"))
    nb, error = runner.run_notebook("dies", {}, kernel, tmp_path)
    assert nb is None and error.startswith("dies: ")
    nb, error = runner.run_notebook("after", {}, kernel, tmp_path)
    assert error is None
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code"]
    assert counts == [1, 2]


def test_parameters_are_injected_after_the_parameters_cell(tmp_path, kernel):
    inputs = {
        "name": "Team 'A' \"quoted\"",
        "step_time": 90,
        "peak_flops": 1.48e14,
        "packed": True,
        "model": None,
        "nested": {"a": [1, 2.5, "x"]},
    }
    nb = _notebook("print(repr(overrides))", parameters="scenario_file = None\noverrides = {}\n")
    _write(tmp_path, "p", nb)
    ran, error = runner.run_notebook("p", inputs, kernel, tmp_path)
    assert error is None
    tags = [c.metadata.get("tags", []) for c in ran.cells]
    assert tags[:2] == [["parameters"], ["injected-parameters"]]
    assert ast.literal_eval(_text(ran.cells[-1]).strip()) == inputs


def test_literal_round_trips_what_yaml_gives():
    values = [None, True, False, 0, -3, 2.5, 1e-300, "a'b\"c\n", [1, [2]], {"k": {"v": 1.0}}]
    for value in values:
        assert ast.literal_eval(runner.literal(value)) == value
    for special in (math.inf, -math.inf):
        assert eval(runner.literal(special)) == special  # noqa: S307 (our own text)
    assert math.isnan(eval(runner.literal(math.nan)))  # noqa: S307
    nb = _notebook("x = 1")
    runner.inject_parameters(nb, {"overrides": {}})
    runner.inject_parameters(nb, {"overrides": {"step_time": 1}})  # replaces, not adds
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and nb.cells[0] is injected[0]  # no parameters cell: on top
    assert injected[0].source == "# Parameters\noverrides = {'step_time': 1}\n"


def test_skipping_iri_checks_keeps_notebook_validation():
    """A worker does not import rfc3987_syntax (seconds of Earley parsers at import), and
    nbformat still validates a notebook and still refuses a broken one."""
    code = (
        "import sys\n"
        "from costmodel.publish import runner\n"
        "runner.skip_iri_format_checks()\n"
        "import nbformat\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('1')])\n"
        "nbformat.validate(nb)\n"
        "nb.cells[0]['outputs'] = 'not a list'\n"
        "try:\n"
        "    nbformat.validate(nb)\n"
        "except nbformat.ValidationError:\n"
        "    print('refused')\n"
        "print('rfc3987_syntax' in sys.modules and sys.modules['rfc3987_syntax'] is not None)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["refused", "False"]


def _shown(nb) -> list[list[str]]:
    """What each code cell (but an injected one) printed or displayed, images left out."""
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            continue
        shown = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                shown.append(output["text"])
            for kind in ("text/plain", "text/html", "text/markdown", "text/latex"):
                if kind in output.get("data", {}):
                    shown.append(output["data"][kind])
        cells.append(shown)
    return cells


def test_course_notebooks_in_one_kernel_match_the_stored_outputs(notebook_kernel):
    """Two course notebooks, the second after the first in the same kernel (the session's, in
    the notebooks' folder, as a worker runs them; it may have run others before), print what the
    stored notebooks (each run in a fresh kernel and checked by nbval) hold."""
    for stem in ("05_attention_term", "01_mfu_hfu"):
        ran, error = runner.run_notebook(stem, {}, notebook_kernel, suite.NOTEBOOKS)
        assert error is None
        stored = nbformat.read(suite.NOTEBOOKS / f"{stem}.ipynb", as_version=4)
        suite.clean(ran)
        assert _shown(ran) == _shown(stored), stem
