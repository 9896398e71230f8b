"""The output folder rule: where a build may write, checked before any notebook runs.

`check_output` refuses, with one line naming the first file at fault, a folder that is not
empty and does not hold exactly what its manifest lists (costmodel.publish.manifest), or that
holds another scenario's build; a path that is not a folder, a mount point, an immutable folder,
the working directory or a folder that contains it, the project's own sources, and a place where
a folder cannot be made and renamed (a probe: read-only, a name too long, a full disk). The
temporary folders that dead builds left beside it are removed first (only those whose owner is
gone, costmodel.publish.tempdirs). `check_place`, the places no command writes a folder of its
own, is `lab --dir`'s check too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import unicodedata
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.publish import suite
from costmodel.publish.manifest import other_scenario, owned_problem
from costmodel.publish.pages import EDITIONS
from costmodel.publish.swap import aside, rename_noreplace
from costmodel.publish.tempdirs import owned_tempdir, sweep

#: The folder beside DIR that a build builds in: `.DIR.tmp-XXXXXXXX`, the longest name a build
#: gives anything beside DIR (the probe makes one of that length).
TMP_INFIX = ".tmp-"
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
def writing(out: Path):
    """An OSError while the build writes beside `out` or swaps it into place (a full disk, an
    immutable folder, a mount point): one line (CostModelError); `out` is as it was."""
    try:
        yield
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise CostModelError(
            f"--out: '{out}' cannot be written: {error.strerror or error}{where}; it is as it was"
        ) from None


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


def check_place(given: Path, option: str = "--out") -> Path:
    """`given` made absolute, or CostModelError (one line, naming `option`) if it is a place no
    command writes a folder of its own: a symbolic link (or a loop of them), the working
    directory or a folder that contains it, the project's own sources (or a folder inside or
    around them). `handouts --out` and `lab --dir` refuse the same places."""
    if given.is_symlink():
        raise CostModelError(f"{option}: '{given}' is a symbolic link; expected a folder path")
    try:
        target = given.resolve()
    except RuntimeError:  # Python 3.11's resolve() on a loop of symbolic links
        raise CostModelError(
            f"{option}: '{given}' is a symbolic link loop; expected a folder path"
        ) from None
    cwd = Path.cwd().resolve()
    if _is_within(cwd, target):
        what = "is the working directory" if target == cwd else "contains the working directory"
        raise CostModelError(f"{option}: '{target}' {what}; expected a folder of its own")
    root = suite.ROOT.resolve()
    if (root / "pyproject.toml").is_file() and _is_within(root, target):
        raise CostModelError(
            f"{option}: '{target}' contains the project's sources ({root}); "
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
                f"{option}: '{target}' {where} {what} ({folder}); expected a folder of its own"
            )
    return target


def _check_output(given: Path, scenario_file: str | Path | None) -> Path:
    target = check_place(given)
    if target.exists() and not target.is_dir():
        raise CostModelError(
            f"--out: '{target}' exists and is not a folder; expected a new "
            f"folder or one that costmodel handouts wrote"
        )
    sweep(target.parent, f".{target.name}{TMP_INFIX}")  # what dead builds left beside it
    if target.is_dir():
        for edition in EDITIONS[1:]:
            sweep(target, f".{edition}{TMP_INFIX}")
    outside = aside(target)
    problem = owned_problem(outside)
    if problem:
        raise CostModelError(
            f"--out: '{outside}' (where a build stopped mid-swap left the previous handouts) "
            f"{problem[0]}; remove it yourself"
        )
    current = target if target.exists() or not os.path.lexists(outside) else outside
    problem = owned_problem(current)
    if problem:
        raise CostModelError(f"--out: '{current}' {problem[0]}; {problem[1]}")
    other = other_scenario(current, scenario_file)
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
        rename_noreplace(probe, moved)
        probe = moved
    except OSError as error:
        raise CostModelError(
            f"--out: '{target}' cannot be written: making a folder in "
            f"'{parent}' failed ({error.strerror or error})"
        ) from None
    finally:
        if probe is not None:  # the probe, never what was at the name it was renamed to
            shutil.rmtree(probe, ignore_errors=True)
