"""A sweep's grid (evaluate.sweep.sweep) as CSV and as a plot, and the rule for the files they go to.

The CSV's first line is a comment (it starts with `# costmodel sweep`) whose cells name the
scenario and the conventions; then a header row and one row per point: the varied keys,
tokens_per_step, the figures (their paths in `costmodel report --format json`; fractions, full
precision) and `refused`. An empty figure is undefined (no measured throughput, a dense model) or
refused: `refused` then says why `costmodel report` would refuse the point, and none of its
figures is written. Every text cell goes through the csv writer (quoted where it has to be) and
`formats.spreadsheet_text` (a name such as `=HYPERLINK(...)` is shown, not run); the numbers are
written as they are.

A file is written atomically (a temporary file beside it, then a rename) and only where nothing
is, or over a file a sweep wrote: a CSV that starts with the comment line, a PNG or SVG that
carries `costmodel sweep` in its metadata. Anything else at the path (another file, a link, a
folder) is refused, never replaced. The path is checked again at the rename: a file that
appeared there while the grid was computed is never replaced (a hard link, which fails where a
name exists), and the sweep's own earlier file is replaced only if it is still the one checked.
The temporary file's name says whose it is (`.NAME.costmodel-sweep.HOST.PID.RANDOM.tmp`): one
that a killed sweep left is removed by the next sweep to the same path, once its process is gone.
"""

from __future__ import annotations

import csv
import errno
import io
import os
import re
import secrets
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from costmodel.errors import CostModelError
from costmodel.evaluate.sweep.sweep import Grid
from costmodel.formats import input_value, printable, shown, spreadsheet_text

MARKER = "costmodel sweep"
#: The first bytes of a CSV a sweep wrote.
CSV_START = f"# {MARKER}".encode()
#: Plot formats, by suffix.
PLOT_FORMATS = {".png": "png", ".svg": "svg"}
#: Lines of a plot at most: one per value of the second varied key (evenly chosen beyond).
MAX_LINES = 8
_SIGNATURE = {
    "png": lambda head: head.startswith(b"\x89PNG\r\n\x1a\n")
    and b"tEXtSoftware\x00" + MARKER.encode() in head,
    "svg": lambda head: f"<dc:title>{MARKER}</dc:title>".encode() in head,
    "csv": lambda head: head.startswith(CSV_START),
}


def _cell(values: np.ndarray) -> list[str]:
    """A column as CSV fields: integers as they are, floats in full (repr), NaN empty; text
    through `_text_field` (a few distinct values: each quoted once)."""
    if values.dtype.kind == "O":
        texts = values.tolist()
        quoted = {text: _text_field(text) for text in set(texts)}
        return [quoted[text] for text in texts]
    if values.dtype.kind == "i":
        return [str(v) for v in values.tolist()]
    return ["" if v != v else repr(v) for v in values.tolist()]


#: Rows turned into text at a time (a million-point grid is not held as strings all at once).
CHUNK_ROWS = 50_000


def csv_chunks(grid: Grid, name: str, conventions: str) -> Iterator[str]:
    """The grid as CSV text (see the module docstring), a few thousand rows at a time."""
    head = io.StringIO()
    writer = csv.writer(head, lineterminator="\n")
    # one line (a line break in the name is shown escaped); the name a cell of its own
    comment = f"{conventions}; empty: undefined, or refused"
    writer.writerow([f"# {MARKER}", spreadsheet_text(printable(name)), comment])
    writer.writerow([*grid.columns, "refused", *grid.extra])
    yield head.getvalue()
    reasons = grid.refused.tolist()
    quoted = {reason: _text_field(reason) for reason in set(reasons)}  # a few distinct ones
    for start in range(0, len(grid), CHUNK_ROWS):
        part = slice(start, start + CHUNK_ROWS)
        fields = [_cell(values[part]) for values in grid.columns.values()]
        fields.append([quoted[reason] for reason in reasons[part]])
        fields += [_cell(values[part]) for values in grid.extra.values()]
        # numbers need no quoting: joined, not through csv.writer (5 times faster)
        yield "".join(",".join(line) + "\n" for line in zip(*fields))


def csv_text(grid: Grid, name: str, conventions: str) -> str:
    """The whole CSV as one text."""
    return "".join(csv_chunks(grid, name, conventions))


def _text_field(text: str) -> str:
    """A text as a CSV field (quoted where it has to be, never a formula; an empty one empty)."""
    if not text:
        return ""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow([spreadsheet_text(text)])
    return buffer.getvalue()


def _lines(count: int) -> list[int]:
    """Which values of the second key get a line: all, or MAX_LINES evenly chosen."""
    if count <= MAX_LINES:
        return list(range(count))
    return sorted(set(np.linspace(0, count - 1, MAX_LINES).round().astype(int).tolist()))


def _lines_of(values: np.ndarray) -> np.ndarray:
    """(first key, second key) from the grid's N-d array: the first key along the rows, the
    second (if any) across the columns, the others at their first point."""
    if values.ndim == 1:
        return values[:, None]
    return values[(slice(None), slice(None)) + (0,) * (values.ndim - 2)]


#: What a plot draws (--plot-y): the column, the one drawn dashed beside it where it differs, the
#: axis label, the title's name, and the scale (percent of a fraction, or as it is).
PLOT_Y = {
    "mfu": ("mfu", "hfu", "MFU, % of peak_flops", "MFU", 100),
    "predicted_mfu": (
        "mfu_on_predicted_step",
        None,
        "MFU on the predicted step, % of peak_flops",
        "MFU on the predicted step",
        100,
    ),
    "predicted_step": ("time.predicted_seconds", None, "predicted step, s", "predicted step", 1),
}


def _series(grid: Grid, column: str | None, order: np.ndarray) -> np.ndarray | None:
    """A column (of the figures or the models') as (first key, second key), the first key's
    points in increasing order."""
    if column is None:
        return None
    values = grid.columns[column] if column in grid.columns else grid.extra[column]
    return _lines_of(values.reshape(tuple(len(axis.points) for axis in grid.axes)))[order]


def plot_bytes(grid: Grid, kind: str, y: str = "mfu") -> bytes:
    """`y` (PLOT_Y: MFU with HFU dashed where recompute makes it differ, MFU on the predicted
    step, or the predicted step) against the first varied key; one line per value of the
    second (MAX_LINES at most); the other keys at their first point. Refused points are gaps."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    column, dashed, ylabel, name, scale = PLOT_Y[y]
    axes = grid.axes
    order = np.argsort(axes[0].points, kind="stable")  # a list may be in any order
    main, other = _series(grid, column, order), _series(grid, dashed, order)
    x = axes[0].points[order]
    figure = Figure(figsize=(7, 4.5))
    ax = figure.add_subplot()
    with_other = other is not None and not np.allclose(main, other, equal_nan=True)
    rows = _lines(main.shape[1])
    for number, j in enumerate(rows):
        colour = f"C{number % 10}"
        label = (
            f"{axes[1].key} = {input_value(axes[1].points[j].item())}" if len(axes) > 1 else None
        )
        marker = "o" if len(x) <= 20 else None
        ax.plot(x, scale * main[:, j], color=colour, marker=marker, label=label)
        if with_other:
            ax.plot(x, scale * other[:, j], color=colour, marker=marker, linestyle="--")
    ax.set_xlabel(axes[0].key)
    ax.set_ylabel(ylabel + (" (HFU dashed)" if with_other else ""))
    if x[0] > 0 and x[-1] / x[0] >= 100:
        ax.set_xscale("log")
    fixed = [f"{a.key} = {input_value(a.points[0].item())}" for a in axes[2:]]
    title = f"costmodel sweep: {name} against {axes[0].key}"
    if len(axes) > 1 and len(rows) < len(axes[1].points):
        title += f"\n{len(rows)} of {len(axes[1].points)} values of {axes[1].key}"
    if fixed:
        title += "\n" + ", ".join(fixed)
    shown_points = main[:, rows]
    if np.isnan(shown_points).all():
        title += (
            "\nno point drawn: costmodel report refuses each (the CSV's column refused says why)"
        )
    elif np.isnan(shown_points).any():
        title += "\ngaps: points costmodel report refuses (the CSV's column refused says why)"
    if x[0] < x[-1]:
        ax.set_xlim(x[0], x[-1])
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    if len(axes) > 1:
        ax.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    metadata = {"Software": MARKER} if kind == "png" else {"Creator": MARKER, "Date": None}
    figure.savefig(buffer, format=kind, metadata=metadata)
    return buffer.getvalue()


def plot_kind(path: str) -> str:
    """png or svg, by the suffix of --plot's FILE (svg where it has none)."""
    suffix = Path(path).suffix.lower()
    kind = PLOT_FORMATS.get(suffix) if suffix else "svg"
    if kind is None:
        raise CostModelError(
            f"--plot: {shown(path)} is not allowed; expected a .svg or .png file, or a name "
            "without a suffix (SVG)"
        )
    return kind


@dataclass(frozen=True)
class Target:
    """A file a sweep may write: its path, the option that named it, what it holds (csv, png,
    svg), and the sweep's own file found there when it was checked (its identity: device,
    inode, size, modification time), or None where nothing was."""

    path: Path
    option: str
    kind: str
    found: tuple[int, ...] | None


def _identity(status: os.stat_result) -> tuple[int, ...]:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _ours(path: Path, kind: str) -> tuple[int, ...] | None:
    """The identity of the regular file at `path` if a sweep wrote it (its signature), else
    None. Opened without following a link or waiting on a FIFO that replaced the file."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = os.fstat(handle)
        head = os.read(handle, 4096) if stat.S_ISREG(status.st_mode) else b""
    except OSError:
        return None
    finally:
        os.close(handle)
    return _identity(status) if head and _SIGNATURE[kind](head) else None


def check_target(path: str, kind: str, option: str) -> Target:
    """Refuse a path a sweep may not write: its folder missing, or something there that a
    sweep did not write (see the module docstring)."""
    target = Path(path)
    if not target.name or not target.parent.is_dir():
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a file in an existing folder"
        )
    try:
        os.lstat(target)
    except FileNotFoundError:
        return Target(target, option, kind, None)
    except OSError as error:
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a path that can be read "
            f"({error.strerror})"
        ) from None
    found = _ours(target, kind)
    if found is None:
        raise CostModelError(
            f"{option}: {shown(path)} is not allowed; expected a new file or a {kind.upper()} "
            "a sweep wrote (it is there and costmodel sweep did not write it)"
        )
    return Target(target, option, kind, found)


def check_distinct(out: str, plot: str) -> None:
    """Refuse --out and --plot naming one file: the same path, the same file through a link
    in a folder (`y.svg` and `link/y.svg`), or two names of one file."""
    same = os.path.realpath(out) == os.path.realpath(plot)
    if not same:
        try:
            same = os.path.samefile(out, plot)
        except OSError:  # one is not there yet
            pass
    if same:
        raise CostModelError(
            f"--plot: {shown(plot)} is not allowed; expected another file than --out "
            f"({shown(out)} is the same file)"
        )


# ------------------------------------------------------------------ writing

#: The mark in a sweep's temporary file name, after the target's name.
TEMP_MARK = "costmodel-sweep"
#: The longest file name most file systems take, in bytes.
NAME_MAX = 255


def _temp_prefix(target: Path) -> str:
    """`.NAME.costmodel-sweep.HOST.` for `target` (HOST a checksum of this machine's name:
    a folder shared by several machines holds others' temporary files too); NAME cut to leave
    room for the rest within NAME_MAX bytes."""
    host = f"{zlib.crc32(os.uname().nodename.encode()):08x}"
    tail = f".{TEMP_MARK}.{host}."
    room = NAME_MAX - len(tail) - len(".4194304.0123456789ab.tmp") - 1
    name = os.fsdecode(os.fsencode(target.name)[:room])
    return f".{name}{tail}"


def _alive(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it exists, and is another user's
        return True
    return True


def remove_stale(target: Path) -> list[str]:
    """Remove the temporary files that a sweep to `target`, killed before its rename, left
    beside it: only names of the sweep's pattern for this target and this machine, regular
    files of this user, whose process is gone. Anything else is left. Their names."""
    prefix = _temp_prefix(target)
    pattern = re.compile(r"([1-9][0-9]{0,6})\.[0-9a-f]{12}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = entry.name.startswith(prefix) and pattern.fullmatch(entry.name[len(prefix) :])
        if not match or _alive(int(match[1])):
            continue
        try:
            status = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(status.st_mode) and status.st_uid == os.getuid():
                os.unlink(entry.path)
                removed.append(entry.name)
        except OSError:  # gone already (another sweep removed it), or not ours to remove
            continue
    return removed


def _new_temp(target: Path) -> tuple[int, Path]:
    """A new temporary file beside `target`, open for writing, with the mode open() would
    give it (0666 less the umask)."""
    prefix = _temp_prefix(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    while True:
        tmp = target.parent / f"{prefix}{os.getpid()}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


#: Errors of a file system without hard links (FAT, some FUSE and network file systems).
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


def _left(target: Target, what: str) -> CostModelError:
    return CostModelError(
        f"{target.option}: {str(target.path)!r} {what} while the sweep ran; it is left as "
        "it is, and nothing was written there"
    )


def _put_in_place(tmp: Path, target: Target) -> None:
    """The rename, with the target checked again: nothing there (a hard link, which never
    replaces a name), or still the sweep's own file found at the check."""
    path = target.path
    if target.found is None:
        try:
            os.link(tmp, path, follow_symlinks=False)
            return
        except FileExistsError:
            raise _left(target, "appeared") from None
        except OSError as error:
            if error.errno not in _NO_LINKS:
                raise
        if os.path.lexists(path):  # no hard links here: a check, then the rename
            raise _left(target, "appeared")
        os.rename(tmp, path)
        return
    try:
        now = os.lstat(path)
    except FileNotFoundError:
        now = None
    if now is None or not stat.S_ISREG(now.st_mode) or _identity(now) != target.found:
        raise _left(target, "changed (it is no longer the file a sweep wrote, checked before)")
    os.replace(tmp, path)


def write_atomically(target: Target, data: Iterable[bytes]) -> None:
    """`data` (its pieces in order) to a temporary file beside the target, then put in place
    (`_put_in_place`). A write that fails (a full disk, a read-only folder) is one line
    (CostModelError); the temporary file is removed however the write ends."""
    remove_stale(target.path)
    tmp = None
    try:
        handle, tmp = _new_temp(target.path)
        with os.fdopen(handle, "wb") as out:
            for piece in data:
                out.write(piece)
        _put_in_place(tmp, target)
    except OSError as error:
        raise CostModelError(
            f"{target.option}: {str(target.path)!r} cannot be written: "
            f"{error.strerror or error}; it is as it was"
        ) from None
    finally:
        if tmp is not None:
            try:  # after a hard link, the second name; after a failure, the file
                os.unlink(tmp)
            except OSError:  # renamed into place; or left, and the next sweep removes it
                pass
