"""The efficiencies' one table (issue 33): per GPU generation and parameter, the stated value
and the fitted one that replaces it (written by `make calibrate` into costmodel.inputs.fitted);
a scenario's own value always wins, and a higher efficiency, stated or given, never predicts a
slower step."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from costmodel.evaluate.simulate import compute_time, step_time
from costmodel.inputs import attention_kernels, efficiency, fitted, scenario

SOURCE = Path(efficiency.__file__).read_text(encoding="utf-8")
#: Hopper's stated GEMM: the MAMF figure of the H100 SXM.
HOPPER_GEMM = re.compile(r"\b0\.803(?=, _MAMF\.format\(\"NVIDIA H100)")


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


def test_raising_a_stated_hopper_value_moves_nothing_fitted(monkeypatch):
    """Issue 33's case: a stated value raised by hand in the source moved fitted values that
    were worked out from it at import. The fitted values are numbers written by calibrate
    (the attention kernels' a scale on their published curves, costmodel.inputs.fitted), which
    replace the stated ones: the stated Hopper GEMM raised from 0.803 to 0.95 moves nothing."""
    before = _step(kernel_launch_overhead=0)  # the step without a fixed cost per kernel
    # 67.89 before the published rows stated their TP overlap and pipeline splits (the refit:
    # Hopper's gemm_scale 0.7864 -> 0.7164), 91.42 before they stated their attention kernels
    # (Hopper's attention scale 0.32 -> 0.51), 91.77 before the refit with collective latency
    assert round(before, 2) == 72.61
    assert len(HOPPER_GEMM.findall(SOURCE)) == 1
    _stated_by_hand(monkeypatch, HOPPER_GEMM.sub("0.95", SOURCE))
    assert efficiency.EFFICIENCIES["hopper"]["gemm"].stated == 0.95
    assert _step(kernel_launch_overhead=0) == before


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
        if entry.curve:  # an attention kernel: its published curve is what is stated
            continue
        raised = replace(entry, stated=min(1.0, entry.stated * 4 / 3))
        monkeypatch.setitem(efficiency.EFFICIENCIES[gen], name, raised)
        step = _step(**keys)
        assert step <= base, (gpu, name)
        faster += step < base
        used = efficiency.efficiencies({"gpu": gpu})[name].value
        assert used == (entry.fitted if entry.fitted is not None else raised.stated)
        monkeypatch.setitem(efficiency.EFFICIENCIES[gen], name, entry)
    assert faster >= (1 if gen in fitted.FITTED else 2)  # HBM at least; unfitted: GEMMs too
    # the published curves raised by a third: never slower, faster where they are used
    curves = attention_kernels.CURVES
    raised_curves = {
        owner: {
            family: {key: (tuple((s, v * 4 / 3) for s, v in points), source)
                     for key, (points, source) in by_key.items()}
            for family, by_key in families.items()
        }
        for owner, families in curves.items()
    }  # fmt: skip
    monkeypatch.setattr(attention_kernels, "CURVES", raised_curves)
    step = _step(**keys)
    assert step < base if gen != "cdna3" else step == base


def test_a_scenario_attention_efficiency_wins_over_the_curve_at_every_length():
    """`attention_efficiency` replaces the curve: the kernel runs at the scenario's value
    whatever the tokens per CP rank (a flat value), forward and backward."""
    sc = scenario.resolve(overrides={"attention_efficiency": 0.33})
    eff = efficiency.efficiencies(sc.values)
    for length in (256, 4096, 10**6):
        assert eff["attention_flash_forward"].at(length) == 0.33
        assert eff["attention_flash_backward"].at(length) == 0.33
    assert compute_time.attention_efficiencies(sc, eff) == (0.33, 0.33)
    unset = efficiency.efficiencies(scenario.resolve().values)
    assert unset["attention_flash_forward"].at(512) < unset["attention_flash_forward"].at(8192)


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
    uses it (no other table of fitted values). An attention kernel's stated value is its
    published curve's at the reference length, its fitted one the fitted scale times it."""
    assert not hasattr(efficiency, "FITTED")
    for gen, table in efficiency.EFFICIENCIES.items():
        assert tuple(table) == efficiency.NAMES
        for name, entry in table.items():
            assert 0 < entry.stated <= 1 and entry.stated_source
            if entry.curve:
                scale, source = fitted.FITTED.get(gen, {}).get("attention", (None, ""))
                assert (entry.scale, entry.fitted_source) == (scale, source)
                value = None if scale is None else scale * entry.stated
            else:
                value, source = fitted.FITTED.get(gen, {}).get(name, (None, ""))
                assert (entry.fitted, entry.fitted_source) == (value, source)
            assert entry.value == (entry.stated if value is None else value)
    hopper = efficiency.EFFICIENCIES["hopper"]["attention_flash_forward"]
    assert hopper.stated == pytest.approx(579 / 989.4)  # FlashAttention-3, causal, d 128, 4K
    assert hopper.value == pytest.approx(fitted.FITTED["hopper"]["attention"][0] * 579 / 989.4)
    assert efficiency.EFFICIENCIES["cdna3"]["attention_flash_forward"].curve == ()  # no curve
