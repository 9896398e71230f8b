"""The one exception type that bad input raises, everywhere in costmodel; and the ones a signal
that stops a command raises (Interrupted, a KeyboardInterrupt, for Ctrl-C; Terminated)."""

import signal
import sys


class CostModelError(ValueError):
    """Bad input: a scenario key, a config field, a file. The message is one line that names
    the field, the value and what is allowed; the CLI prints it and exits with status 2."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (a BaseException, as KeyboardInterrupt: an `except Exception`
    on the way does not take it for an error of its own). `signum` says which; the CLI prints
    one line and exits with status 128 + signum."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, as the command's handlers raise it: a KeyboardInterrupt (every `except
    KeyboardInterrupt` takes it), but not KeyboardInterrupt itself. CPython marks a
    KeyboardInterrupt that leaves an exec() or eval() of a string (dataclasses, namedtuple and
    SymPy's lambdify run such code) as unhandled, and `python -m costmodel` then ends by SIGINT
    at exit (status -2) even after the command caught it and printed its line; it marks that
    exact type only, not a subclass."""


def stopping() -> bool:
    """True while a KeyboardInterrupt or Terminated is being handled (an `except` or `finally`
    on its way up): a signal handler that sees it does not raise again, so a second Ctrl-C
    during the clean-up, or while the last line is printed, ends in no traceback."""
    return isinstance(sys.exc_info()[1], (KeyboardInterrupt, Terminated))
