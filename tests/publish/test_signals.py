"""The build's signal handlers (costmodel.publish.signals): a stop raised where Python cannot
propagate it is remembered and not reported; any other unraisable exception still is."""

from __future__ import annotations

import gc
import signal
import sys

import pytest

from costmodel.errors import Interrupted
from costmodel.publish import signals


class _RaisesOnDel:
    def __init__(self, error: BaseException):
        self.error = error

    def __del__(self):
        raise self.error


def test_a_stop_raised_in_a_del_is_remembered_not_reported(monkeypatch):
    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    stops = signals.Stops()  # the hook it finds: the recorder
    stops.catch()
    try:
        signals._SIGNALLED.append(signal.SIGINT)  # as _on_signal remembers it before raising
        _RaisesOnDel(Interrupted())
        gc.collect()
        assert reported == []
        with pytest.raises(Interrupted):
            signals.checkpoint()  # the remembered Ctrl-C, raised again
        _RaisesOnDel(ValueError("not ours"))
        gc.collect()
        assert [type(e) for e in reported] == [ValueError]
    finally:
        stops.restore()
        signals._SIGNALLED.clear()
    _RaisesOnDel(Interrupted())  # after the build: reported as before
    gc.collect()
    assert [type(e) for e in reported] == [ValueError, Interrupted]
