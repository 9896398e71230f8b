"""The workers of a build: each notebook runs in a worker process of its own session (a
`python -m costmodel.publish.workers --worker WORK`), with the build's own temporary folder
(the kernel's connection file lives there). A worker starts one kernel and readies the page
exporters at once, while the build checks the scenario; then it runs the notebooks it is handed
on stdin, one a line, in that kernel (reset between notebooks, costmodel.publish.runner),
exports each executed notebook's pages, and answers with its name on stdout. `stop` ends every
worker and everything it started (kernels run in sessions of their own).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from costmodel.publish import suite
from costmodel.publish.pages import describe, export_html, exporter
from costmodel.publish.signals import checkpoint


def _descendants(pid: int) -> list:
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def stop(procs: list[subprocess.Popen], work: Path | None = None, grace: float = 2.0) -> None:
    """Stop workers and everything they started (kernels run in sessions of their own). Each
    worker is frozen first (SIGSTOP), so that it starts no kernel after its children are
    listed; then every process left whose command line names the build's folder `work` (a
    kernel started as the worker was listed, reparented when it died) is stopped too: a Ctrl-C
    while a kernel starts left that kernel running, and its connection file behind."""
    import psutil

    victims = []
    for proc in procs:
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGSTOP)
            except OSError:
                pass
    for proc in procs:
        if proc.poll() is None:
            victims += _descendants(proc.pid)
            try:
                victims.append(psutil.Process(proc.pid))
            except psutil.Error:
                pass
    _end(victims, grace)
    for proc in procs:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    if work is not None:
        _end(_naming(str(work)), grace)


def _naming(text: str) -> list:
    """The processes whose command line mentions `text` (this process excluded)."""
    import psutil

    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.pid != os.getpid() and any(text in part for part in cmdline):
            found.append(process)
    return found


def _end(victims: list, grace: float) -> None:
    """SIGTERM (with SIGCONT, for a frozen worker), then SIGKILL for what is left after
    `grace` seconds."""
    import psutil

    for victim in victims:
        try:
            victim.terminate()
            victim.resume()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(victims, timeout=grace)
    for victim in alive:
        try:
            victim.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace)


def _worker_env(work: Path) -> dict[str, str]:
    """A worker's environment: temporary files (the kernel's connection file among them) and
    Jupyter's runtime folder inside the build's own temporary folder."""
    suite.inline_figures()
    env = dict(os.environ)
    tmp = work / "tmp"
    tmp.mkdir(exist_ok=True)
    env.update(TMPDIR=str(tmp), JUPYTER_RUNTIME_DIR=str(tmp), PYTHONUNBUFFERED="1")
    return env


def spawn(work: Path, jobs: int, running: list[subprocess.Popen], boot: dict[str, Any]) -> None:
    """Start `jobs` worker processes (`python -m costmodel.publish.workers --worker`) into
    `running` (the caller stops them, whatever happens). Each starts its kernel and readies its
    page exporters (`boot`: {"notebooks", "editions", "no_input"}) at once, while the caller
    checks the scenario; none runs a notebook before `run_all` hands it one."""
    (work / "boot.json").write_text(json.dumps(boot), encoding="utf-8")
    env = _worker_env(work)
    for slot in range(jobs):
        with open(work / f"worker-{slot}.log", "wb") as log:
            running.append(
                subprocess.Popen(
                    [sys.executable, "-m", "costmodel.publish.workers", "--worker", str(work)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                    text=True,
                    bufsize=1,
                )
            )


def _write_job(work: Path, job: dict[str, Any]) -> None:
    """work/job.json, complete before any worker reads it."""
    tmp = work / "job.json.tmp"
    tmp.write_text(json.dumps(job), encoding="utf-8")
    tmp.replace(work / "job.json")


def _died(stem: str, worker: subprocess.Popen, log: Path) -> str:
    """The error of a notebook whose worker exited: its status and the last line it logged."""
    worker.wait()
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    last = f" ({lines[-1][:200]})" if lines else ""
    return f"{stem}: the worker exited with status {worker.returncode}{last}"


def run_all(
    stems: list[str],
    inputs: dict[str, Any],
    work: Path,
    progress: bool,
    running: list[subprocess.Popen],
    pages: dict[str, Any] | None = None,
    described: dict[str, dict[str, Any]] | None = None,
) -> dict[str, str | None]:
    """Run the notebooks on the workers `spawn` started, one notebook at a time each:
    a stem on its stdin, the same stem back on its stdout when the notebook is done. With
    `pages` ({"editions", "no_input", "banners"}), a worker also exports the executed notebook's
    page of each edition into work/pages/<edition>/ (the exports run in parallel, beside the
    other notebooks), and `described` receives each notebook's result ({"title", "summary",
    "seconds"}: the seconds its worker spent getting the kernel ready, running it and exporting
    its pages). Returns {stem: error or None}."""
    import selectors

    from tqdm import tqdm

    _write_job(work, {"inputs": inputs, "pages": pages})
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
        for worker in running:
            selector.register(worker.stdout, selectors.EVENT_READ, worker)

        def hand_out(worker: subprocess.Popen) -> None:
            if pending:
                busy[worker] = pending.pop(0)
                worker.stdin.write(busy[worker] + "\n")
                worker.stdin.flush()
            else:
                worker.stdin.close()  # no more work: the worker exits

        for worker in running:
            try:
                hand_out(worker)
            except BrokenPipeError:  # it died starting; its stem is reported below
                pass
        while busy:
            checkpoint()
            for key, _ in selector.select():
                worker = key.data
                line = worker.stdout.readline().strip()
                stem = busy.pop(worker, None)
                if not line:  # the worker died
                    selector.unregister(worker.stdout)
                    if stem is not None:
                        log = work / f"worker-{running.index(worker)}.log"
                        errors[stem] = _died(stem, worker, log)
                        bar.update(1)
                    continue
                result = json.loads((work / f"{line}.result.json").read_text(encoding="utf-8"))
                errors[line] = result["error"]
                if described is not None:
                    described[line] = result
                bar.update(1)
                hand_out(worker)
    errors.update({stem: f"{stem}: not run (every worker exited)" for stem in pending})
    for worker in running:
        worker.wait()
    return errors


def _worker(work: str) -> int:
    """Start a kernel and ready the page exporters; then run the notebooks named on stdin, one
    a line, in that kernel (reset between notebooks); answer each with its name on stdout."""
    from costmodel.publish import runner

    runner.skip_iri_format_checks()
    boot = json.loads((Path(work) / "boot.json").read_text(encoding="utf-8"))
    kernel = runner.Kernel(boot["notebooks"])
    job = None
    try:
        kernel.launch()  # while the kernel starts, this worker readies what it needs
        import nbclient  # noqa: F401
        import nbformat

        for edition in boot.get("editions", []):  # templates compiled on a first, empty page
            exporter(edition, boot.get("no_input", False)).from_notebook_node(
                nbformat.v4.new_notebook(), resources={"handout_banner": ""}
            )
        try:  # connected, with the notebooks' imports done, before the first notebook
            kernel.ready()
        except Exception:  # said, with the notebook's name, when the first notebook runs
            pass
        for line in sys.stdin:
            stem = line.strip()
            if job is None:  # written before the first notebook is handed out
                job = json.loads((Path(work) / "job.json").read_text(encoding="utf-8"))
            nb, error = runner.run_notebook(stem, job["inputs"], kernel, boot["notebooks"])
            answer: dict[str, Any] = {"error": error, "seconds": dict(kernel.seconds)}
            if not error and job.get("pages"):
                start = time.perf_counter()
                try:
                    answer.update(_export_pages(stem, nb, Path(work), job["pages"]))
                    answer["seconds"]["export"] = time.perf_counter() - start
                except Exception as failure:  # an export that fails: the section fails, named
                    answer["error"] = f"{stem}: export failed: {type(failure).__name__}: {failure}"
            result = Path(work) / f"{stem}.result.json"
            tmp = result.with_suffix(".tmp")
            tmp.write_text(json.dumps(answer), encoding="utf-8")
            tmp.replace(result)
            print(stem, flush=True)
    finally:
        kernel.shutdown()
    return 0


def _export_pages(stem: str, nb, work: Path, pages: dict[str, Any]) -> dict[str, str]:
    """In a worker: the executed notebook's page of each edition, in work/pages/<edition>/."""
    _deterministic(nb)
    title, summary = describe(nb)
    nb.metadata["title"] = title or stem
    for edition in pages["editions"]:
        folder = work / "pages" / edition
        folder.mkdir(parents=True, exist_ok=True)
        export_html(
            nb, folder / f"{stem}.html", pages["no_input"], pages["banners"][edition], edition
        )
    return {"title": title, "summary": summary}


def _deterministic(nb) -> None:
    """What changes from build to build: the injected cell's random id (cells are numbered)."""
    suite.clean(nb)


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    sys.exit(_worker(sys.argv[2]))
