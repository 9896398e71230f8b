"""Handouts: the notebook suite re-executed for a scenario and exported to offline HTML.

    scenario (validated first) -> papermill runs every notebook in parallel (its parameters
    cell gets the scenario) -> nbconvert exports each to one self-contained HTML page (images
    embedded, MathJax 3 inlined, no remote resource) -> index.html with the scenario's inputs,
    its headline numbers and a link to each section.

The stored notebooks in notebooks/ are only read. The output folder is guarded and swapped
atomically:

- `check_output` refuses, before any work, a folder that costmodel did not write (no
  `.costmodel-handouts` marker and not empty), a path that is not a folder, the working
  directory or a folder that contains it, the project's own sources, and a parent that cannot
  be written;
- pages are built in a hidden sibling folder that replaces DIR in one atomic exchange
  (renameat2 RENAME_EXCHANGE; where the file system lacks it, two renames with the signals
  blocked in between, and a folder left aside by a crash is put back by the next build);
- a section whose notebook fails keeps its page from the previous build, marked stale;
- each notebook runs in a worker process of its own session, with its own temporary folder (the
  kernel's connection file lives there): Ctrl-C or SIGTERM stops every worker and kernel,
  removes the temporary folders and ends the build with exit status 130 or 143.
"""

from __future__ import annotations

import ctypes
import errno
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.evaluate.account import account as evaluate_account
from costmodel.formats import table_value
from costmodel.inputs import scenario
from costmodel.present import suite

TEMPLATE_DIR = Path(__file__).parent / "templates"
MATHJAX = ("static", "mathjax", "es5", "tex-svg-full.js")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
FONT_STACK = (
    '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", '
    '"Microsoft YaHei", "WenQuanYi Micro Hei", system-ui, sans-serif'
)


@dataclass
class Section:
    stem: str
    title: str = ""
    summary: str = ""
    error: str | None = None  # one line: notebook, cell, error and the failing line
    stale: bool = False  # the notebook failed; its page is the previous build's

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


# ------------------------------------------------------------------ one notebook


def _failing_line(traceback: list[str]) -> str:
    lines = [ANSI.sub("", line) for chunk in traceback for line in chunk.splitlines()]
    marked = [line for line in lines if line.lstrip().startswith("---->")]
    if marked:
        return re.sub(r"^\s*---->\s*\d*\s*", "", marked[-1]).strip()
    return ""


def run_notebook(
    stem: str, inputs: dict[str, Any], work: str, notebooks: str | Path | None = None
) -> tuple[str, str | None]:
    """Execute notebooks/<stem>.ipynb into work/<stem>.ipynb (in a worker process), with the
    team's inputs as the `overrides` parameter: the page then shows what it was run with."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    folder = Path(notebooks or suite.NOTEBOOKS)
    source = folder / f"{stem}.ipynb"
    try:
        papermill.execute_notebook(
            str(source),
            str(Path(work) / f"{stem}.ipynb"),
            parameters={"scenario_file": None, "overrides": inputs},
            cwd=str(folder),
            kernel_name="python3",
            progress_bar=False,
            log_output=False,
            extra_arguments=suite.KERNEL_ARGS,
        )
    except PapermillExecutionError as error:
        line = _failing_line(error.traceback)
        where = f" at `{line}`" if line else ""
        return stem, (
            f"{stem}: cell {error.exec_count} raised {error.ename}: "
            f"{ANSI.sub('', str(error.evalue)).splitlines()[0] if error.evalue else ''}"
            f"{where}"
        )
    except Exception as error:  # kernel died, timeout
        return (
            stem,
            f"{stem}: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}",
        )
    return stem, None


def _describe(nb) -> tuple[str, str]:
    """Title (first heading) and one-line summary (first sentence after it) of a notebook."""
    title, summary = "", ""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"\n\s*\n", cell.source):
            block = block.strip()
            if not title and block.startswith("#"):
                title = block.lstrip("#").strip().splitlines()[0]
            elif title and block and not block.startswith(("#", "|", "-", "*", "$", ">")):
                text = re.sub(r"[*`_]|\$[^$]*\$", "", " ".join(block.split()))
                summary = re.split(r"(?<=[。！？.!?])", text, maxsplit=1)[0]
                return title, summary
    return title, summary


def export_html(nb, target: Path, no_input: bool, banner: str) -> None:
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="handout",
        extra_template_basedirs=[str(TEMPLATE_DIR)],
        exclude_input=no_input,
        exclude_input_prompt=no_input,
        exclude_output_prompt=no_input,
        embed_images=True,
    )
    exporter.log.setLevel("ERROR")  # not one "alternative text is missing" line per plot
    mathjax = resources.files("mathjax").joinpath(*MATHJAX).read_text(encoding="utf-8")
    body, _ = exporter.from_notebook_node(
        nb,
        resources={
            "mathjax_inline": mathjax.replace("</script", "<\\/script"),
            "handout_banner": banner,
            "metadata": {"name": nb.metadata.get("title", "")},
        },
    )
    target.write_text(body, encoding="utf-8")


# ------------------------------------------------------------------ the index


def index_html(sc: scenario.Scenario, account: dict[str, Any], sections: list[Section]) -> str:
    changed = set(sc.changed)
    rows = "".join(
        f'<tr class="{"changed" if key in changed else ""}"><td><code>{key}</code></td>'
        f"<td>{html.escape(table_value(sc[key]))}</td><td>{'changed' if key in changed else ''}"
        f"</td></tr>"
        for key in scenario.FIELDS
        if key != "name"
    )
    att = account["attention"]
    headline = [
        ("MFU", f"{100 * account['mfu']:.2f}%"),
        ("HFU", f"{100 * account['hfu']:.2f}%"),
        (
            f"Attention share (padded length, {att['attention_flops']})",
            f"{100 * att['padded']['share']:.1f}%",
        ),
        (
            f"Attention share (real lengths, {att['attention_flops']})",
            f"{100 * att['actual']['share']:.1f}%",
        ),
        ("Padding waste", f"{100 * account['padding']['waste_fraction']:.1f}%"),
    ]
    cards = "".join(
        f'<div class="card"><div class="v">{v}</div><div>{html.escape(k)}</div></div>'
        for k, v in headline
    )
    items = []
    for s in sections:
        if s.error and s.stale:
            items.append(
                f'<li class="failed"><a href="{s.page}">{html.escape(s.stem)}</a> — '
                f"STALE: this build failed ({html.escape(s.error)}); the page is the "
                f"previous build's</li>"
            )
        elif s.error:
            items.append(
                f'<li class="failed"><strong>{html.escape(s.stem)}</strong> — FAILED: '
                f"{html.escape(s.error)}</li>"
            )
        else:
            items.append(
                f'<li><a href="{s.page}">{html.escape(s.title or s.stem)}</a>'
                f'<div class="summary">{html.escape(s.summary)}</div></li>'
            )
    title = html.escape(sc["name"])
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<style>
body {{ font-family: {FONT_STACK}; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
  color: #1f2328; line-height: 1.5; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid #d0d7de;
  padding: 2px 10px; text-align: left; }}
tr.changed td {{ background: #fff8c5; font-weight: 600; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 12px; margin: 1rem 0; }}
.card {{ border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 9rem; }}
.card .v {{ font-size: 1.6rem; font-weight: 700; }}
li {{ margin: 0.5rem 0; }} .summary {{ color: #57606a; }} .failed {{ color: #cf222e; }}
@page {{ size: A4; margin: 15mm; }}
</style></head>
<body>
<h1>{title}</h1>
<p>Course section 06, re-executed for this scenario. Numbers computed by costmodel.</p>
<h2>Headline numbers</h2>
<div class="cards">{cards}</div>
<h2>Sections</h2>
<ol>{"".join(items)}</ol>
<h2>Scenario inputs</h2>
<p>Highlighted rows differ from the course's scenario.</p>
<table><thead><tr><th>key</th><th>value</th><th></th></tr></thead><tbody>{rows}</tbody></table>
</body></html>
"""


# ------------------------------------------------------------------ the output folder

MARKER = (
    ".costmodel-handouts"  # written into every folder the build makes; its content: the scenario
)


def _marker_text(name: str) -> str:
    return (
        json.dumps({"written_by": "costmodel handouts", "scenario": name}, ensure_ascii=False)
        + "\n"
    )


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _protected() -> list[tuple[Path, str]]:
    """Folders an output may be neither inside nor around: the package, the notebooks, and in a
    source checkout the repository and its top-level entries (except handouts/ and build/)."""
    package = suite.PACKAGE
    found = [  # the most specific first: the notebooks live inside the package
        (suite.NOTEBOOKS.resolve(), "the notebooks folder"),
        (package, "the costmodel package"),
    ]
    root = suite.ROOT.resolve()
    if (root / "pyproject.toml").is_file():
        found += [
            (entry, "one of the project's sources")
            for entry in sorted(root.iterdir())
            if entry.name not in ("handouts", "build")
        ]
    return found


def check_output(out: str | Path) -> Path:
    """The output folder, made absolute, or CostModelError (one line) if the build must not
    write there. Nothing is created or touched."""
    given = Path(out).expanduser()
    if given.is_symlink():
        raise CostModelError(f"--out: '{given}' is a symbolic link; expected a folder path")
    target = given.resolve()
    cwd = Path.cwd().resolve()
    if _is_within(cwd, target):
        what = "is the working directory" if target == cwd else "contains the working directory"
        raise CostModelError(f"--out: '{target}' {what}; expected a folder of its own")
    root = suite.ROOT.resolve()
    if (root / "pyproject.toml").is_file() and _is_within(root, target):
        raise CostModelError(
            f"--out: '{target}' contains the project's sources ({root}); "
            f"expected a folder of its own"
        )
    for folder, what in _protected():
        if _is_within(target, folder) or _is_within(folder, target):
            where = (
                "is"
                if target == folder
                else "is inside"
                if _is_within(target, folder)
                else "contains"
            )
            raise CostModelError(
                f"--out: '{target}' {where} {what} ({folder}); expected a folder of its own"
            )
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise CostModelError(
                f"--out: '{target}' exists and is not a folder; expected a new "
                f"folder or one that costmodel handouts wrote"
            )
        if not (target / MARKER).is_file() and any(target.iterdir()):
            raise CostModelError(
                f"--out: '{target}' exists and was not written by costmodel "
                f"handouts (no {MARKER} in it); choose a new folder or remove "
                f"it yourself"
            )
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CostModelError(f"--out: '{target}' cannot be made: '{parent}' is not a folder")
    try:  # a real probe: os.access says yes to root on a read-only file system
        probe = tempfile.mkdtemp(prefix=f".{target.name}.probe-", dir=parent)
    except OSError as error:
        raise CostModelError(
            f"--out: '{target}' cannot be written: making a folder in "
            f"'{parent}' failed ({error.strerror or error})"
        ) from None
    os.rmdir(probe)
    return target


def _fault(step: str) -> None:
    """A named point of the swap; tests inject faults here."""


_EXCHANGE = None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE). False where unsupported."""
    global _EXCHANGE
    if _EXCHANGE is None:
        try:
            _EXCHANGE = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):
            _EXCHANGE = False
    if _EXCHANGE is False:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if _EXCHANGE(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _aside(out: Path) -> Path:
    return out.with_name(f".{out.name}.old")


def recover(out: Path) -> None:
    """Put back an old folder that a crash left aside between the two renames of a swap, or
    remove it if the swap had completed."""
    old = _aside(out)
    if not (old / MARKER).is_file():
        return
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
    else:
        old.rename(out)


class _SignalsBlocked:
    """SIGINT and SIGTERM held back (not lost) for the duration of the block."""

    SIGNALS = {signal.SIGINT, signal.SIGTERM}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


def _replace_dir(built: Path, out: Path) -> None:
    """Make `built` the folder `out`: afterwards `out` is the new complete folder; at every
    point before, it is the old complete one (or absent, if there was none)."""
    umask = os.umask(0)
    os.umask(umask)
    built.chmod(0o777 & ~umask)  # mkdtemp made it private; a handout folder is for sharing
    _fault("before-swap")
    if not out.exists():
        built.rename(out)
        _fault("after-swap")
        return
    if _exchange(built, out):  # out is the new folder; built now holds the old one
        try:
            _fault("after-swap")
        finally:
            shutil.rmtree(built, ignore_errors=True)
        return
    old = _aside(out)
    shutil.rmtree(old, ignore_errors=True)
    with _SignalsBlocked():
        out.rename(old)
        try:
            _fault("between-renames")
            built.rename(out)
        except BaseException:
            old.rename(out)
            raise
    try:
        _fault("after-swap")
    finally:
        shutil.rmtree(old, ignore_errors=True)


# ------------------------------------------------------------------ workers


class Terminated(Exception):
    """SIGTERM arrived during a build."""


def _on_sigterm(signum, frame):
    raise Terminated()


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def _stop(procs: list[subprocess.Popen], grace: float = 2.0) -> None:
    """Stop workers and everything they started (kernels run in sessions of their own)."""
    import psutil

    victims = []
    for proc in procs:
        if proc.poll() is None:
            victims += _descendants(proc.pid)
            try:
                victims.append(psutil.Process(proc.pid))
            except psutil.Error:
                pass
    for victim in victims:
        try:
            victim.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(victims, timeout=grace)
    for victim in alive:
        try:
            victim.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


def _worker_env(work: Path) -> dict[str, str]:
    """A worker's environment: temporary files (the kernel's connection file among them) and
    Jupyter's runtime folder inside the build's own temporary folder."""
    suite.inline_figures()
    env = dict(os.environ)
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    env.update(TMPDIR=str(tmp), JUPYTER_RUNTIME_DIR=str(tmp), PYTHONUNBUFFERED="1")
    return env


def _run_all(
    stems: list[str],
    inputs: dict[str, Any],
    work: Path,
    jobs: int,
    progress: bool,
    running: list[subprocess.Popen],
) -> dict[str, str | None]:
    """Run the notebooks on `jobs` worker processes (`python -m costmodel.present.handouts --worker`),
    each started once (its imports cost seconds) and handed one notebook at a time: a stem on
    its stdin, the same stem back on its stdout when the notebook is done. `running` holds the
    workers (the caller stops them on an interrupt). Returns {stem: error or None}."""
    import selectors

    from tqdm import tqdm

    job = {"inputs": inputs, "notebooks": str(suite.NOTEBOOKS)}
    (work / "job.json").write_text(json.dumps(job), encoding="utf-8")
    env = _worker_env(work)
    pending, errors = list(stems), {}
    busy: dict[subprocess.Popen, str] = {}
    with (
        selectors.DefaultSelector() as selector,
        tqdm(
            total=len(stems),
            desc="notebooks",
            unit="nb",
            leave=False,
            disable=None if progress else True,
        ) as bar,
    ):
        for slot in range(jobs):
            with open(work / f"worker-{slot}.log", "wb") as log:
                worker = subprocess.Popen(
                    [sys.executable, "-m", "costmodel.present.handouts", "--worker", str(work)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                    text=True,
                    bufsize=1,
                )
            running.append(worker)
            selector.register(worker.stdout, selectors.EVENT_READ, worker)

        def hand_out(worker: subprocess.Popen) -> None:
            if pending:
                busy[worker] = pending.pop(0)
                worker.stdin.write(busy[worker] + "\n")
                worker.stdin.flush()
            else:
                worker.stdin.close()  # no more work: the worker exits

        for worker in running:
            hand_out(worker)
        while busy:
            for key, _ in selector.select():
                worker = key.data
                line = worker.stdout.readline().strip()
                stem = busy.pop(worker, None)
                if not line:  # the worker died
                    selector.unregister(worker.stdout)
                    if stem is not None:
                        worker.wait()
                        log = (
                            (work / f"worker-{running.index(worker)}.log")
                            .read_text(encoding="utf-8", errors="replace")
                            .strip()
                            .splitlines()
                        )
                        last = f" ({log[-1][:200]})" if log else ""
                        errors[stem] = (
                            f"{stem}: the worker exited with status {worker.returncode}{last}"
                        )
                        bar.update(1)
                    continue
                result = json.loads((work / f"{line}.result.json").read_text(encoding="utf-8"))
                errors[line] = result["error"]
                bar.update(1)
                hand_out(worker)
    errors.update({stem: f"{stem}: not run (every worker exited)" for stem in pending})
    for worker in running:
        worker.wait()
    return errors


def _worker(work: str) -> int:
    """Run the notebooks named on stdin, one a line; answer each with its name on stdout."""
    job = json.loads((Path(work) / "job.json").read_text(encoding="utf-8"))
    for line in sys.stdin:
        stem = line.strip()
        _, error = run_notebook(stem, job["inputs"], work, job["notebooks"])
        result = Path(work) / f"{stem}.result.json"
        tmp = result.with_suffix(".tmp")
        tmp.write_text(json.dumps({"error": error}), encoding="utf-8")
        tmp.replace(result)
        print(stem, flush=True)
    return 0


def _deterministic(nb) -> None:
    """What papermill adds that changes from build to build: a random id for its injected cell,
    start and end times."""
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
    suite.clean(nb)


# ------------------------------------------------------------------ the build


def default_out(scenario_file: str | None) -> str:
    """handouts/course, or handouts/<scenario file name> (made safe as a folder name)."""
    if not scenario_file:
        return "handouts/course"
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(scenario_file).stem).strip(".-")
    return f"handouts/{name or 'scenario'}"


def build(
    scenario_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    out: str | Path = "handouts/course",
    no_input: bool = False,
    jobs: int | None = None,
    progress: bool = True,
) -> tuple[list[Section], Path]:
    """Build the handouts. A bad scenario or output folder raises CostModelError before any
    notebook runs; Ctrl-C raises KeyboardInterrupt and SIGTERM Terminated, after every worker,
    kernel and temporary folder is gone."""
    import nbformat

    sc = scenario.resolve(scenario_file, overrides)
    account = evaluate_account(sc)
    stems = [p.stem for p in suite.sources()]
    if not stems:
        raise CostModelError(f"notebooks: none found in {suite.NOTEBOOKS}")
    out = check_output(out)
    main = threading.current_thread() is threading.main_thread()
    if main:
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        signal.signal(signal.SIGTERM, _on_sigterm)
    built = work = None
    running: list[subprocess.Popen] = []
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        recover(out)
        built = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
        work = Path(tempfile.mkdtemp(prefix="costmodel-handouts-"))
        inputs = user_layer(scenario_file, overrides)
        jobs = max(1, min(jobs or os.cpu_count() or 1, len(stems)))
        errors = _run_all(stems, inputs, work, jobs, progress, running)
        sections = [Section(stem, error=errors[stem]) for stem in stems]
        banner = f"{sc['name']} · MFU {100 * account['mfu']:.2f}% · costmodel handout"
        for section in sections:
            if section.error:
                kept = out / section.page
                if (out / MARKER).is_file() and kept.is_file():
                    shutil.copy2(kept, built / section.page)
                    section.stale = True
                continue
            nb = nbformat.read(work / f"{section.stem}.ipynb", as_version=4)
            _deterministic(nb)
            section.title, section.summary = _describe(nb)
            nb.metadata["title"] = section.title or section.stem
            export_html(nb, built / section.page, no_input, banner)
        (built / "index.html").write_text(index_html(sc, account, sections), encoding="utf-8")
        (built / MARKER).write_text(_marker_text(sc["name"]), encoding="utf-8")
        _replace_dir(built, out)
        built = None
    finally:
        if main:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            _stop(running)
            for folder in (built, work):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
        finally:
            if main:
                for signum, handler in handlers.items():
                    signal.signal(signum, handler)
    return sections, out


def user_layer(scenario_file: str | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The team's own keys (file, then --set), for the notebooks' parameters cell."""
    data = scenario.load_yaml(scenario_file) if scenario_file else {}
    if scenario_file:
        scenario.relative_to_file(data, Path(scenario_file).parent)
    # --set paths are relative to the folder the command runs in; the notebooks run elsewhere
    data.update(scenario.relative_to_file(dict(overrides or {}), Path.cwd()))
    return data


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    sys.exit(_worker(sys.argv[2]))
