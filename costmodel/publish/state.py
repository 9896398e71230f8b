"""The program's state files, read by one reader that trusts nothing in them: the manifest of a
handouts folder (costmodel.publish.manifest), the owner record of a temporary folder
(.tempdirs) and the lab's record of what it wrote (.lab).

The program wrote each of them, but anyone who can write the folder can put anything at its
name: a symbolic link (to /dev/zero, a FIFO, someone else's file), a file of gigabytes, bytes
that are not UTF-8, or JSON nested thousands deep, on which json.loads raises RecursionError
(a 400 KB manifest of brackets stopped every build with a traceback). `read_json` reads at most
a bound of bytes, without following a link and without blocking, and answers `Foreign` for
anything but a small JSON document nested a few levels deep: the caller treats the file as
not the program's own, leaves it as it is (never deletes or rewrites it) and, where the user
must act, says so in one line.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

#: The deepest nesting a state file of the program has (a manifest: object, list, object,
#: value), with room to spare; anything deeper is not the program's.
MAX_DEPTH = 8


class Foreign(Exception):
    """The file is not a state file the program wrote; the message says why, as a phrase
    ("a symbolic link", "over 4,096 bytes", "not JSON")."""


def _read_bounded(path: Path, max_bytes: int) -> bytes:
    """At most max_bytes of the regular file at `path`, the link itself never followed and a
    FIFO never waited on; FileNotFoundError where nothing is there, Foreign for a link, another
    kind of file, or more bytes."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if os.path.islink(path):  # ELOOP from O_NOFOLLOW
            raise Foreign("a symbolic link") from None
        raise error
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Foreign("not a regular file")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise Foreign(f"over {max_bytes:,} bytes")
    return b"".join(chunks)


def _depth(value: Any) -> int:
    """How deep lists and objects nest in `value` (a scalar: 0), without recursion."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, level + 1) for child in children)
    return deepest


def read_json(path: str | Path, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in the file at `path`. FileNotFoundError (an OSError) where there is
    none; another OSError where it cannot be read; Foreign (saying why) for anything that is not
    the program's state: a symbolic link, not a regular file, over `max_bytes`, not UTF-8, not
    JSON (a number of over 4,300 digits included), nested deeper than `max_depth`."""
    data = _read_bounded(Path(path), max_bytes)
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Foreign("not UTF-8 text") from None
    except RecursionError:  # nested deeper than the decoder goes
        raise Foreign(f"nested deeper than {max_depth} levels") from None
    except ValueError:
        raise Foreign("not JSON") from None
    if _depth(value) > max_depth:
        raise Foreign(f"nested deeper than {max_depth} levels")
    return value
