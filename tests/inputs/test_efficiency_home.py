"""The efficiencies' one table (issue 33): per GPU generation and parameter, the stated value
and the fitted one that replaces it (written by `make calibrate` into costmodel.inputs.fitted);
a scenario's own value always wins, and a higher efficiency, stated or given, never predicts a
slower step."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from costmodel.evaluate.simulate import step_time
from costmodel.inputs import efficiency, fitted, scenario

SOURCE = Path(efficiency.__file__).read_text(encoding="utf-8")
#: Hopper's stated flash forward: the figure FlashAttention-3's paper is taken at.
HOPPER_FORWARD = re.compile(r"\b0\.70(?=,\s*_FA3\.format\(\"forward)")


def _stated_by_hand(monkeypatch, text: str) -> None:
    """The efficiency module as it would be with its source edited to `text` (executed afresh,
    every name it defines set on the module for the test)."""
    namespace = {"__name__": efficiency.__name__, "__file__": efficiency.__file__}
    exec(compile(text, efficiency.__file__, "exec"), namespace)  # noqa: S102
    for name, value in namespace.items():
        if not name.startswith("__"):
            monkeypatch.setattr(efficiency, name, value)


def _step(**keys) -> float:
    return step_time.predict(scenario.resolve(overrides=keys or None))["seconds"]


def test_raising_the_stated_hopper_attention_does_not_slow_the_course(monkeypatch):
    """The issue's case: the stated Hopper flash forward raised from 0.70 to 0.90 in the source
    made the course's step slower (47.14 s to 50.79 s): the fitted backward and eager kernels
    were worked out at import as the fitted forward times the stated ratio to the forward. Now
    the fitted values are numbers written by calibrate, which replace the stated ones: a stated
    value changed by hand moves nothing that was fitted."""
    before = _step()
    assert round(before, 2) == 48.15  # 47.14 before each GEMM ran at its shape's efficiency
    assert len(HOPPER_FORWARD.findall(SOURCE)) == 1
    _stated_by_hand(monkeypatch, HOPPER_FORWARD.sub("0.90", SOURCE))
    assert efficiency.efficiencies({"gpu": "H20"})["attention_flash_backward"].value == (
        pytest.approx(0.2416 * 0.55 / 0.70)
    )
    assert _step() == before


@pytest.mark.parametrize("gpu", ["H20", "A100-80GB", "B200", "MI300X"])
def test_a_higher_stated_efficiency_never_predicts_a_slower_step(monkeypatch, gpu):
    """Each parameter's stated value raised by a third (at most 1): the step is never slower;
    where no fit replaces it (Blackwell, MI300X, Hopper's HBM) it is no slower and the value
    used is the new one."""
    keys = {"gpu": gpu, "fp8": "hybrid" if gpu != "A100-80GB" else "none"}
    base = _step(**keys)
    gen = efficiency.generation(gpu)
    faster = 0
    for name, entry in efficiency.EFFICIENCIES[gen].items():
        raised = replace(entry, stated=min(1.0, entry.stated * 4 / 3))
        monkeypatch.setitem(efficiency.EFFICIENCIES[gen], name, raised)
        step = _step(**keys)
        assert step <= base, (gpu, name)
        faster += step < base
        used = efficiency.efficiencies({"gpu": gpu})[name].value
        assert used == (entry.fitted if entry.fitted is not None else raised.stated)
        monkeypatch.setitem(efficiency.EFFICIENCIES[gen], name, entry)
    assert faster >= (1 if gen in fitted.FITTED else 3)  # HBM at least; unfitted: GEMMs, attention


@pytest.mark.parametrize("key", list(efficiency.OVERRIDES))
def test_a_higher_scenario_efficiency_never_predicts_a_slower_step(key):
    """The scenario's key wins over the fitted and the stated value, and raising it never
    makes the step slower."""
    steps = [_step(**{key: value}) for value in (0.1, 0.2, 0.4, 0.6, 0.8, 1.0)]
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]
    got = efficiency.efficiencies({**scenario.resolve().values, key: 0.33})
    assert all(got[name].value == 0.33 for name in efficiency.OVERRIDES[key])
    assert all(got[name].source == f"scenario ({key})" for name in efficiency.OVERRIDES[key])


def test_one_table_holds_the_stated_and_the_fitted_value():
    """Every generation's table names each parameter once, with its stated value and source;
    where costmodel.inputs.fitted has a value, the table holds it beside the stated one and
    uses it (no other table of fitted values)."""
    assert not hasattr(efficiency, "FITTED")
    for gen, table in efficiency.EFFICIENCIES.items():
        assert tuple(table) == efficiency.NAMES
        for name, entry in table.items():
            assert 0 < entry.stated <= 1 and entry.stated_source
            value, source = fitted.FITTED.get(gen, {}).get(name, (None, ""))
            assert (entry.fitted, entry.fitted_source) == (value, source)
            assert entry.value == (entry.stated if value is None else value)
    assert efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"].stated == 0.70
    assert efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"].value == 0.2416
