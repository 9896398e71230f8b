"""The real command line, run in a subprocess as a user would (shared by the tests)."""

import subprocess
import sys


def cli(*args, cwd=None):
    """`python -m costmodel ARGS`, its output captured; a hang fails after 60 s."""
    return subprocess.run(
        [sys.executable, "-m", "costmodel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
