"""Handouts: the notebook suite re-executed for a scenario and exported to offline HTML.

    scenario (validated first) -> the notebooks run on one worker per core, each worker with one
    kernel reset between notebooks (costmodel.present.runner; the parameters cell gets the
    scenario) -> nbconvert exports each to one self-contained HTML page (images embedded, math
    as MathML typeset at build time, no script and no remote resource) -> index.html with the
    scenario's inputs, its headline numbers and a link to each section.

The stored notebooks in notebooks/ are only read. The output folder is guarded and swapped
atomically:

- every folder a build writes holds a manifest, `.costmodel-handouts`: every file the build
  wrote there (relative path, size, sha256), the scenario (the resolved path of its file; none
  for the course's), the nested builds (DIR/student/ of `--edition both`, a complete build with
  a manifest of its own) and a digest of itself. A build replaces a folder only if it is empty
  or holds exactly what its manifest lists (no file or folder more, none missing, none
  changed; nested builds checked through their own manifests) and names the same scenario;
  otherwise `check_output` refuses it, with one line naming the first file at fault, before
  any work. It also refuses a path that is not a folder, a mount point, an immutable folder,
  the working directory or a folder that contains it, the project's own sources, and a place
  where a folder cannot be made and renamed (a probe: read-only, a name too long, a full disk);
- pages are built in a hidden sibling folder that replaces DIR in one atomic exchange
  (renameat2 RENAME_EXCHANGE; where the file system lacks it, two renames with the signals
  blocked in between, and a folder left aside by a crash, once its manifest checks, is put back
  by the next build). DIR is checked again just before: a folder that appeared meanwhile, or
  that no longer matches its manifest, is left as it is, and the new build is put beside it
  (DIR.new) and named in the one-line error; the new build never replaces what appeared
  (RENAME_NOREPLACE), and the previous one is removed only once its manifest checks again;
- a section whose notebook fails keeps its page from the previous build, marked stale (and
  listed in the new manifest: this build wrote it there);
- each notebook runs in a worker process of its own session, with its own temporary folder (the
  kernel's connection file lives there): Ctrl-C, SIGTERM or SIGHUP stops every worker and
  kernel, removes the temporary folders and ends the build with exit status 130, 143 or 129;
- every temporary folder records its owner (PID and start time, costmodel.present.tempdirs):
  a build first removes those that a killed build left, never a live build's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
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
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError, Terminated, stopping
from costmodel.formats import printable, seconds, table_value
from costmodel.present import suite
from costmodel.present.tempdirs import owned_tempdir, sweep

if TYPE_CHECKING:
    from costmodel.inputs import scenario

TEMPLATE_DIR = Path(__file__).parent / "templates"
FONT_STACK = (
    '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", '
    '"Microsoft YaHei", "WenQuanYi Micro Hei", system-ui, sans-serif'
)


#: The editions: the teacher's shows every cell; the student's drops the cells tagged `solution`
#: and leaves an answer space where they were.
EDITIONS = ("teacher", "student")
#: Cells no edition shows: the parameters cell of the source and the one injected (papermill's tag; the
#: banner and the index show the scenario's inputs instead), and the notes for a reader in
#: JupyterLab (which keys to edit in the parameters cell, restart and run all).
HIDDEN_CELLS = {"parameters", "injected-parameters", "lab-only"}
#: The conventions document, as the notebooks link it (from costmodel/course/notebooks/), and the
#: page the handouts give it (beside the sections).
CONVENTIONS_LINK = "../../../docs/conventions.md"
CONVENTIONS_PAGE = "conventions.html"
#: Code cells whose only job is to render computed prose, tables or equations: their output is
#: shown, their code is not (the tag Jupyter Book uses).
HIDDEN_INPUT = {"remove-input"}
SOLUTION = "solution"
ANSWER_SPACE = "answer-space"
EDITION_NAMES = {"teacher": "教师版（含解答）", "student": "学生版（不含解答）"}


@dataclass
class Section:
    stem: str
    title: str = ""
    summary: str = ""
    error: str | None = None  # one line: notebook, cell, error and the failing line
    stale: bool = False  # the notebook failed; its page is the previous build's
    #: where its worker's time went: "kernel" (start, or reset after the previous notebook),
    #: "execute", "export" (both editions' pages)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


# ------------------------------------------------------------------ one notebook


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


def _page_exporter():
    """nbconvert's HTML exporter without its last pass, which re-parses the whole page with
    BeautifulSoup only to add alternative text to images and tabindex to cells (about a second
    a page); the handout template gives the plots their alternative text itself."""
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class PageExporter(HTMLExporter):
        def from_notebook_node(self, nb, resources=None, **kw):
            resources = self._init_resources(resources)
            self.register_filter(
                "highlight_code", Highlight2HTML(pygments_lexer="ipython3", parent=self)
            )
            self.register_filter(
                "filter_data_type",
                WidgetsDataTypeFilter(
                    notebook_metadata=self._nb_metadata, parent=self, resources=resources
                ),
            )
            return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    return PageExporter


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def answer_spaces(nb) -> int:
    """Insert, before each run of `solution` cells, a cell tagged `answer-space`: where a student
    works (the student edition keeps it and drops the solutions; the teacher edition drops it).
    Returns the number of runs."""
    import nbformat

    cells, runs, inside = [], 0, False
    for cell in nb.cells:
        solution = SOLUTION in _tags(cell)
        if solution and not inside:
            runs += 1
            space = nbformat.v4.new_markdown_cell(
                '<div class="answer-space">✍ 作答区：先写下你的预测或推导，再对照教师版的解答'
                "（或在 JupyterLab 里运行本页核对）。</div>"
            )
            space.metadata["tags"] = [ANSWER_SPACE]
            space.id = f"answer-space-{runs}"  # not a random id: two builds are byte-identical
            cells.append(space)
        inside = solution
        cells.append(cell)
    nb.cells = cells
    return runs


_EXPORTERS: dict[tuple[str, bool], Any] = {}


def _exporter(edition: str, no_input: bool):
    """The page exporter of an edition, made once per process: making one compiles nbconvert's
    templates again (about 0.2 s a page)."""
    from traitlets.config import Config

    if edition not in EDITIONS:
        raise CostModelError(
            f"--edition: {edition!r} is not allowed; expected one of teacher, student"
        )
    key = (edition, bool(no_input))
    if key not in _EXPORTERS:
        config = Config()
        config.TagRemovePreprocessor.enabled = True
        config.TagRemovePreprocessor.remove_cell_tags = HIDDEN_CELLS | (
            {SOLUTION} if edition == "student" else {ANSWER_SPACE}
        )
        config.TagRemovePreprocessor.remove_input_tags = HIDDEN_INPUT
        # code colours as plain CSS colours: the default (JupyterLab's) style refers to variables
        # of JupyterLab's theme stylesheet, which the pages do not carry
        config.CSSHTMLHeaderPreprocessor.style = "default"
        exporter = _page_exporter()(
            config=config,
            template_name="handout",
            extra_template_basedirs=[str(TEMPLATE_DIR)],
            exclude_input=no_input,
            exclude_input_prompt=no_input,
            exclude_output_prompt=no_input,
            # plots are embedded by the exporter itself; embed_images re-parses the whole page
            # with BeautifulSoup to embed images of Markdown cells, which the notebooks lack
            embed_images=False,
        )
        exporter.log.setLevel("ERROR")  # not one "alternative text is missing" line per plot
        _EXPORTERS[key] = exporter
    return _EXPORTERS[key]


def export_html(nb, target: Path, no_input: bool, banner: str, edition: str = "teacher") -> None:
    """One self-contained page: images embedded, math typeset as MathML at build time (no
    script), the banner on top. nbconvert's TagRemovePreprocessor drops the parameters cells
    (and, in the student edition, the solutions; in the teacher edition, the answer spaces) and
    the code of the cells tagged `remove-input`."""
    import copy

    from costmodel.present import mathml

    exporter = _exporter(edition, no_input)
    nb = copy.deepcopy(nb)
    answer_spaces(nb)
    formulas = mathml.typeset(nb)
    body, _ = exporter.from_notebook_node(
        nb,
        resources={
            "handout_banner": banner,
            "metadata": {"name": nb.metadata.get("title", "")},
        },
    )
    body = body.replace(f'href="{CONVENTIONS_LINK}"', f'href="{CONVENTIONS_PAGE}"')
    target.write_text(formulas.restore(body), encoding="utf-8")


def conventions_html() -> str | None:
    """docs/conventions.md as a page of its own (None outside a checkout, where it is absent)."""
    source = suite.NOTEBOOKS / CONVENTIONS_LINK
    if not source.is_file():
        return None
    import mistune  # nbconvert's Markdown renderer, without importing nbconvert (no math there)

    body = mistune.create_markdown(plugins=["table", "strikethrough"])(
        source.read_text(encoding="utf-8")
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        "<title>Counting conventions</title><style>"
        f"body {{ font: 15px/1.6 {FONT_STACK}; max-width: 52rem; margin: 2rem auto; "
        "padding: 0 1rem; color: #1f2328; }"
        "table { border-collapse: collapse; } th, td { border: 1px solid #d0d7de; "
        "padding: 0.2em 0.5em; } code { background: #f0f2f4; } @page { size: A4; margin: 15mm; }"
        f"</style></head><body><main>{body}</main></body></html>\n"
    )


# ------------------------------------------------------------------ the index


def _fields() -> list[str]:
    from costmodel.inputs import scenario

    return list(scenario.FIELDS)


def _banner(sc: scenario.Scenario, account: dict[str, Any], inputs: dict[str, Any], edition: str):
    """The line above every page: the scenario, the edition, the MFU and the inputs it was run
    with (the parameters cells are not shown). Plain text, control characters shown escaped: the
    template HTML-escapes it."""
    changed = ", ".join(f"{key}={printable(table_value(value))}" for key, value in inputs.items())
    return (
        f"{printable(sc['name'])} · {EDITION_NAMES[edition]} · MFU {100 * account['mfu']:.2f}%"
        + (" (predicted step)" if account["time"]["measured_seconds"] is None else "")
        + " · "
        + (f"inputs: course scenario + {changed}" if changed else "inputs: the course's scenario")
        + " · costmodel handout"
    )


def _step_seconds(value: float) -> str:
    return seconds(value) if abs(value) >= 1 else f"{value:.3g} s"


def step_cards(t: dict[str, Any]) -> list[tuple[str, str]]:
    """The index cards of the step-time model: the predicted step beside the measured one and
    the unexplained remainder (said plainly when negative), or the predicted step alone, labelled
    predicted, when the scenario's step_time is null."""
    predicted = _step_seconds(t["predicted_seconds"])
    if t["measured_seconds"] is None:
        return [("Step time (predicted: step_time is null)", predicted)]
    unexplained = t["unexplained_seconds"]
    return [
        ("Step time (measured)", _step_seconds(t["measured_seconds"])),
        ("Step time (predicted by the model)", predicted),
        (
            "Unexplained (measured - predicted)"
            + (
                "; negative: the model says the step cannot be this fast" if unexplained < 0 else ""
            ),
            f"{_step_seconds(unexplained)} ({100 * t['unexplained_share']:.1f}%)",
        ),
    ]


def index_html(
    sc: scenario.Scenario,
    account: dict[str, Any],
    sections: list[Section],
    edition: str = "teacher",
    others: dict[str, str] | None = None,
) -> str:
    changed = set(sc.changed)
    rows = "".join(
        f'<tr class="{"changed" if key in changed else ""}"><td><code>{key}</code></td>'
        f"<td>{html.escape(printable(table_value(sc[key])))}</td>"
        f"<td>{'changed' if key in changed else ''}</td></tr>"
        for key in _fields()
        if key != "name"
    )
    att = account["attention"]
    predicted = account["time"]["measured_seconds"] is None
    headline = [
        ("MFU" + (" (predicted step)" if predicted else ""), f"{100 * account['mfu']:.2f}%"),
        *step_cards(account["time"]),
        ("HFU" + (" (predicted step)" if predicted else ""), f"{100 * account['hfu']:.2f}%"),
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
    title = html.escape(printable(sc["name"]))
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
<main>
<h1>{title}</h1>
<p>Course section 06, re-executed for this scenario. Numbers computed by costmodel.</p>
<p class="edition">Edition: <strong>{EDITION_NAMES[edition]}</strong> ({
        "solutions shown" if edition == "teacher" else "solutions removed, an answer space instead"
    }).{
        "".join(
            f' Other edition: <a href="{link}index.html">{EDITION_NAMES[e]}</a>.'
            for e, link in (others or {}).items()
        )
    }</p>
<h2>Headline numbers</h2>
<div class="cards">{cards}</div>
<h2>Sections</h2>
<ol>{"".join(items)}</ol>
<h2>Scenario inputs</h2>
<p>Highlighted rows differ from the course's scenario.</p>
<table><thead><tr><th>key</th><th>value</th><th></th></tr></thead><tbody>{rows}</tbody></table>
</main>
</body></html>
"""


# ------------------------------------------------------------------ the output folder

#: In every folder a build writes: its manifest, the proof that the build wrote the folder
#: (every file with its size and sha256, the scenario, the nested builds; JSON, with a digest).
MARKER = ".costmodel-handouts"
WRITTEN_BY = "costmodel handouts"
MANIFEST_FORMAT = 2
MANIFEST_KEYS = {"written_by", "format", "scenario", "scenario_file", "files", "builds", "digest"}
MAX_MANIFEST_BYTES = 16 << 20
#: The folder beside DIR that a build builds in: `.DIR.tmp-XXXXXXXX`, the longest name a build
#: gives anything beside DIR (the probe makes one of that length).
TMP_INFIX = ".tmp-"
#: Linux renameat2 flags, and the inode flags (FS_IOC_GETFLAGS) that forbid replacing a folder
#: or removing a file: immutable (chattr +i) and append-only (chattr +a).
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FS_IOC_GETFLAGS, PINNED_FLAGS = 0x80086601, 0x10 | 0x20


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _digest(body: dict[str, Any]) -> str:
    """The manifest's own checksum: an altered (or truncated) manifest is not a manifest."""
    text = json.dumps({k: v for k, v in body.items() if k != "digest"}, sort_keys=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def scenario_identity(scenario_file: str | Path | None) -> str | None:
    """What a manifest names as the scenario: the resolved path of its file, or None for the
    course's own scenario (no file)."""
    return str(Path(scenario_file).expanduser().resolve()) if scenario_file else None


def _shown_identity(identity: str | None) -> str:
    return "the course's scenario" if identity is None else f"'{identity}'"


def _files(folder: Path, skip: set[str]) -> list[tuple[str, Path]]:
    """The regular files under `folder` (relative POSIX path, path), in sorted order, without
    its manifest and the nested builds named in `skip`."""
    found = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if entry.name == MARKER or entry.name in skip:
            continue
        if entry.is_dir(follow_symlinks=False):
            found += [(f"{entry.name}/{rel}", p) for rel, p in _files(Path(entry.path), set())]
        elif entry.is_file(follow_symlinks=False):
            found.append((entry.name, Path(entry.path)))
    return found


def write_manifest(
    folder: Path, scenario_file: str | Path | None = None, name: str = "", builds=()
) -> None:
    """Write `folder`'s manifest: every file in it now (the manifest itself and the nested
    builds excepted: each has a manifest of its own), with its size and sha256, the scenario
    and the nested builds. Deterministic: the same files give the same bytes."""
    files = [
        {"path": rel, "size": path.stat().st_size, "sha256": _sha256(path)}
        for rel, path in _files(folder, set(builds))
    ]
    body: dict[str, Any] = {
        "written_by": WRITTEN_BY,
        "format": MANIFEST_FORMAT,
        "scenario": name,
        "scenario_file": scenario_identity(scenario_file),
        "files": files,
        "builds": sorted(builds),
    }
    body["digest"] = _digest(body)
    tmp = folder / f"{MARKER}.tmp"
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="ascii")
    tmp.replace(folder / MARKER)


def _safe_relative(path: Any) -> bool:
    parts = path.split("/") if isinstance(path, str) else [""]
    return path != MARKER and all(part not in ("", ".", "..") for part in parts)


def _valid_manifest(body: Any) -> bool:
    if not isinstance(body, dict) or set(body) != MANIFEST_KEYS:
        return False
    files, builds = body["files"], body["builds"]
    return (
        body["written_by"] == WRITTEN_BY
        and body["format"] == MANIFEST_FORMAT
        and isinstance(body["scenario"], str)
        and isinstance(body["scenario_file"], (str, type(None)))
        and isinstance(files, list)
        and all(
            isinstance(f, dict)
            and set(f) == {"path", "size", "sha256"}
            and _safe_relative(f["path"])
            and isinstance(f["size"], int)
            and isinstance(f["sha256"], str)
            and re.fullmatch(r"[0-9a-f]{64}", f["sha256"]) is not None
            for f in files
        )
        and isinstance(builds, list)
        and all(_safe_relative(b) and "/" not in b for b in builds)
        and body["digest"] == _digest(body)
    )


def read_manifest(folder: Path, shown: str = "") -> tuple[dict[str, Any] | None, str | None]:
    """`folder`'s manifest, or the problem with it (a phrase: "lacks ...", "holds ..."); `shown`
    is the folder's path as the message names it ("" for DIR itself, "student/" inside it)."""
    marker = folder / MARKER
    if marker.is_symlink() or not marker.is_file():
        if not shown:
            return None, f"exists and was not written by costmodel handouts (no {MARKER} in it)"
        return None, f"lacks {shown}{MARKER}, which costmodel handouts wrote there"
    altered = (
        f"holds {shown}{MARKER}, which is not a manifest costmodel handouts wrote (empty, "
        f"unreadable or altered)"
    )
    try:
        if marker.stat().st_size > MAX_MANIFEST_BYTES:
            return None, altered
        body = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, altered
    if isinstance(body, dict) and body.get("written_by") == WRITTEN_BY and "files" not in body:
        return None, (
            f"holds {shown}{MARKER} of an older costmodel handouts, which lists no files and so "
            f"cannot show that nothing was added or changed since"
        )
    return (body, None) if _valid_manifest(body) else (None, altered)


def _pinned(path: str | Path) -> bool:
    """The file or folder is immutable or append-only (chattr +i, +a): it cannot be renamed or
    removed, by root either."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = int.from_bytes(fcntl.ioctl(fd, FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
    except OSError:  # a file system without inode flags
        return False
    finally:
        os.close(fd)
    return bool(flags & PINNED_FLAGS)


def _mount_points() -> set[str]:
    """Every mount point (bind mounts of a folder on the same device too)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    octal = re.compile(r"\\([0-7]{3})")  # a space in a mount point is written \040
    return {
        octal.sub(lambda m: chr(int(m[1], 8)), line.split()[4])
        for line in lines
        if len(line.split()) > 4
    }


def _is_mount(path: Path, mounts: set[str]) -> bool:
    return os.path.ismount(path) or str(path) in mounts


def ownership_problem(folder: Path, shown: str = "", mounts: set[str] | None = None) -> str | None:
    """None if `folder` holds exactly what its manifest lists (no file or folder more, none
    missing, none changed; a nested build checked through its own manifest, recursively), and
    nothing in it stops a rebuild from replacing it; otherwise the first problem, as a phrase
    naming the file ("holds my_notes.txt, which costmodel handouts did not write")."""
    manifest, problem = read_manifest(folder, shown)
    if problem:
        return problem
    assert manifest is not None
    mounts = _mount_points() if mounts is None else mounts
    listed = {f["path"]: f for f in manifest["files"]}
    builds = set(manifest["builds"])
    holding = {part for path in listed for part in _parents(path)}  # folders of listed files
    seen: set[str] = set()

    def visit(directory: Path, rel: str) -> str | None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as error:
            return f"holds {shown}{rel}, which cannot be read ({error.strerror})"
        for entry in entries:
            path, name = f"{rel}{entry.name}", f"{shown}{rel}{entry.name}"
            if path == MARKER:
                continue
            if entry.is_dir(follow_symlinks=False):
                if _is_mount(Path(entry.path), mounts):
                    return f"holds {name}/, a mount point, which a rebuild cannot remove"
                if _pinned(entry.path):
                    return f"holds {name}/, which is immutable or append-only (chattr)"
                if path in builds:
                    seen.add(path)
                    found = ownership_problem(Path(entry.path), f"{name}/", mounts)
                elif path in holding:
                    found = visit(Path(entry.path), f"{path}/")
                else:
                    found = f"holds {name}/, which costmodel handouts did not write"
                if found:
                    return found
                continue
            wanted = listed.get(path)
            if wanted is None or not entry.is_file(follow_symlinks=False):
                return f"holds {name}, which costmodel handouts did not write"
            if _pinned(entry.path):
                return f"holds {name}, which is immutable or append-only (chattr)"
            try:
                same = entry.stat(follow_symlinks=False).st_size == wanted["size"] and (
                    _sha256(Path(entry.path)) == wanted["sha256"]
                )
            except OSError as error:
                return f"holds {name}, which cannot be read ({error.strerror})"
            if not same:
                return f"holds {name}, which was changed after costmodel handouts wrote it"
            seen.add(path)
        return None

    problem = visit(folder, "")
    if problem:
        return problem
    for path in sorted([*listed, *builds]):
        if path not in seen:
            shown_path = f"{shown}{path}{'/' if path in builds else ''}"
            return f"lacks {shown_path}, which costmodel handouts wrote there"
    return None


def _parents(path: str) -> list[str]:
    """'a/b/c' -> ['a', 'a/b']."""
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


def _owned_problem(folder: Path) -> tuple[str, str] | None:
    """None if a build may replace `folder` (whatever its scenario): absent, empty, or exactly
    what its manifest lists; otherwise the problem (a phrase) and what to do about it."""
    if not os.path.lexists(folder):
        return None
    if folder.is_symlink() or not folder.is_dir():
        return "exists and is not a folder", "choose a new folder"
    if _is_mount(folder, _mount_points()):
        return "is a mount point, which a build cannot replace", "choose a folder inside it"
    if _pinned(folder):
        return (
            "is immutable or append-only (chattr +i or +a), which a build cannot replace",
            "run chattr -i -a on it, or choose a new folder",
        )
    if not any(folder.iterdir()):
        return None
    problem = ownership_problem(folder)
    return (problem, "choose a new folder or remove it yourself") if problem else None


def _other_scenario(folder: Path, scenario_file: str | Path | None) -> str | None:
    """For a folder a build wrote: a phrase if it is another scenario's, else None."""
    manifest, _ = read_manifest(folder) if folder.is_dir() else (None, None)
    if manifest is None:
        return None
    theirs, ours = manifest["scenario_file"], scenario_identity(scenario_file)
    if theirs == ours:
        return None
    return (
        f"holds the handouts of another scenario ({_shown_identity(theirs)}); this build is "
        f"of {_shown_identity(ours)}"
    )


def replaceable(folder: Path, scenario_file: str | Path | None) -> str | None:
    """None if a build of `scenario_file` may replace `folder`: absent, empty, or a build of
    that scenario exactly as its manifest lists; otherwise the problem, as a phrase."""
    problem = _owned_problem(folder)
    return problem[0] if problem else _other_scenario(folder, scenario_file)


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


def check_output(out: str | Path, scenario_file: str | Path | None = None) -> Path:
    """The output folder, made absolute, or CostModelError (one line) if a build of
    `scenario_file` (None: the course's scenario) must not write there. Nothing is changed,
    except that the temporary folders a dead build left beside it are removed (and a probe
    folder is made and removed)."""
    if str(out) == "":
        raise CostModelError("--out: '' is not allowed; expected a folder path")
    try:
        return _check_output(Path(out).expanduser(), scenario_file)
    except OSError as error:  # a name too long, a folder that cannot be read
        raise CostModelError(
            f"--out: '{out}' cannot be used: {error.strerror or error}; expected a folder path"
        ) from None


def _check_output(given: Path, scenario_file: str | Path | None) -> Path:
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
    if target.exists() and not target.is_dir():
        raise CostModelError(
            f"--out: '{target}' exists and is not a folder; expected a new "
            f"folder or one that costmodel handouts wrote"
        )
    sweep(target.parent, f".{target.name}{TMP_INFIX}")  # what dead builds left beside it
    if target.is_dir():
        for edition in EDITIONS[1:]:
            sweep(target, f".{edition}{TMP_INFIX}")
    aside = _aside(target)
    problem = _owned_problem(aside)
    if problem:
        raise CostModelError(
            f"--out: '{aside}' (where a build stopped mid-swap left the previous handouts) "
            f"{problem[0]}; remove it yourself"
        )
    current = target if target.exists() or not os.path.lexists(aside) else aside
    problem = _owned_problem(current)
    if problem:
        raise CostModelError(f"--out: '{current}' {problem[0]}; {problem[1]}")
    other = _other_scenario(current, scenario_file)
    if other:
        raise CostModelError(f"--out: '{current}' {other}; choose its own folder with --out")
    _probe(target)
    return target


def _probe(target: Path) -> None:
    """Make, rename and remove a folder as long-named as the one the build will make beside
    `target`, with a file in it: a parent that cannot be written, a name too long, a full disk
    are said now, before any notebook runs."""
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CostModelError(f"--out: '{target}' cannot be made: '{parent}' is not a folder")
    probe = None
    try:  # a real probe: os.access says yes to root on a read-only file system
        probe = owned_tempdir(f".{target.name}{TMP_INFIX}", parent)
        moved = probe.with_name(probe.name[:-1] + ("0" if probe.name[-1] != "0" else "1"))
        _rename_noreplace(probe, moved)
        probe = moved
    except OSError as error:
        raise CostModelError(
            f"--out: '{target}' cannot be written: making a folder in "
            f"'{parent}' failed ({error.strerror or error})"
        ) from None
    finally:
        if probe is not None:  # the probe, never what was at the name it was renamed to
            shutil.rmtree(probe, ignore_errors=True)


# ------------------------------------------------------------------ the swap


def _fault(step: str) -> None:
    """A named point of the swap; tests inject faults here."""


_RENAMEAT2 = None


def _renameat2(a: Path, b: Path, flags: int) -> bool:
    """Linux renameat2(a, b, flags); False where the system or file system lacks it."""
    global _RENAMEAT2
    if _RENAMEAT2 is None:
        try:
            _RENAMEAT2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (OSError, AttributeError):
            _RENAMEAT2 = False
    if _RENAMEAT2 is False:
        return False
    at_fdcwd = -100
    if _RENAMEAT2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (RENAME_EXCHANGE). False where unsupported."""
    return _renameat2(a, b, RENAME_EXCHANGE)


def _rename_noreplace(src: Path, dst: Path) -> None:
    """Rename, never replacing what is at `dst` (plain rename() silently replaces an empty
    folder): FileExistsError if something is there. RENAME_NOREPLACE; where it is missing, a
    check, then the rename."""
    if _renameat2(src, dst, RENAME_NOREPLACE):
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def _aside(out: Path) -> Path:
    return out.with_name(f".{out.name}.old")


def recover(out: Path) -> None:
    """Put back an old folder that a crash left aside between the two renames of a swap, or
    remove it if the swap had completed: only once its manifest shows that it is exactly what a
    build wrote (otherwise CostModelError, and it is left as it is)."""
    old = _aside(out)
    if not os.path.lexists(old):
        return
    problem = _owned_problem(old)
    if problem:
        raise CostModelError(
            f"--out: '{old}' (where a build stopped mid-swap left the previous handouts) "
            f"{problem[0]}; remove it yourself"
        )
    if os.path.lexists(out):
        shutil.rmtree(old)
    else:
        _rename_noreplace(old, out)


class _SignalsBlocked:
    """SIGINT, SIGTERM and SIGHUP held back (not lost) for the duration of the block."""

    SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


def _keep_beside(built: Path, out: Path, what: str) -> None:
    """The new build, moved to a visible folder beside `out` (DIR.new, DIR.new-2, ...), and the
    one line that says so: `out` is left as it is."""
    for n in range(1, 1000):
        beside = out.with_name(f"{out.name}.new" + (f"-{n}" if n > 1 else ""))
        try:
            _rename_noreplace(built, beside)
        except FileExistsError:
            continue
        raise CostModelError(
            f"--out: '{out}' {what}; it is left as it is, and the new handouts are in '{beside}'"
        )
    raise CostModelError(f"--out: '{out}' {what}; it is left as it is")


def _discard_old(old: Path, out: Path, built: Path, scenario_file) -> None:
    """After the swap, the previous folder (now at `old`): removed if it still is exactly what
    its manifest lists; otherwise (a file was added or changed in the moment before the swap)
    put back at `out`, with the new build beside it, and nothing is deleted."""
    problem = _owned_problem(old)
    if problem is None:
        shutil.rmtree(old, ignore_errors=True)
        return
    if old == built:
        _exchange(built, out)
    else:
        _rename_noreplace(out, built)
        _rename_noreplace(old, out)
    _keep_beside(built, out, f"changed while the build ran (it {problem[0]})")


def _replace_dir(
    built: Path, out: Path, scenario_file: str | Path | None = None, existed: bool | None = None
) -> None:
    """Make `built` the folder `out`: afterwards `out` is the new complete folder; at every
    point before, it is the old complete one (or absent, if there was none). `out` is checked
    again first: if it appeared (`existed` false: it was absent when the build began) or no
    longer is what its manifest lists, the new build is kept beside it (CostModelError names
    where) and nothing is deleted."""
    umask = os.umask(0)
    os.umask(umask)
    built.chmod(0o777 & ~umask)  # mkdtemp made it private; a handout folder is for sharing
    if existed is None:
        existed = os.path.lexists(out)
    if not existed and os.path.lexists(out):
        _keep_beside(built, out, "appeared while the build ran")
    problem = replaceable(out, scenario_file)
    if problem:
        _keep_beside(built, out, f"changed while the build ran (it {problem})")
    _fault("before-swap")
    if not os.path.lexists(out):
        try:
            _rename_noreplace(built, out)
        except FileExistsError:
            _keep_beside(built, out, "appeared while the build ran")
        _fault("after-swap")
        return
    if _exchange(built, out):  # out is the new folder; built now holds the old one
        try:
            _fault("after-swap")
        finally:
            _discard_old(built, out, built, scenario_file)
        return
    old = _aside(out)
    with _SignalsBlocked():
        _rename_noreplace(out, old)
        try:
            _fault("between-renames")
            _rename_noreplace(built, out)
        except BaseException:
            _rename_noreplace(old, out)
            raise
    try:
        _fault("after-swap")
    finally:
        _discard_old(old, out, built, scenario_file)


# ------------------------------------------------------------------ workers


# The signals that arrived during the build, remembered. Raising is not enough: a library may
# swallow the exception. mpmath's `from_float` (every sympy.Float made from a float) wraps
# math.frexp in a bare `except:` and returns NaN, so a Ctrl-C that lands there was lost and the
# build went on, with a NaN in its numbers. `_checkpoint` raises a remembered one again.
_SIGNALLED: list[int] = []
#: The signals a build stops for: Ctrl-C (KeyboardInterrupt), SIGTERM and SIGHUP (Terminated).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_signal(signum, frame):
    _SIGNALLED.append(signum)
    if not stopping():  # a second one while the build stops: remembered, not raised again
        _raise_for(signum)


def _remember(signum, frame):
    """During the swap into place: remembered, not raised (the swap is not cut in half)."""
    _SIGNALLED.append(signum)


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def _checkpoint() -> None:
    """Raise the first signal that arrived during the build, if any, even if the exception it
    raised then was swallowed on the way."""
    if _SIGNALLED:
        _raise_for(_SIGNALLED[0])


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


def _spawn_workers(
    work: Path, jobs: int, running: list[subprocess.Popen], boot: dict[str, Any]
) -> None:
    """Start `jobs` worker processes (`python -m costmodel.present.handouts --worker`) into
    `running` (the caller stops them, whatever happens). Each starts its kernel and readies its
    page exporters (`boot`: {"notebooks", "editions", "no_input"}) at once, while the caller
    checks the scenario; none runs a notebook before `_run_all` hands it one."""
    (work / "boot.json").write_text(json.dumps(boot), encoding="utf-8")
    env = _worker_env(work)
    for slot in range(jobs):
        with open(work / f"worker-{slot}.log", "wb") as log:
            running.append(
                subprocess.Popen(
                    [sys.executable, "-m", "costmodel.present.handouts", "--worker", str(work)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    env=env,
                    start_new_session=True,
                    text=True,
                    bufsize=1,
                )
            )


def _run_all(
    stems: list[str],
    inputs: dict[str, Any],
    work: Path,
    progress: bool,
    running: list[subprocess.Popen],
    pages: dict[str, Any] | None = None,
    described: dict[str, dict[str, Any]] | None = None,
) -> dict[str, str | None]:
    """Run the notebooks on the workers `_spawn_workers` started, one notebook at a time each:
    a stem on its stdin, the same stem back on its stdout when the notebook is done. With
    `pages` ({"editions", "no_input", "banners"}), a worker also exports the executed notebook's
    page of each edition into work/pages/<edition>/ (the exports run in parallel, beside the
    other notebooks), and `described` receives each notebook's result ({"title", "summary",
    "seconds"}: the seconds its worker spent getting the kernel ready, running it and exporting
    its pages). Returns {stem: error or None}."""
    import selectors

    from tqdm import tqdm

    job = {"inputs": inputs, "pages": pages}
    tmp = work / "job.json.tmp"
    tmp.write_text(json.dumps(job), encoding="utf-8")
    tmp.replace(work / "job.json")  # complete before any worker reads it
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
            _checkpoint()
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
    from costmodel.present import runner

    runner.skip_iri_format_checks()
    boot = json.loads((Path(work) / "boot.json").read_text(encoding="utf-8"))
    kernel = runner.Kernel(boot["notebooks"])
    job = None
    try:
        kernel.launch()  # while the kernel starts, this worker readies what it needs
        import nbclient  # noqa: F401
        import nbformat

        for edition in boot.get("editions", []):  # templates compiled on a first, empty page
            _exporter(edition, boot.get("no_input", False)).from_notebook_node(
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
    title, summary = _describe(nb)
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


# ------------------------------------------------------------------ the build


#: The longest default folder name, in UTF-8 bytes (a file name has at most 255; the folder the
#: build makes beside it is 15 characters longer).
MAX_DEFAULT_NAME = 100


def default_out(scenario_file: str | None) -> str:
    """handouts/course, or handouts/<scenario file name>, made a safe folder name: letters
    (of any script) and digits kept, every other run of characters (a separator, a space, a
    control or format character) one `-`, no leading or trailing `.` or `-`, at most
    MAX_DEFAULT_NAME bytes. Two files of the same name in two folders share a default folder:
    the second is refused there (its manifest names the first), and needs its own --out."""
    if not scenario_file:
        return "handouts/course"
    stem = unicodedata.normalize("NFC", Path(scenario_file).stem)
    name = re.sub(r"[^\w.-]+", "-", stem).strip(".-")
    name = name.encode()[:MAX_DEFAULT_NAME].decode("utf-8", "ignore").rstrip(".-")
    return f"handouts/{name or 'scenario'}"


@contextlib.contextmanager
def _writing(out: Path):
    """An OSError while the build writes beside `out` or swaps it into place (a full disk, an
    immutable folder, a mount point): one line (CostModelError); `out` is as it was."""
    try:
        yield
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise CostModelError(
            f"--out: '{out}' cannot be written: {error.strerror or error}{where}; it is as it was"
        ) from None


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

    if edition not in (*EDITIONS, "both"):
        raise CostModelError(
            f"--edition: {edition!r} is not allowed; expected one of teacher, student, both"
        )
    from costmodel.present import runner

    runner.skip_iri_format_checks()
    editions = list(EDITIONS) if edition == "both" else [edition]
    if pdf:
        from costmodel.present import booklet

        booklet.chromium()  # before anything starts: say now if there is none
    stems = [p.stem for p in suite.sources()]
    if not stems:
        raise CostModelError(f"notebooks: none found in {suite.NOTEBOOKS}")
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(stems)))
    out = check_output(out, scenario_file)  # before anything starts
    existed = os.path.lexists(out) or os.path.lexists(_aside(out))
    main = threading.current_thread() is threading.main_thread()
    if main:
        handlers = {s: signal.getsignal(s) for s in SIGNALS}
        _SIGNALLED.clear()
        for signum, handler in handlers.items():
            if handler is not signal.SIG_IGN:  # as Python: ignored stays ignored (nohup)
                signal.signal(signum, _on_signal)
    box = work = printer = None
    running: list[subprocess.Popen] = []
    try:
        # The workers start their kernels, and the browser starts, while the scenario is
        # checked; no notebook runs, and nothing is written outside the temporary folder, until
        # it is accepted.
        sweep(tempfile.gettempdir(), "costmodel-handouts-")  # what killed builds left
        work = owned_tempdir("costmodel-handouts-")
        boot = {"notebooks": str(suite.NOTEBOOKS), "editions": editions, "no_input": no_input}
        _spawn_workers(work, jobs, running, boot)
        if pdf:
            printer = booklet.Printer()
        from costmodel.evaluate.account import account as evaluate_account
        from costmodel.inputs import scenario

        sc = scenario.resolve(scenario_file, overrides)
        account = evaluate_account(sc)
        inputs = user_layer(scenario_file, overrides)
        conventions = conventions_html()
        _checkpoint()  # nothing written outside the temporary folder after a Ctrl-C
        with _writing(out):
            out.parent.mkdir(parents=True, exist_ok=True)
            recover(out)
            # the build's folder, inside a folder of its own beside DIR that records its owner
            box = owned_tempdir(f".{out.name}{TMP_INFIX}", out.parent)
            built = box / "handouts"
            built.mkdir()
        banners = {ed: _banner(sc, account, inputs, ed) for ed in editions}
        pages = {"editions": editions, "no_input": no_input, "banners": banners}
        described: dict[str, dict[str, Any]] = {}
        if printer is not None:  # the browser started, or one line now, before any notebook
            printer.ready()
        clock["notebooks"] = time.perf_counter()
        errors = _run_all(stems, inputs, work, progress, running, pages, described)
        clock["pages"] = time.perf_counter()
        sections = [Section(stem, error=errors[stem]) for stem in stems]
        for section in sections:
            result = described.get(section.stem, {})
            section.seconds = result.get("seconds", {})
            if not section.error:
                section.title, section.summary = result.get("title", ""), result.get("summary", "")
        with _writing(out):
            booklets = _place_pages(sections, editions, work, built, out, sc, account, conventions)
        clock["booklets"] = time.perf_counter()
        _checkpoint()
        if booklets and printer is not None:
            with _writing(out):
                printer.print(booklets)
        clock["end"] = time.perf_counter()
        with _writing(out):  # the manifests, from the files as they are now
            for ed in editions[1:]:
                write_manifest(built / ed, scenario_file, sc["name"])
            write_manifest(built, scenario_file, sc["name"], builds=editions[1:])
        if main:  # from here on the build is done: a late signal does not cut the swap short
            for signum, handler in handlers.items():
                if handler is not signal.SIG_IGN:
                    signal.signal(signum, _remember)
        _checkpoint()  # the last moment a signal stops the build
        with _writing(out):
            _replace_dir(built, out, scenario_file, existed)
    finally:
        if main:  # a second Ctrl-C must not cut the clean-up short
            for signum in handlers:
                signal.signal(signum, signal.SIG_IGN)
        try:
            if printer is not None:
                printer.close()
            _stop(running)
            for folder in (box, work):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
        finally:
            if main:
                for signum, handler in handlers.items():
                    signal.signal(signum, handler)
    if timings is not None:
        marks = ["begin", "notebooks", "pages", "booklets", "end"]
        names = ["start", "notebooks", "pages", "booklets"]
        timings.update({name: clock[b] - clock[a] for name, a, b in zip(names, marks, marks[1:])})
        timings["total"] = time.perf_counter() - clock["begin"]
    return sections, out


def _place_pages(
    sections: list[Section],
    editions: list[str],
    work: Path,
    built: Path,
    out: Path,
    sc,
    account: dict[str, Any],
    conventions: str | None,
) -> list[tuple[list[Path], Path, str]]:
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
        if conventions:
            (here / CONVENTIONS_PAGE).write_text(conventions, encoding="utf-8")
        others = {e: ("student/" if e != editions[0] else "../") for e in editions if e != ed}
        (here / "index.html").write_text(
            index_html(sc, account, sections, ed, others), encoding="utf-8"
        )
        printed = [here / "index.html"] + [
            here / s.page for s in sections if (here / s.page).is_file()
        ]
        booklets.append((printed, here / "booklet.pdf", f"{printable(sc['name'])} ({ed})"))
    return booklets


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


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    sys.exit(_worker(sys.argv[2]))
