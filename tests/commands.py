"""The real command line, run in a subprocess as a user would (shared by the tests)."""

import subprocess
import sys

from hang import hang_limit


def cli(*args, cwd=None):
    """`python -m costmodel ARGS`, its output captured; a hang fails the test (the slowest
    command, a plan search, takes a few seconds idle)."""
    return subprocess.run(
        [sys.executable, "-m", "costmodel", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=hang_limit(6),
    )
