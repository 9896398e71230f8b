"""Run notebooks one after the other in one kernel, each as if the kernel were new.

Starting a kernel and importing SymPy, matplotlib and costmodel in it costs a worker about 1.7 s
a notebook, and a fresh kernel derives again every SymPy form the previous notebook had already
derived (costmodel derives them on first use and keeps them). A `Kernel` is started once per
worker; before each notebook after the first it is put back to how a new kernel looks to a
notebook:

- the user namespace is emptied and IPython's execution count starts again at 1
  (`InteractiveShell.reset(new_session=True)`, run without storing history), so cells are
  numbered as in a fresh kernel;
- every matplotlib figure is closed and matplotlib's settings are those the kernel started with.

What stays is what a notebook cannot tell apart from a fresh import: the modules already
imported and what they cache. A kernel that dies is replaced for the next notebook.

The parameters go into a cell tagged `injected-parameters` after the cell tagged `parameters`,
as papermill injects them (papermill itself is not imported: half a second of a worker's start),
and the cells run with nbclient.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

from costmodel.publish import suite

ANSI = re.compile(r"\x1b\[[0-9;]*m")

#: Run once in a new kernel, before the first notebook: the imports every notebook makes (done
#: while the build still checks the scenario; a notebook's own imports then find them loaded),
#: plots drawn as SVG (sharp in print; text as paths, so no font of a plot reaches the PDF; ids
#: and no date from a fixed salt, so two builds give the same bytes; the stored notebooks keep
#: PNG, which nbval does not compare), and matplotlib's settings as the kernel starts with them
#: (the inline backend's included), kept where a namespace reset does not reach. Nothing is
#: left in the user namespace.
SETUP = """\
import matplotlib, matplotlib.pyplot, numpy, sympy
from matplotlib_inline.backend_inline import set_matplotlib_formats
import costmodel.course, costmodel.evaluate.account.account, costmodel.present.display
matplotlib.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "costmodel"})
set_matplotlib_formats("svg", metadata={"Date": None})
get_ipython()._costmodel_rc = matplotlib.rcParams.copy()
del matplotlib, numpy, sympy, costmodel, set_matplotlib_formats
__import__("gc").freeze()
"""

#: Run between two notebooks, without storing history (the count stays at 1 afterwards). The
#: objects that outlive a notebook (the modules, what they cache) are moved out of the garbage
#: collector's reach (`gc.freeze`) once the reset has collected the notebook's garbage: the
#: reset's full collection then scans what the last notebook made, not everything every notebook
#: before it left cached (a quarter second a notebook, a twelfth of its run).
RESET = """\
import warnings as _w, matplotlib as _m, matplotlib.pyplot as _p
_p.close("all")
with _w.catch_warnings():
    _w.simplefilter("ignore")
    _m.rcParams.update(get_ipython()._costmodel_rc)
get_ipython().reset(new_session=True)
__import__("gc").freeze()
"""


def skip_iri_format_checks() -> None:
    """Call before nbformat is imported. jsonschema, which nbformat imports, imports
    `rfc3987_syntax` where it is installed (JupyterLab's dependencies bring it) for two format
    checks, `iri` and `iri-reference`; that module builds some 35 Earley parsers as it is
    imported, 2.4 s of a worker's start on a 2-core machine (jsonschema issue #1428). The
    notebook schema uses neither format: with the import made to fail, jsonschema leaves those
    two checks out, in this process only."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # `import rfc3987_syntax` -> ImportError


def literal(value: Any) -> str:
    """`value` (what YAML gives: None, booleans, numbers, strings, lists, mappings) as Python
    source that evaluates to it; anything else as its text."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"float({str(value)!r})"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(str(value))


def inject_parameters(nb, parameters: dict[str, Any]) -> None:
    """Put `parameters` into `nb` as papermill does: a code cell tagged `injected-parameters`
    right after the first cell tagged `parameters` (replacing an injected cell already there; at
    the top if there is no parameters cell), whose assignments override the defaults."""
    import nbformat

    source = "# Parameters\n" + "".join(f"{k} = {literal(v)}\n" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = ["injected-parameters"]
    tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
    injected = [i for i, t in enumerate(tags) if "injected-parameters" in t]
    defaults = [i for i, t in enumerate(tags) if "parameters" in t]
    if injected:
        nb.cells[injected[0]] = cell
    else:
        nb.cells.insert(defaults[0] + 1 if defaults else 0, cell)


def failing_line(traceback: list[str]) -> str:
    """The source line a traceback marks with an arrow (the innermost one), without colours."""
    lines = [ANSI.sub("", line) for chunk in traceback for line in chunk.splitlines()]
    marked = [line for line in lines if line.lstrip().startswith("---->")]
    if marked:
        return re.sub(r"^\s*---->\s*\d*\s*", "", marked[-1]).strip()
    return ""


class Kernel:
    """One ipykernel, reused for the notebooks `run_notebook` runs in it, in the notebooks'
    folder: `launch` starts it without waiting, `ready` waits for it (or resets it after a
    notebook, or replaces it if it died), `execute` runs a notebook, `shutdown` stops it."""

    def __init__(self, cwd: str | Path, startup_timeout: int = 60):
        self.cwd = str(cwd)
        self.startup_timeout = startup_timeout
        self.km = None
        self.kc = None
        self.notebooks = 0  # run in the current kernel
        self.seconds: dict[
            str, float
        ] = {}  # the last notebook's: getting the kernel ready, running

    def launch(self) -> None:
        """Start the kernel's process and return without waiting for it (`ready` waits): the
        caller can do its own start-up work meanwhile."""
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        if self.km is not None:
            return
        self.km = AsyncKernelManager(kernel_name="python3")
        run_sync(self.km.start_kernel)(extra_arguments=list(suite.KERNEL_ARGS), cwd=self.cwd)
        self.notebooks = 0

    def _connect(self) -> None:
        from jupyter_core.utils import run_sync

        self.kc = self.km.client()
        self.kc.start_channels()
        run_sync(self.kc.wait_for_ready)(timeout=self.startup_timeout)
        self.kc.allow_stdin = False
        self._run(SETUP)

    def _run(self, code: str) -> None:
        from jupyter_core.utils import run_sync

        reply = run_sync(self.kc.execute_interactive)(
            code, store_history=False, timeout=60, output_hook=lambda msg: None
        )
        if reply["content"]["status"] != "ok":
            raise RuntimeError(
                f"kernel set-up failed: {reply['content'].get('ename')}: "
                f"{reply['content'].get('evalue')}"
            )

    def alive(self) -> bool:
        from jupyter_core.utils import run_sync

        return self.km is not None and bool(run_sync(self.km.is_alive)())

    def ready(self) -> None:
        """A kernel that looks new to the next notebook: started, or reset if it ran one."""
        if self.km is not None and self.kc is None and self.alive():  # launched, not connected
            self._connect()
        elif not self.alive():
            self.shutdown()
            self.launch()
            self._connect()
        elif self.notebooks:
            self._run(RESET)

    def execute(self, nb) -> None:
        """Run every cell of `nb` in place; nbclient's errors propagate (CellExecutionError at
        the first failing cell, DeadKernelError, ...)."""
        import time

        from costmodel.publish.markdown_cells import Client

        start = time.perf_counter()
        self.ready()
        self.seconds = {"kernel": time.perf_counter() - start}
        start = time.perf_counter()
        client = Client(
            nb,
            km=self.km,
            kernel_name="python3",
            record_timing=False,
            resources={"metadata": {"path": self.cwd}},
        )
        client.kc = self.kc
        self.notebooks += 1
        try:
            client.execute()
        finally:
            self.seconds["execute"] = time.perf_counter() - start

    def shutdown(self) -> None:
        from jupyter_core.utils import run_sync

        if self.kc is not None:
            try:
                self.kc.stop_channels()
            except Exception:
                pass
            self.kc = None
        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)
            except Exception:
                pass
            self.km = None


def _first_error(nb) -> tuple[int | None, dict | None]:
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return cell.get("execution_count"), output
    return None, None


def run_notebook(
    stem: str, inputs: dict[str, Any], kernel: Kernel, notebooks: str | Path | None = None
):
    """Execute notebooks/<stem>.ipynb in `kernel` with the team's inputs as the `overrides`
    parameter (the page then shows what it was run with). Returns (executed notebook, None) or
    (None, one line naming the notebook, the cell, the error and the failing line)."""
    import nbformat
    from nbclient.exceptions import CellExecutionError

    folder = Path(notebooks or suite.NOTEBOOKS)
    try:
        nb = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
        inject_parameters(nb, {"scenario_file": None, "overrides": inputs})
        kernel.execute(nb)
    except CellExecutionError as error:
        count, output = _first_error(nb)
        line = failing_line(output.get("traceback", [])) if output else ""
        where = f" at `{line}`" if line else ""
        evalue = ANSI.sub("", str(error.evalue or "")).splitlines()
        if output is None:  # a Markdown cell's template: its evalue names the cell
            return None, f"{stem}: {error.ename}: {evalue[0] if evalue else ''}"
        return None, (
            f"{stem}: cell {count} raised {error.ename}: {evalue[0] if evalue else ''}{where}"
        )
    except Exception as error:  # the kernel died, a timeout, an unreadable notebook
        text = str(error).splitlines()
        return None, f"{stem}: {type(error).__name__}: {text[0] if text else ''}"
    return nb, None
