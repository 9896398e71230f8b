"""The command line the cross-checks share: rows to CSV, written to standard output or
atomically to ``--out``."""

from __future__ import annotations

import argparse
import csv
import io
import sys


def csv_text(rows: list, fields: tuple | list) -> str:
    """Rows (each with as_dict()) as CSV text with the given columns."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_dict())
    return buffer.getvalue()


def command(prog: str, description: str, make_rows, to_csv, argv: list[str] | None) -> int:
    """The command line of a cross-check: build the rows, write their CSV to --out (atomically:
    a temporary file beside it, then a rename) or to standard output."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--out", help="write the CSV here (default: standard output)")
    args = parser.parse_args(argv)
    try:
        text = to_csv(make_rows())
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not args.out:
        sys.stdout.write(text)
        return 0
    import os
    import tempfile
    from pathlib import Path

    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0
