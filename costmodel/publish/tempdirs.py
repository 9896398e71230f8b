"""Temporary folders that say who made them, and the removal of those a killed process left.

A build makes temporary folders (its work folder in TMPDIR, the folder beside DIR it builds in,
the browser's); SIGKILL, a crash or a power cut leaves them behind. Each records its owner when
it is made: the PID and the process's start time (a later process with the same PID has another
start time). `sweep` removes the folders whose owner is gone, and nothing else: not a live
build's, not one without a record.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

#: In every temporary folder a build makes (its work folder, the folder beside DIR it builds
#: in, the browser's): the process that made it, by PID and start time. The next build removes
#: such a folder once that process is gone, and only then.
OWNER = ".costmodel-owner"


_STARTED: float | None = None


def _started() -> float:
    """This process's start time (psutil's), which tells it from a later one with its PID."""
    global _STARTED
    if _STARTED is None:
        import psutil

        _STARTED = psutil.Process().create_time()
    return _STARTED


def owned_tempdir(prefix: str, parent: str | Path | None = None) -> Path:
    """tempfile.mkdtemp, with the owner record (this process's PID and start time) in it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        tmp = folder / f"{OWNER}.tmp"
        tmp.write_text(json.dumps({"pid": os.getpid(), "started": _started()}), encoding="ascii")
        tmp.replace(folder / OWNER)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _owner_gone(folder: Path) -> bool:
    """True only if `folder` has an owner record and that process is gone (a process with its
    PID and another start time is another process). A folder without a readable record is
    never taken for a dead build's."""
    import psutil

    try:
        record = json.loads((folder / OWNER).read_text(encoding="ascii"))
        pid, started = int(record["pid"]), float(record["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE or abs(process.create_time() - started) > 1
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # not ours to see: alive
        return False


def sweep(parent: str | Path, prefix: str) -> None:
    """Remove the folders named prefix* in `parent` whose owner record names a process that is
    gone: what a build killed by SIGKILL (or a crash) left. Nothing else."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix) and entry.is_dir(follow_symlinks=False):
            if _owner_gone(Path(entry.path)):
                shutil.rmtree(entry.path, ignore_errors=True)
