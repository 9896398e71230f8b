"""Time limits in the tests detect a hang, nothing else.

A test that waits on a process, a page or a loop gives up after `hang_limit(idle)` seconds, where
`idle` is what the step takes on this project's idle 2-core machine (each call site says what it
waits for). The limit is HANG_FACTOR times that, and never under MIN_LIMIT: `make test` must pass
while other CPU-bound work runs, where a step that takes a second idle can take ten, and the
interpreter alone can take seconds to start. No test compares an elapsed time with a bound to
check speed: the benchmarks (`make benchmark`) measure speed and report it.

tests/project/test_hang_limits.py fails on a time limit in the tests written as a bare number.
"""

#: How much slower than idle a step may run before the test calls it a hang.
HANG_FACTOR = 10
#: The least limit, in seconds: a fresh interpreter on a machine whose two cores are busy.
MIN_LIMIT = 60.0


def hang_limit(idle: float) -> float:
    """Seconds to wait for a step that takes `idle` seconds on the idle machine."""
    return max(MIN_LIMIT, HANG_FACTOR * idle)


def hang_limit_ms(idle: float) -> float:
    """hang_limit in milliseconds (Playwright's unit)."""
    return 1000 * hang_limit(idle)
