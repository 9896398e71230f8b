"""The swap: a complete new build replaces the output folder in one step.

Pages are built in a hidden sibling folder that replaces DIR in one atomic exchange (renameat2
RENAME_EXCHANGE; where the file system lacks it, two renames with the signals blocked in between,
and a folder left aside by a crash, once its manifest checks, is put back by the next build). DIR
is checked again just before: a folder that appeared meanwhile, or that no longer matches its
manifest, is left as it is, and the new build is put beside it (DIR.new) and named in the
one-line error; the new build never replaces what appeared (RENAME_NOREPLACE), and the previous
one is removed only once its manifest checks again. The new folder takes the mode, owner and
group of the folder it replaces (an empty folder made for the handouts, shared with a group:
0o2770, setgid), where there is one.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import stat
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.publish.manifest import owned_problem, replaceable

#: Linux renameat2 flags.
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def fault(step: str) -> None:
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


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (RENAME_EXCHANGE). False where unsupported."""
    return _renameat2(a, b, RENAME_EXCHANGE)


def rename_noreplace(src: Path, dst: Path) -> None:
    """Rename, never replacing what is at `dst` (plain rename() silently replaces an empty
    folder): FileExistsError if something is there. RENAME_NOREPLACE; where it is missing, a
    check, then the rename."""
    if _renameat2(src, dst, RENAME_NOREPLACE):
        return
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def aside(out: Path) -> Path:
    return out.with_name(f".{out.name}.old")


def recover(out: Path) -> None:
    """Put back an old folder that a crash left aside between the two renames of a swap, or
    remove it if the swap had completed: only once its manifest shows that it is exactly what a
    build wrote (otherwise CostModelError, and it is left as it is)."""
    old = aside(out)
    if not os.path.lexists(old):
        return
    problem = owned_problem(old)
    if problem:
        raise CostModelError(
            f"--out: '{old}' (where a build stopped mid-swap left the previous handouts) "
            f"{problem[0]}; remove it yourself"
        )
    if os.path.lexists(out):
        shutil.rmtree(old)
    else:
        rename_noreplace(old, out)


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
            rename_noreplace(built, beside)
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
    problem = owned_problem(old)
    if problem is None:
        shutil.rmtree(old, ignore_errors=True)
        return
    if old == built:
        exchange(built, out)
    else:
        rename_noreplace(out, built)
        rename_noreplace(old, out)
    _keep_beside(built, out, f"changed while the build ran (it {problem[0]})")


def _keep_attributes(built: Path, out: Path) -> None:
    """`built` gets the mode, owner and group of the folder at `out` that it is about to
    replace (an empty folder someone made for the handouts keeps what they gave it: a group,
    setgid, no access for others); nothing where `out` is not a folder. The owner as far as
    this user may give it (root: any; another user: a group of theirs, not an owner)."""
    try:
        found = os.stat(out, follow_symlinks=False)
    except OSError:
        return
    if not stat.S_ISDIR(found.st_mode):
        return
    for uid in (found.st_uid, -1):
        try:
            os.chown(built, uid, found.st_gid, follow_symlinks=False)
            break
        except OSError:
            continue
    os.chmod(built, stat.S_IMODE(found.st_mode))  # after chown, which may clear setgid


def replace_dir(
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
    _keep_attributes(built, out)
    fault("before-swap")
    if not os.path.lexists(out):
        try:
            rename_noreplace(built, out)
        except FileExistsError:
            _keep_beside(built, out, "appeared while the build ran")
        fault("after-swap")
        return
    if exchange(built, out):  # out is the new folder; built now holds the old one
        try:
            fault("after-swap")
        finally:
            _discard_old(built, out, built, scenario_file)
        return
    old = aside(out)
    with _SignalsBlocked():
        rename_noreplace(out, old)
        try:
            fault("between-renames")
            rename_noreplace(built, out)
        except BaseException:
            rename_noreplace(old, out)
            raise
    try:
        fault("after-swap")
    finally:
        _discard_old(old, out, built, scenario_file)
