"""costmodel.derive.levers: Amdahl vs multiplicative gains, the waterfall, the CP/EP constraint."""

import pytest
import sympy as sp

from costmodel.derive import levers
from costmodel.evaluate import layouts
from costmodel.inputs import assumptions


def test_amdahl_forms():
    f = levers.share
    assert sp.simplify(levers.amdahl_limit - 1 / (1 - f)) == 0
    assert levers.amdahl(0.5, 2) == pytest.approx(1 / 0.75)
    assert levers.amdahl(0.3, 1) == pytest.approx(1)
    assert levers.amdahl_bound(0.03) == pytest.approx(1 / 0.97)
    assert levers.amdahl(0.4, 1e9) == pytest.approx(levers.amdahl_bound(0.4))
    # the float shortcut is the symbolic form's value
    for part, speedup in ((0.1, 1.5), (0.7376, 3.0), (0.97, 1.031)):
        symbolic = levers.amdahl_speedup.subs({f: part, levers.x: speedup})
        assert levers.amdahl(part, speedup) == pytest.approx(float(symbolic), rel=1e-12)


def test_derived_forms_are_module_attributes():
    assert sp.simplify(levers.share_after - f_share_after()) == 0
    with pytest.raises(AttributeError):
        levers.no_such_form  # noqa: B018


def f_share_after():
    f, g = levers.share, levers.G
    return f / (f + (1 - f) / g)


def test_untouched_share_grows_when_the_rest_speeds_up():
    assert levers.untouched_share_after(0.03, 1) == pytest.approx(0.03)
    # 3% of 100 s stays 3 s while 97 s become 48.5 s
    assert levers.untouched_share_after(0.03, 2) == pytest.approx(3 / (3 + 48.5))


def test_waterfall_multiplies():
    rows = levers.waterfall(120, [("a", 1.5), ("b", 1.2), ("c", 1.1)])
    assert rows[0]["start"] == 120
    assert rows[-1]["end"] == pytest.approx(120 / (1.5 * 1.2 * 1.1))
    assert sum(r["saved"] for r in rows) == pytest.approx(120 - rows[-1]["end"])
    for before, after in zip(rows, rows[1:]):
        assert after["start"] == before["end"]
    assert (
        levers.multiplied_step_time.subs(
            {levers.g_1: 2, levers.g_2: 2, levers.g_3: 1, levers.T: 120}
        )
        == 30
    )


def test_course_cp_2_breaks_ep_8(course):
    table = {
        lay.cp: lay
        for lay in layouts.layouts(
            course["num_gpus"], course["samples_per_step"], course["seq_len"], course["num_experts"]
        )
    }
    assert table[1].dp == 40 and table[1].allows(8)
    assert table[2].dp == 20 and table[2].usable and not table[2].allows(8)
    assert table[2].expert_parallel == (1, 2, 4)  # 5 divides DP = 20 but not 256 experts
    pairs = layouts.valid_pairs(
        course["num_gpus"], course["samples_per_step"], course["seq_len"], course["num_experts"]
    )
    assert (1, 8) in pairs and (2, 8) not in pairs and (2, 4) in pairs
    assert all(40 % cp == 0 and (40 // cp) % ep == 0 and 256 % ep == 0 for cp, ep in pairs)


def test_layout_micro_batches(course):
    lay = layouts.layouts(40, 80, 49152, 256)[0]
    assert lay.samples_per_rank == 2
    assert lay.micro_batches(1) and lay.micro_batches(2) and not lay.micro_batches(4)


def test_batch_and_sequence_divisibility():
    rows = {lay.cp: lay for lay in layouts.layouts(12, 18, 1000, 0)}
    assert rows[2].dp == 6 and rows[2].batch_divides  # 18 / 6
    assert rows[3].dp == 4 and not rows[3].batch_divides  # 18 / 4
    assert not rows[3].seq_divides  # 1000 / 6
    assert rows[1].expert_parallel == (1,)  # dense: no EP


def test_assumptions_are_named_with_sources():
    assert assumptions.assumed("expert_parallel") == 8
    assert all(a.source for a in assumptions.ASSUMPTIONS.values())
