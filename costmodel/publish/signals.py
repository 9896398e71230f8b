"""The signals that stop a build: Ctrl-C (Interrupted, a KeyboardInterrupt), SIGTERM and SIGHUP
(Terminated).

A build (costmodel.publish.handouts) installs `Stops` while it runs: the first signal is raised
at once and also remembered, because raising is not enough: a library may swallow the exception
(`checkpoint` raises a remembered one again before each step). During the swap into place a
signal is only remembered (the swap is not cut in half); during the clean-up every one is
ignored; afterwards the handlers the build found are put back. A stop raised where Python cannot
propagate it (a weakref callback in the import machinery) is not printed as "Exception
ignored": it is remembered, and the next `checkpoint` raises it.
"""

from __future__ import annotations

import signal
import sys
import threading

from costmodel.errors import Interrupted, Terminated, stopping

# The signals that arrived during the build, remembered. Raising is not enough: a library may
# swallow the exception. mpmath's `from_float` (every sympy.Float made from a float) wraps
# math.frexp in a bare `except:` and returns NaN, so a Ctrl-C that lands there was lost and the
# build went on, with a NaN in its numbers. `checkpoint` raises a remembered one again.
_SIGNALLED: list[int] = []
#: The signals a build stops for: Ctrl-C (KeyboardInterrupt), SIGTERM and SIGHUP (Terminated).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _on_signal(signum, frame):
    _SIGNALLED.append(signum)
    if not stopping():  # a second one while the build stops: remembered, not raised again
        _raise_for(signum)


def _remember(signum, frame):
    """During the swap into place: remembered, not raised (the swap is not cut in half)."""
    _SIGNALLED.append(signum)


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise Interrupted
    raise Terminated(signum)


def _unraisable(hook):
    """A `sys.unraisablehook` that keeps quiet about the build's own stop raised where Python
    cannot propagate it (a weakref callback of the import lock, a `__del__`): the signal is
    remembered and `checkpoint` raises it again; anything else goes to `hook`."""

    def quiet(unraisable) -> None:
        if isinstance(unraisable.exc_value, (Interrupted, Terminated)):
            return
        hook(unraisable)

    return quiet


def checkpoint() -> None:
    """Raise the first signal that arrived during the build, if any, even if the exception it
    raised then was swallowed on the way."""
    if _SIGNALLED:
        _raise_for(_SIGNALLED[0])


class Stops:
    """The build's signal handlers, in the main thread only (elsewhere Python cannot install
    any, and every method does nothing): `catch` (raise and remember), `hold` (remember only),
    `ignore`, and `restore` (the handlers found when it was made). A signal ignored when the
    build began stays ignored (nohup)."""

    def __init__(self) -> None:
        self.main = threading.current_thread() is threading.main_thread()
        self.previous = {s: signal.getsignal(s) for s in SIGNALS} if self.main else {}
        self.unraisable = sys.unraisablehook

    def _install(self, handler) -> None:
        for signum, previous in self.previous.items():
            if previous is not signal.SIG_IGN:  # as Python: ignored stays ignored (nohup)
                signal.signal(signum, handler)

    def catch(self) -> None:
        """From now on a signal raises (and is remembered): none remembered yet."""
        if self.main:
            _SIGNALLED.clear()
            sys.unraisablehook = _unraisable(self.unraisable)
        self._install(_on_signal)

    def hold(self) -> None:
        """From now on a signal is remembered, not raised: the build is done, a late signal does
        not cut the swap short (the swap's last `checkpoint` says whether one came)."""
        self._install(_remember)

    def ignore(self) -> None:
        """Every signal ignored: a second Ctrl-C must not cut the clean-up short."""
        for signum in self.previous:
            signal.signal(signum, signal.SIG_IGN)

    def restore(self) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)
        if self.main:
            sys.unraisablehook = self.unraisable
