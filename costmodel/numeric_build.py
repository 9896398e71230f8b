"""Write costmodel/derive/numeric.py, the numeric forms of the SymPy derivations
(costmodel.derive.numeric_forms.source): `make numeric`, or `python -m costmodel.numeric_build`.

It overwrites only a file it wrote (one that begins with the generated header), atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from costmodel.derive import numeric_forms
from costmodel.errors import CostModelError

TARGET = Path(__file__).resolve().parent / "derive" / "numeric.py"
HEADER = '"""GENERATED from the SymPy derivations'


def write(path: Path = TARGET) -> bool:
    """Write the generated source to `path`; returns whether the file changed. Refuses a file
    there that is not a generated one (it was not written by this command)."""
    text = numeric_forms.source()
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if not old.startswith(HEADER):
            raise CostModelError(
                f"target: {path} is not allowed (a file this command did not write); expected "
                "a generated numeric.py, or no file"
            )
        if old == text:
            return False
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def main() -> int:
    try:
        changed = write()
    except CostModelError as error:
        print(f"costmodel: error: {error}", file=sys.stderr)
        return 2
    print(f"{TARGET}: {'written' if changed else 'up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
