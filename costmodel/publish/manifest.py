"""The manifest of a handouts folder, and what may replace a folder.

Every folder a build writes holds a manifest, `.costmodel-handouts`: every file the build wrote
there (relative path, size, sha256), the scenario (the resolved path of its file; none for the
course's), the nested builds (DIR/student/ of `--edition both`, a complete build with a manifest
of its own) and a digest of itself. A build replaces a folder only if it is empty or holds
exactly what its manifest lists (no file or folder more, none missing, none changed; nested
builds checked through their own manifests), names the same scenario, and is neither a mount
point nor immutable. A manifest is read by the state reader (costmodel.publish.state: bounded in
size and depth), and its paths and nested builds are bounded in depth too, as deep as a build
writes them and no deeper: a crafted folder (a manifest of nested brackets, builds nested 700
deep) is refused in one line, not a RecursionError.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from costmodel.publish.state import Foreign, read_json

#: In every folder a build writes: its manifest, the proof that the build wrote the folder
#: (every file with its size and sha256, the scenario, the nested builds; JSON, with a digest).
MARKER = ".costmodel-handouts"
WRITTEN_BY = "costmodel handouts"
MANIFEST_FORMAT = 2
MANIFEST_KEYS = {"written_by", "format", "scenario", "scenario_file", "files", "builds", "digest"}
MAX_MANIFEST_BYTES = 16 << 20
#: The deepest path a manifest may list (a build writes its files at the top of its folder: room
#: to spare), and how deep nested builds may nest (a build writes one, DIR/student/, in a folder
#: that may be nested itself); deeper is not a build's.
MAX_PATH_PARTS, MAX_NESTED = 16, 4
#: The inode flags (FS_IOC_GETFLAGS) that forbid replacing a folder or removing a file:
#: immutable (chattr +i) and append-only (chattr +a).
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
    return (
        path != MARKER
        and len(parts) <= MAX_PATH_PARTS
        and all(part not in ("", ".", "..") for part in parts)
    )


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
        body = read_json(marker, MAX_MANIFEST_BYTES)
    except (OSError, Foreign):
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


def ownership_problem(
    folder: Path, shown: str = "", mounts: set[str] | None = None, nested: int = 0
) -> str | None:
    """None if `folder` holds exactly what its manifest lists (no file or folder more, none
    missing, none changed; a nested build checked through its own manifest, recursively, at
    most MAX_NESTED deep), and nothing in it stops a rebuild from replacing it; otherwise the
    first problem, as a phrase naming the file ("holds my_notes.txt, which costmodel handouts
    did not write"). `nested`: how deep `folder` is in the build checked first."""
    if nested > MAX_NESTED:
        return (
            f"holds {shown}, a build nested {nested} deep in another, deeper than costmodel "
            f"handouts writes one"
        )
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
                    found = ownership_problem(Path(entry.path), f"{name}/", mounts, nested + 1)
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


def owned_problem(folder: Path) -> tuple[str, str] | None:
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


def other_scenario(folder: Path, scenario_file: str | Path | None) -> str | None:
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
    problem = owned_problem(folder)
    return problem[0] if problem else other_scenario(folder, scenario_file)
