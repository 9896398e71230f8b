"""Handouts: the notebook suite re-executed for a scenario and exported to offline HTML.

    scenario (validated first) -> the notebooks run on one worker per core, each worker with one
    kernel reset between notebooks (costmodel.publish.workers, .runner; the parameters cell gets
    the scenario) -> nbconvert exports each to one self-contained HTML page (.pages: images
    embedded, math as MathML typeset at build time, no script and no remote resource) ->
    index.html with the scenario's inputs, its headline numbers and a link to each section
    (.index) -> with --pdf, one A4 booklet an edition (.booklet).

The stored notebooks in notebooks/ are only read. The output folder is guarded and swapped
atomically:

- every folder a build writes holds a manifest (.manifest); a build replaces a folder only if it
  is empty or holds exactly what its manifest lists and names the same scenario; otherwise
  `check_output` (.output) refuses it, with one line naming the first file at fault, before any
  work;
- pages are built in a hidden sibling folder that replaces DIR in one atomic exchange (.swap); a
  folder that appeared meanwhile, or that no longer matches its manifest, is left as it is, and
  the new build is put beside it (DIR.new);
- a section whose notebook fails keeps its page from the previous build, marked stale (and
  listed in the new manifest: this build wrote it there);
- each notebook runs in a worker process of its own session, with its own temporary folder (the
  kernel's connection file lives there): Ctrl-C, SIGTERM or SIGHUP (.signals) stops every
  worker and kernel, removes the temporary folders and ends the build with exit status 130,
  143 or 129;
- every temporary folder records its owner (PID and start time, .tempdirs): a build first
  removes those that a killed build left, never a live build's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.formats import printable
from costmodel.publish import suite, swap, workers
from costmodel.publish.index import banner, index_html
from costmodel.publish.manifest import MARKER, write_manifest
from costmodel.publish.output import TMP_INFIX, check_output, writing
from costmodel.publish.pages import CONVENTIONS_PAGE, EDITIONS, Section, conventions_html
from costmodel.publish.signals import Stops, checkpoint
from costmodel.publish.tempdirs import owned_tempdir, sweep

#: One booklet to print: its pages, the PDF, its title.
Booklet = tuple[list[Path], Path, str]


@dataclass
class _Resources:
    """What a build holds while it runs, released by `close` whatever happens: the workers (and
    their kernels), the browser, the temporary folder and the folder beside DIR it builds in."""

    running: list[subprocess.Popen] = field(default_factory=list)
    work: Path | None = None
    box: Path | None = None
    printer: Any = None

    @property
    def built(self) -> Path:
        assert self.box is not None
        return self.box / "handouts"

    def close(self) -> None:
        if self.printer is not None:
            self.printer.close()
        workers.stop(self.running, self.work)
        for folder in (self.box, self.work):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


@dataclass
class _Scenario:
    """The scenario a build is of, as the pages show it."""

    sc: Any
    account: dict[str, Any]
    inputs: dict[str, Any]
    conventions: str | None
    plan: dict[str, Any] | str | None = None


def _editions(edition: str) -> list[str]:
    if edition not in (*EDITIONS, "both"):
        raise CostModelError(
            f"--edition: {edition!r} is not allowed; expected one of teacher, student, both"
        )
    return list(EDITIONS) if edition == "both" else [edition]


def build(
    scenario_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    out: str | Path = "handouts/course",
    no_input: bool = False,
    jobs: int | None = None,
    progress: bool = True,
    edition: str = "teacher",
    pdf: bool = False,
    timings: dict[str, float] | None = None,
) -> tuple[list[Section], Path]:
    """Build the handouts. A bad scenario or output folder raises CostModelError before any
    notebook runs (as does an output folder that changes meanwhile, before the swap, or a write
    that fails: one line, DIR as it was); Ctrl-C raises KeyboardInterrupt, SIGTERM and SIGHUP
    Terminated, after every worker, kernel and temporary folder is gone.

    edition: `teacher` (every cell), `student` (solutions replaced by answer spaces) or `both`
    (the teacher's in DIR, the student's in DIR/student/; the notebooks run once). pdf: also
    print each edition as one A4 booklet, DIR/booklet.pdf (and DIR/student/booklet.pdf).
    timings: a dict that receives where the build's time went, in seconds: "start" (until the
    first notebook is handed out: the scenario and folder checked while the workers start their
    kernels), "notebooks" (running and exporting them), "pages" (index and pages in place),
    "booklets", "total"; each section's `seconds` says where its worker's time went."""
    clock = {"begin": time.perf_counter()}
    editions = _editions(edition)
    from costmodel.publish import runner

    runner.skip_iri_format_checks()
    if pdf:
        from costmodel.publish import booklet

        booklet.chromium()  # before anything starts: say now if there is none
    stems = [p.stem for p in suite.sources()]
    if not stems:
        raise CostModelError(f"notebooks: none found in {suite.NOTEBOOKS}")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(stems)))
    out = check_output(out, scenario_file)  # before anything starts
    existed = os.path.lexists(out) or os.path.lexists(swap.aside(out))
    stops, held = Stops(), _Resources()
    stops.catch()
    try:
        boot = {"notebooks": str(suite.NOTEBOOKS), "editions": editions, "no_input": no_input}
        scene = _start(held, jobs, boot, pdf, scenario_file, overrides, out)
        sections = _run(held, stems, scene, editions, no_input, progress, clock)
        _finish(held, sections, editions, scene, out, scenario_file, clock)
        stops.hold()  # from here on the build is done: a late signal does not cut the swap short
        checkpoint()  # the last moment a signal stops the build
        with writing(out):
            swap.replace_dir(held.built, out, scenario_file, existed)
    finally:
        stops.ignore()  # a second Ctrl-C must not cut the clean-up short
        try:
            held.close()
        finally:
            stops.restore()
    if timings is not None:
        marks = ["begin", "notebooks", "pages", "booklets", "end"]
        names = ["start", "notebooks", "pages", "booklets"]
        timings.update({name: clock[b] - clock[a] for name, a, b in zip(names, marks, marks[1:])})
        timings["total"] = time.perf_counter() - clock["begin"]
    return sections, out


def _start(
    held: _Resources,
    jobs: int,
    boot: dict[str, Any],
    pdf: bool,
    scenario_file: str | None,
    overrides: dict[str, Any] | None,
    out: Path,
) -> _Scenario:
    """The workers start their kernels, and the browser starts, while the scenario is checked;
    no notebook runs, and nothing is written outside the temporary folder, until it is
    accepted. Then the folder beside DIR that the build builds in."""
    sweep(tempfile.gettempdir(), "costmodel-handouts-")  # what killed builds left
    held.work = owned_tempdir("costmodel-handouts-")
    workers.spawn(held.work, jobs, held.running, boot)
    if pdf:
        from costmodel.publish import booklet

        held.printer = booklet.Printer()
    from costmodel.evaluate.account.account import account as evaluate_account
    from costmodel.evaluate.account.account import fill_step_time
    from costmodel.inputs import scenario

    # the scenario with its step: measured, or the step-time model's prediction
    sc = fill_step_time(scenario.resolve(scenario_file, overrides))
    scene = _Scenario(
        sc, evaluate_account(sc), user_layer(scenario_file, overrides), conventions_html()
    )
    checkpoint()  # nothing written outside the temporary folder after a Ctrl-C
    with writing(out):
        out.parent.mkdir(parents=True, exist_ok=True)
        swap.recover(out)
        # the build's folder, inside a folder of its own beside DIR that records its owner
        held.box = owned_tempdir(f".{out.name}{TMP_INFIX}", out.parent)
        held.built.mkdir()
    return scene


def _run(
    held: _Resources,
    stems: list[str],
    scene: _Scenario,
    editions: list[str],
    no_input: bool,
    progress: bool,
    clock: dict[str, float],
) -> list[Section]:
    """Every notebook run and its pages exported, on the workers; a section each."""
    banners = {ed: banner(scene.sc, scene.account, scene.inputs, ed) for ed in editions}
    pages = {"editions": editions, "no_input": no_input, "banners": banners}
    described: dict[str, dict[str, Any]] = {}
    if held.printer is not None:  # the browser started, or one line now, before any notebook
        held.printer.ready()
    clock["notebooks"] = time.perf_counter()
    assert held.work is not None
    errors = workers.run_all(
        stems, scene.inputs, held.work, progress, held.running, pages, described
    )
    clock["pages"] = time.perf_counter()
    sections = [Section(stem, error=errors[stem]) for stem in stems]
    for section in sections:
        result = described.get(section.stem, {})
        section.seconds = result.get("seconds", {})
        if not section.error:
            section.title, section.summary = result.get("title", ""), result.get("summary", "")
    return sections


def _finish(
    held: _Resources,
    sections: list[Section],
    editions: list[str],
    scene: _Scenario,
    out: Path,
    scenario_file: str | None,
    clock: dict[str, float],
) -> None:
    """The pages, indexes and booklets in place in the build's folder, and its manifests."""
    built = held.built
    assert held.work is not None
    scene.plan = plan_table(scene.sc)
    with writing(out):
        booklets = _place_pages(sections, editions, held.work, built, out, scene)
    clock["booklets"] = time.perf_counter()
    checkpoint()
    if booklets and held.printer is not None:
        with writing(out):
            held.printer.print(booklets)
    clock["end"] = time.perf_counter()
    with writing(out):  # the manifests, from the files as they are now
        for ed in editions[1:]:
            write_manifest(built / ed, scenario_file, scene.sc.name)
        write_manifest(built, scenario_file, scene.sc.name, builds=editions[1:])


def _place_pages(
    sections: list[Section],
    editions: list[str],
    work: Path,
    built: Path,
    out: Path,
    scene: _Scenario,
) -> list[Booklet]:
    """Each edition's pages, its conventions page and its index into `built` (the first edition
    in it, the others in sub-folders); a failed section keeps its page from the previous build
    in `out`, marked stale. Returns the booklets to print (pages, PDF, title)."""
    booklets = []
    for ed in editions:
        here = built if ed == editions[0] else built / ed
        before = out if ed == editions[0] else out / ed
        here.mkdir(exist_ok=True)
        for section in sections:
            if section.error:
                kept = before / section.page
                if (out / MARKER).is_file() and kept.is_file():
                    shutil.copy2(kept, here / section.page)
                    section.stale = True
                continue
            shutil.move(work / "pages" / ed / section.page, here / section.page)
        if scene.conventions:
            (here / CONVENTIONS_PAGE).write_text(scene.conventions, encoding="utf-8")
        others = {e: ("student/" if e != editions[0] else "../") for e in editions if e != ed}
        (here / "index.html").write_text(
            index_html(scene.sc, scene.account, sections, ed, others, scene.plan),
            encoding="utf-8",
        )
        printed = [here / "index.html"] + [
            here / s.page for s in sections if (here / s.page).is_file()
        ]
        if scene.conventions:
            printed.append(here / CONVENTIONS_PAGE)
        booklets.append((printed, here / "booklet.pdf", f"{printable(scene.sc.name)} ({ed})"))
    return booklets


def plan_table(sc: Any) -> dict[str, Any] | str:
    """The scenario's `costmodel plan` (its GPUs, the default top K) as the index shows it
    (present.plan.as_table), or the one line of a model that fits nowhere."""
    from costmodel.evaluate.plan import plan
    from costmodel.present import plan as plan_text

    try:
        found = plan.search(sc)
    except CostModelError as error:
        return str(error)
    return plan_text.as_table(found, plan.TOP)


def user_layer(scenario_file: str | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The team's own keys (file, then --set), for the notebooks' parameters cell."""
    from costmodel.inputs import scenario

    data = scenario.load_yaml(scenario_file) if scenario_file else {}
    if scenario_file:
        scenario.relative_to_file(data, Path(scenario_file).parent)
        data.setdefault("name", "Team scenario")  # the notebooks get the keys, not the file
    # --set paths are relative to the folder the command runs in; the notebooks run elsewhere
    data.update(scenario.relative_to_file(dict(overrides or {}), Path.cwd()))
    return data
