"""The one exception type that bad input raises, everywhere in costmodel; and the ones a signal
that stops a command raises (Interrupted, a KeyboardInterrupt, for Ctrl-C; Terminated), with the
handlers that raise them (`catch_signals`: the command line's, and `make lab`'s, which the
layers keep from importing the command line)."""

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


#: What a command says when a signal stops it (its exit status is 128 + the signal's number).
STOPPED = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
#: The stop signals `_on_signal` raised for that no line has reported yet (`reported`).
#: CPython drops an exception raised inside a weakref callback or a finalizer ("Exception
#: ignored in ..."), and importlib runs one, a module lock's, during every import: a signal that
#: lands there would be lost, the command running on to status 0 (seen under load, about one
#: in 150 signals sent while `costmodel report` imports). `raise_unreported` raises it again.
_unreported: list[int] = []


def _on_signal(signum, frame):
    """Ctrl-C raises Interrupted (a KeyboardInterrupt), SIGTERM and SIGHUP Terminated; not
    again while one of them is being handled (the command is printing its line or cleaning
    up)."""
    if stopping():
        return
    _unreported.append(signum)
    _raise(signum)


def _raise(signum: int):
    if signum == signal.SIGINT:
        raise Interrupted
    raise Terminated(signum)


def raise_unreported() -> None:
    """Raise again the stop of a signal whose exception a finalizer dropped (`_unreported`),
    unless one is being handled."""
    if _unreported and not stopping():
        _raise(_unreported[-1])


def ignore_signals() -> None:
    """Every signal that stops a command ignored from now on: the process is ending."""
    for signum in STOPPED:
        signal.signal(signum, signal.SIG_IGN)


def reported() -> None:
    """A stop has its line: the record of the signals before it is done with."""
    _unreported.clear()


def catch_signals() -> dict[int, object]:
    """Install the handlers (a signal ignored when the command started, as under nohup, stays
    ignored); returns the ones they replace."""
    previous = {signum: signal.getsignal(signum) for signum in STOPPED}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, _on_signal)
    return previous
