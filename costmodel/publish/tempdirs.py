"""Temporary folders that say who made them, and the removal of those a killed process left.

A build makes temporary folders (its work folder in TMPDIR, the folder beside DIR it builds in,
the browser's); SIGKILL, a crash or a power cut leaves them behind. Each records its owner when
it is made: the PID, the process's start time (a later process with the same PID has another
start time) and the host's name. `sweep` removes the folders whose owner is gone, and nothing
else: not a live build's, not one without a record, not one whose record is malformed (any
local user can make a folder of that name in the shared temporary folder: a record with PID -1,
or nested JSON, stopped every build), not another user's, and not one made on another host (a
temporary folder shared over the network: the process may be alive there).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import tempfile
from pathlib import Path

from costmodel.publish.state import Foreign, read_json

#: In every temporary folder a build makes (its work folder, the folder beside DIR it builds
#: in, the browser's): the process that made it, by PID, start time and host name (JSON). The
#: next build removes such a folder once that process is gone, and only then.
OWNER = ".costmodel-owner"
#: The most a record is read of (one is about 80 bytes): a larger file is not a record.
MAX_RECORD_BYTES = 4096
#: The largest PID Linux gives (pid_max is at most 2**22).
MAX_PID = 1 << 22


_STARTED: float | None = None


def _started() -> float:
    """This process's start time (psutil's), which tells it from a later one with its PID."""
    global _STARTED
    if _STARTED is None:
        import psutil

        _STARTED = psutil.Process().create_time()
    return _STARTED


def owned_tempdir(prefix: str, parent: str | Path | None = None) -> Path:
    """tempfile.mkdtemp, with the owner record (this process's PID, its start time and the
    host's name) in it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        tmp = folder / f"{OWNER}.tmp"
        record = {"pid": os.getpid(), "started": _started(), "host": socket.gethostname()}
        tmp.write_text(json.dumps(record), encoding="ascii")
        tmp.replace(folder / OWNER)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _owner(folder: Path) -> tuple[int, float] | None:
    """The PID and start time the owner record of `folder` names, if the record is one this
    user's build wrote on this host; otherwise None (the folder is not a dead build's to
    remove): no record, a link, a file too large or not JSON, a field missing, added or of the
    wrong type, a PID no process can have, another host's, another user's folder."""
    try:
        if folder.lstat().st_uid != os.geteuid():
            return None
        record = read_json(folder / OWNER, MAX_RECORD_BYTES)
    except (OSError, Foreign):
        return None
    if not isinstance(record, dict) or set(record) != {"pid", "started", "host"}:
        return None
    pid, started, host = record["pid"], record["started"], record["host"]
    if type(pid) is not int or not 0 < pid <= MAX_PID:
        return None
    if type(started) not in (int, float) or not (math.isfinite(started) and started > 0):
        return None
    if not isinstance(host, str) or host != socket.gethostname():
        return None
    return pid, float(started)


def _owner_gone(folder: Path) -> bool:
    """True only if `folder` has an owner record (`_owner`) and that process is gone (a process
    with its PID and another start time is another process). A folder without a valid record
    is never taken for a dead build's."""
    import psutil

    owner = _owner(folder)
    if owner is None:
        return False
    pid, started = owner
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE or abs(process.create_time() - started) > 1
    except psutil.NoSuchProcess:
        return True
    except (psutil.Error, ValueError, OverflowError):  # not ours to see: alive
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
