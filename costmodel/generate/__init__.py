"""The generators: programs run at development time (`make numeric`, `make docs`), never when a
user runs costmodel. Each writes a file that the runtime layers read (or the docs show), from a
home elsewhere, and a test fails when that file is stale:

- `costmodel.generate.numeric`: costmodel/derive/numeric.py, the numeric forms of the SymPy
  derivations (their registry: costmodel.derive.numeric_forms);
- `costmodel.generate.course`: costmodel/inputs/course_scenario.py, the course's scenario file as
  its safe YAML loader reads it;
- `costmodel.generate.router`: costmodel/evaluate/levers/router_table.py, the router simulation's
  results for the scenarios' experts;
- `costmodel.generate.docs`: docs/scenario-keys.md, docs/json-fields.md, docs/cli.md and
  docs/gpus.md (the last two by `costmodel.generate.reference`).

No runtime layer (derive, inputs, evaluate, present, publish, the command line) imports this
package (tests/project/test_layers.py); it imports them. `write_generated` is the rule each keeps:
a file is overwritten only if a generator wrote it, atomically."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from costmodel.errors import CostModelError

#: The package's folder (costmodel/), where the generated modules live.
PACKAGE = Path(__file__).resolve().parent.parent


def write_generated(path: Path, text: str, header: str, what: str) -> bool:
    """Write `text` to `path` atomically, keeping the file's permissions (a new file gets
    0644); returns whether the file changed. Refuses a file there that does not begin with
    `header` (a generated `what` that this project's commands wrote)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if not old.startswith(header):
            raise CostModelError(
                f"target: {path} is not allowed (a file this command did not write); expected "
                f"a generated {what}, or no file"
            )
        if old == text:
            return False
    handle, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def run(target: Path, writer) -> int:
    """A generator's command: `writer()` writes `target`; one line on stderr says whether it
    changed; a refusal is one line and exit status 2."""
    try:
        changed = writer()
    except CostModelError as error:
        print(f"costmodel: error: {error}", file=sys.stderr)
        return 2
    print(f"{target}: {'written' if changed else 'up to date'}", file=sys.stderr)
    return 0
