"""`make lab`: read the notebooks in JupyterLab without touching their sources.

The notebooks are copied into a scratch folder (build/lab/ in a checkout, or the folder given)
and Lab opens there, 01 first:

- only the executed .ipynb are copied, without jupytext's pairing metadata: saving, or Lab's
  autosave, writes the copy and never the paired .py or the stored .ipynb (which the tests
  compare);
- the reader's work is kept: a copy is written only where none is, or where the one there is
  still what the lab wrote (its sha256 is recorded in the folder's `.costmodel-lab.json`); a
  notebook the reader changed, or one the lab did not write, is never overwritten, and nothing
  in the folder is ever deleted; nothing is written through a symbolic link, and a record the
  lab did not write (read by costmodel.publish.state: bounded, never a RecursionError) is
  refused in one line and left as it is;
- the folder is refused where `handouts --out` would be (output.check_place: the project's
  sources, `tests/` among them, the working directory, a symbolic link), and where Lab would
  write its settings through a symbolic link (`.settings/`);
- a Markdown cell filled at execution (a template, costmodel/present/prose.py) becomes a code
  cell that fills it again (`markdown_cells.live`), tagged `remove-input`: a reader's own
  numbers reach the prose too;
- the rendering-only code cells (tagged `remove-input`) are collapsed
  (`jupyter.source_hidden`): the page opens as prose, equations, tables and plots, with the code
  one click away on the cell's left bar; every other cell stays as it is;
- run as root (a container), Lab needs --allow-root: it is added;
- Lab runs as a child with a runtime folder of its own (JUPYTER_RUNTIME_DIR: the server's token
  files and the kernels' connection keys), removed when Lab ends, however it ends;
- run as `make lab` (`process_main`), the command line's signal handlers come first, before
  the imports: a Ctrl-C in its first moments is one line, not a traceback.

A reader tries their own numbers in the parameters cell (the Markdown cell above it says which
keys), then restarts the kernel and runs all.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

from costmodel.errors import (
    STOPPED,
    CostModelError,
    Terminated,
    catch_signals,
    ignore_signals,
    raise_unreported,
)
from costmodel.formats import printable, shown
from costmodel.publish import suite
from costmodel.publish.state import Foreign, read_json

HIDDEN_INPUT = "remove-input"
#: What the lab wrote in the scratch folder: each file's path (relative) and sha256.
MANIFEST = ".costmodel-lab.json"
#: The most of MANIFEST that is read (one is about 2 KB): a larger file is not the lab's.
MAX_RECORD_BYTES = 1 << 20
#: Where Lab keeps its settings, in the scratch folder (see `lab_command`).
SETTINGS_DIR = ".settings"
#: The signals that stop Lab (each forwarded to it as SIGTERM, its clean stop).
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: Lab settings for the scratch copy: no prompt about fetching Jupyter news over the network;
#: every cell of a notebook in the page (windowing off: the notebooks are a few dozen cells, and
#: the browser's find then searches the whole notebook, not only the cells in view).
SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": '{"fetchNews": "false"}',
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": '{"windowingMode": "none"}',
}


class Scratch(NamedTuple):
    notebooks: list[Path]  # every notebook in the folder, in the suite's order
    kept: list[str]  # files there the reader changed (or the lab did not write): not replaced


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _written(folder: Path) -> dict[str, str]:
    """What the lab wrote in `folder` earlier (path -> sha256), from its record; nothing if
    there is no record (then every file there counts as the reader's). A record the lab did not
    write (a link, too large, not JSON, nested, another shape) is CostModelError, one line: it
    is left as it is, and the lab does not write over it."""
    path = folder / MANIFEST
    try:
        record = read_json(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return {}
    except Foreign as why:
        record, reason = None, str(why)
    else:
        reason = "not the lab's format"
    written = record.get("written") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or set(record) != {"written"}
        or not isinstance(written, dict)
        or not all(isinstance(v, str) for v in written.values())
    ):
        raise CostModelError(
            f"--dir: {shown(str(path), 200)} is not the record the lab writes ({reason}); "
            "expected the lab's own: remove it, or choose another folder"
        )
    return dict(written)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_folder(folder: Path, parts: list[str]) -> int | None:
    """A descriptor of folder/parts[0]/parts[1]/..., each made where missing; None where one of
    them is a symbolic link or not a folder (never followed: nothing is written through it)."""
    fd = os.open(folder, _FOLDER)
    for part in parts:
        try:
            try:
                os.mkdir(part, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(part, _FOLDER, dir_fd=fd)
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            inner = None
        finally:
            os.close(fd)
        if inner is None:
            return None
        fd = inner
    return fd


def _digest_at(fd: int, name: str) -> str | None:
    """The sha256 of the regular file `name` in the folder `fd`; "" where there is nothing;
    None for anything else (a symbolic link, a folder, a FIFO: the reader's)."""
    try:
        file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        return ""
    except OSError as error:
        if error.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(file, "rb") as stream:
        if not stat.S_ISREG(os.fstat(file).st_mode):
            return None
        digest = hashlib.sha256()
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _replace_at(fd: int, name: str, data: bytes) -> None:
    """Write `data` to `name` in the folder `fd` atomically (a temporary file beside it, then a
    rename over it), never through a symbolic link."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(tmp, flags, 0o600, dir_fd=fd), "wb") as out:
            out.write(data)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise


def _write_ours(folder: Path, name: str, data: bytes, written: dict[str, str]) -> bool:
    """Write `data` to folder/name unless the file there is the reader's: anything but a
    regular file, a file whose content is neither `data` nor what the lab wrote there last, or
    a file under a symbolic link (the lab writes nothing outside the folder through one).
    Returns whether the file now holds `data`."""
    *parents, base = name.split("/")
    fd = _open_folder(folder, parents)
    if fd is None:
        return False
    try:
        digest, current = _sha256(data), _digest_at(fd, base)
        if current is None or current not in ("", digest, written.get(name)):
            return False
        if current != digest:
            _replace_at(fd, base, data)
    finally:
        os.close(fd)
    written[name] = digest
    return True


def _notebook_copy(source: Path) -> bytes:
    """The executed notebook of `source`, unpaired, its rendering-only cells collapsed."""
    import nbformat

    from costmodel.publish.markdown_cells import live, template_of

    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    nb.metadata.pop("jupytext", None)  # no pairing: Lab saves the .ipynb alone
    # a Markdown cell filled with the course's numbers fills again with the reader's
    nb.cells = [live(c) if template_of(c) is not None else c for c in nb.cells]
    for cell in nb.cells:
        if cell.cell_type == "code" and HIDDEN_INPUT in cell.metadata.get("tags", []):
            cell.metadata.setdefault("jupyter", {})["source_hidden"] = True
    text = nbformat.writes(nb)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def scratch_copy(target: Path) -> Scratch:
    """Copy the executed notebooks into `target`, unpaired, with the rendering-only cells
    collapsed, and Lab's settings into target/.settings/. A file already there is replaced
    only if it is what the lab wrote there before (by content); the others are kept. Nothing is
    written through a symbolic link, and a record (MANIFEST) the lab did not write is left as
    it is (CostModelError)."""
    target.mkdir(parents=True, exist_ok=True)
    _check_settings(target)
    written = _written(target)
    files = {f"{SETTINGS_DIR}/{name}": (text + "\n").encode() for name, text in SETTINGS.items()}
    notebooks = []
    for source in suite.sources():
        name = source.with_suffix(".ipynb").name
        files[name] = _notebook_copy(source)
        notebooks.append(target / name)
    kept = [name for name, data in files.items() if not _write_ours(target, name, data, written)]
    record = {"written": dict(sorted(written.items()))}
    fd = _open_folder(target, [])
    assert fd is not None  # the folder itself, resolved: not a link
    try:
        _replace_at(fd, MANIFEST, (json.dumps(record, indent=1) + "\n").encode())
    finally:
        os.close(fd)
    return Scratch(notebooks, kept)


def _check_settings(target: Path) -> None:
    """CostModelError (one line) if Lab would write its settings outside `target`: its settings
    folder is a symbolic link, or not a folder, or holds one (Lab writes through them)."""
    settings = target / SETTINGS_DIR
    found, pending = None, [settings]
    while pending and found is None:  # without recursion: the reader's folders may nest deep
        folder = pending.pop()
        if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
            found = folder
        elif folder.is_dir():
            with os.scandir(folder) as entries:
                for entry in sorted(entries, key=lambda e: e.name, reverse=True):
                    if entry.is_symlink():
                        found = Path(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        pending.append(Path(entry.path))
    if found is not None:
        what = "a symbolic link" if found.is_symlink() else "not a folder"
        raise CostModelError(
            f"--dir: {shown(str(found), 200)} is {what}; expected {SETTINGS_DIR}/ to be a "
            "folder without symbolic links (Lab writes its settings there): remove it, or "
            "choose another folder"
        )


def lab_command(folder: Path, first: Path, extra: list[str]) -> list[str]:
    """The `jupyter lab` command line for the scratch folder, opening `first`, with the
    settings in the scratch folder's .settings/ (see `scratch_copy`). The URL the server prints
    opens `first` too (its default URL; without it the printed URL opened the Launcher)."""
    opened = first.relative_to(folder).as_posix() if first.is_relative_to(folder) else first.name
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={folder}",
        f"--LabApp.user_settings_dir={folder / SETTINGS_DIR}",
        f"--LabApp.default_url=/lab/tree/{quote(opened)}",
        *extra,
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    command.append(str(first))  # the server resolves it from its working directory
    return command


def default_folder() -> Path:
    root = suite.ROOT
    if (root / "pyproject.toml").is_file():
        return root / "build" / "lab"
    return Path.cwd() / "costmodel-lab"


def scratch_folder(given: Path) -> Path:
    """The scratch folder, made absolute, or CostModelError (one line) if it cannot be one:
    what `handouts --out` refuses (output.check_place: a symbolic link or a loop of them, the
    working directory or a folder around it, the project's sources: the notebooks, the
    package, tests/ ...), a file, a path under a file."""
    from costmodel.publish.output import check_place

    try:
        folder = check_place(given, "--dir")
        if folder.exists() and not folder.is_dir():
            raise CostModelError(f"--dir: {shown(str(folder), 200)} is a file; expected a folder")
        above = next(p for p in folder.parents if p.exists())
    except OSError as error:  # a name too long, a folder that cannot be read
        raise CostModelError(
            f"--dir: {shown(str(given), 200)} cannot be used ({error.strerror or error}); "
            "expected a folder path"
        ) from None
    if not above.is_dir():
        raise CostModelError(
            f"--dir: {shown(str(folder), 200)} cannot be made: {shown(str(above), 200)} is a "
            "file; expected a folder"
        )
    return folder


def _terminal_interrupts_lab() -> bool:
    """Whether a Ctrl-C typed at a terminal reaches Lab as well: stdin is the terminal and
    this process group is in its foreground (Lab then asks to confirm, as it always does)."""
    try:
        return os.isatty(0) and os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _stop_kernels(runtime: Path) -> None:
    """Stop the kernels whose connection file is in `runtime` (a Lab that ended without
    stopping them: one killed, or interrupted without a terminal)."""
    import psutil

    mine = str(runtime) + os.sep
    kernels = []
    for process in psutil.process_iter(["cmdline"]):
        if any(arg.startswith(mine) for arg in process.info["cmdline"] or ()):
            kernels.append(process)
    for kernel in kernels:
        try:
            kernel.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kernels, timeout=3)
    for kernel in alive:
        try:
            kernel.kill()
        except psutil.Error:
            pass


def run_lab(command: list[str]) -> int:
    """Run Lab as a child, with a runtime folder of its own (its token files and the kernels'
    connection keys), and remove that folder when Lab ends, however it ends. SIGTERM and SIGHUP,
    and SIGINT without a terminal, are forwarded to Lab as SIGTERM (its clean stop; a SIGINT
    without a terminal would end it without removing its files). Returns the exit status:
    128 + the signal when one stopped it."""
    runtime = Path(tempfile.mkdtemp(prefix="costmodel-lab-"))
    child: list[subprocess.Popen] = []
    received: list[int] = []

    def stop(signum, frame) -> None:
        if signum == signal.SIGINT and _terminal_interrupts_lab():
            return  # the terminal delivered it to Lab too
        received.append(signum)
        if child:
            child[0].send_signal(signal.SIGTERM)

    previous = {s: signal.getsignal(s) for s in STOPS}
    try:
        for signum, handler in previous.items():
            if handler is not signal.SIG_IGN:  # ignored stays ignored, as for Lab itself
                signal.signal(signum, stop)
        child.append(
            subprocess.Popen(command, env={**os.environ, "JUPYTER_RUNTIME_DIR": str(runtime)})
        )
        if received:
            child[0].send_signal(signal.SIGTERM)
        code = child[0].wait()
    finally:
        if child and child[0].poll() is None:
            child[0].terminate()
            try:
                child[0].wait(10)
            except subprocess.TimeoutExpired:
                child[0].kill()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _stop_kernels(runtime)
        shutil.rmtree(runtime, ignore_errors=True)
    if received:
        return 128 + received[0]
    return 128 - code if code < 0 else code


def build_parser() -> argparse.ArgumentParser:
    """The lab's options (docs/cli.md is generated from them); what it does not know goes on to
    `jupyter lab` (main: parse_known_args)."""
    parser = argparse.ArgumentParser(
        prog="python -m costmodel.publish.lab",
        description="open a scratch copy of the notebooks in JupyterLab, 01 first",
        epilog="Any other argument is passed on to jupyter lab.",
    )
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (build/lab)")
    parser.add_argument(
        "--print-command", action="store_true", help="copy, print the command, do not start Lab"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    try:
        folder = scratch_folder(args.dir or default_folder())
        try:
            scratch = scratch_copy(folder)
        except OSError as error:
            raise CostModelError(
                f"--dir: {shown(str(folder), 200)} cannot be written "
                f"({error.strerror or type(error).__name__}); expected a folder you can write"
            ) from None
    except CostModelError as error:
        print(f"costmodel: error: {printable(error)}", file=sys.stderr)
        return 2
    command = lab_command(folder, scratch.notebooks[0], extra)
    print(f"notebooks copied to {folder} (the sources are not touched)")
    if scratch.kept:
        print(
            "kept, not overwritten (changed since the lab wrote them, or not the lab's): "
            f"{', '.join(scratch.kept)}; delete one to get the course's copy back"
        )
    if args.print_command:
        print(" ".join(command))
        return 0
    if shutil.which("jupyter") is None and not (Path(sys.executable).parent / "jupyter").exists():
        print("costmodel: error: jupyterlab is not installed (make venv)", file=sys.stderr)
        return 2
    return run_lab(command)


def process_main(argv: list[str] | None = None) -> int:
    """`make lab` (`python -m costmodel.publish.lab`): the command line's signal handlers
    (costmodel.errors.catch_signals) installed first, before the lab imports what it needs
    (nbformat and nbclient: about a second), so that Ctrl-C, SIGTERM or SIGHUP at any moment
    ends in one line and 128 + the signal's number, not a traceback; once main has returned
    they are ignored (the process is ending)."""
    try:
        try:
            catch_signals()
            code = main(argv)
            raise_unreported()  # a stop a finalizer dropped (costmodel.errors._unreported)
            return code
        finally:
            ignore_signals()
    except (KeyboardInterrupt, Terminated) as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        print(f"costmodel: {STOPPED[signum]}", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(process_main())
