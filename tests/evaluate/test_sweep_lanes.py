"""The sweep's lanes (evaluate.sweep.sweep_lanes, derive.lanes): the models' scalar code run
once on a scenario whose numbers are arrays, one value per point; split where the points'
answers to a branch differ, point by point where an array cannot stand for a number. Every
point's figures equal its own evaluation's (and the report's: test_sweep_model.py)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from test_valid_space import valid_scenarios

from costmodel.derive import lanes as dispatch
from costmodel.derive.lanes import Diverge
from costmodel.errors import CostModelError
from costmodel.evaluate.sweep import sweep, sweep_lanes, sweep_points
from costmodel.inputs import what_if
from costmodel.inputs.scenario import resolve

lanes = sweep_lanes.lanes


def test_one_answer_where_the_lanes_agree_else_diverge_with_each_answer():
    assert bool(lanes([1, 2]) > 0) is True
    assert bool(lanes([1, 2]) > 5) is False
    with pytest.raises(Diverge) as raised:
        bool(lanes([1, 2, 3]) > 1.5)
    assert raised.value.mask.tolist() == [False, True, True]
    assert float(lanes([2.5, 2.5])) == 2.5 and int(lanes([3, 3])) == 3
    assert list(range(lanes([2, 2]))) == [0, 1]  # an index: the one value
    with pytest.raises(Diverge) as raised:
        float(lanes([1.0, 2.0, 1.0]))
    assert raised.value.mask.tolist() == [True, False, True]  # equal to the first lane
    with pytest.raises(TypeError):
        {lanes([1, 2]): 0}  # no key: the lanes are no one number


def test_integers_are_carried_as_floats_and_in_place_operators_copy():
    """An integer that differs between points is a float64 (NumPy's int64 would overflow where
    Python's int grows); `x += y` in scalar code never changes an array another figure holds."""
    a = lanes([2**62, 2**62 + 2**40])
    assert a.dtype == np.float64 and (a * 4).tolist() == [2.0**64, (2**62 + 2**40) * 4.0]
    held = lanes([1.0, 2.0])
    b = held
    b += 1
    b *= 3
    assert held.tolist() == [1.0, 2.0] and b.tolist() == [6.0, 9.0]


def test_stacking_refuses_what_is_not_numbers():
    assert sweep_lanes._stacked([(1, "a"), (2, "a")])[1] == "a"
    for values in ([(1, 2), (1, 2, 3)], ["a", "b"], [True, False], [None, 1]):
        with pytest.raises(TypeError):
            sweep_lanes._stacked(values)


def test_a_format_is_the_lanes_range_or_their_one_value():
    assert f"{lanes([1, 3]):.1f}" == "1.0..3.0"
    assert f"{lanes([2, 2]):,}" == "2.0"


def test_the_dispatch_is_pythons_on_numbers_and_numpys_on_arrays():
    assert dispatch.maximum(1, 2) == 2 and type(dispatch.maximum(1, 2)) is int
    assert dispatch.minimum(0.5, 2) == 0.5
    assert dispatch.maximum(lanes([1, 3]), 2).tolist() == [2.0, 3.0]
    assert dispatch.minimum(lanes([1, 3]), 2).tolist() == [1.0, 2.0]
    assert dispatch.where(lanes([1, 0]) > 0, 5, 7).tolist() == [5, 7]
    assert dispatch.where(True, 5, 7) == 5
    assert type(dispatch.as_float(3)) is float
    assert dispatch.as_float(lanes([1, 2])).tolist() == [1.0, 2.0]


def _points(hidden_sizes, layers=40):
    base = resolve()
    got = [sweep_points.point(base, {"hidden_size": h, "num_layers": layers}) for h in hidden_sizes]
    assert not any(isinstance(sc, str) for sc in got)
    return got


def _apart(result, n):
    return [row[0] for row in sweep_lanes.columns([result], n)]


def test_a_group_splits_where_its_lanes_answer_a_branch_differently():
    """A branch on the hidden size: one failed evaluation of the seven points, then each side
    at once; every point's value its own evaluation's."""
    scenarios = _points([1024, 1536, 2560, 3072, 4096, 5120, 6144])
    shapes = [sc.shape for sc in scenarios]
    calls = []

    def each(sc, shape):
        calls.append(np.size(sc.hidden_size))
        return sc.hidden_size * 2.0 if sc.hidden_size > 3000 else -1.0 * sc.hidden_size

    got = sweep_lanes.evaluate(scenarios, shapes, each, _apart)
    assert got == [-1024.0, -1536.0, -2560.0, 6144.0, 8192.0, 10240.0, 12288.0]
    assert sorted(calls) == [3, 4, 7]  # seven diverged, then the two sides on lanes


def test_points_that_differ_in_more_than_numbers_are_not_stacked():
    """The course model's own hidden size (2048) takes its shape from the model config, the
    others from the keys: different names and sources, so `stack` refuses them together and
    they are evaluated in their own groups."""
    scenarios = _points([1024, 1536, 2048, 3072])
    shapes = [sc.shape for sc in scenarios]
    assert len({sc.shape.name for sc in scenarios}) == 2
    with pytest.raises(TypeError):
        sweep_lanes.stack(scenarios, shapes)
    sizes = []

    def each(sc, shape):
        sizes.append(np.size(sc.hidden_size))
        return sc.hidden_size * 1.0

    assert sweep_lanes.evaluate(scenarios, shapes, each, _apart) == [1024, 1536, 2048, 3072]
    assert sorted(sizes) == [1, 3]  # the three of the keys on lanes, the config's alone


def test_a_number_the_lanes_cannot_stand_for_is_evaluated_point_by_point():
    scenarios = _points([1024, 1536, 3072])
    shapes = [sc.shape for sc in scenarios]

    def each(sc, shape):
        return {sc.hidden_size: 2.0}[sc.hidden_size] * sc.num_layers  # a key: TypeError on lanes

    assert sweep_lanes.evaluate(scenarios, shapes, each, _apart) == [80.0, 80.0, 80.0]


def test_a_shape_grid_runs_on_lanes(monkeypatch):
    """60 points of the course (30 hidden sizes x 2 layer counts): the models run a handful of
    times, not 60, and each point's figures are its own evaluation's."""
    real, sizes = sweep_points._model_figures, []

    def counted(sc, shape):
        sizes.append(np.size(sc.hidden_size))
        return real(sc, shape)

    monkeypatch.setattr(sweep_points, "_model_figures", counted)
    scenario = resolve()
    axes = [sweep.parse_axis(t) for t in ("hidden_size=1024:8192:30", "num_layers=20,40")]
    grid = sweep.evaluate_grid(scenario, axes)
    kept = int((grid.refused == "").sum())
    assert kept >= 50 and len(sizes) <= 8 and max(sizes) >= 20
    monkeypatch.setattr(sweep_points, "_model_figures", real)
    for i in range(0, len(grid), 7):
        if grid.refused[i]:
            continue
        changes = {a.key: grid.columns[a.key][i].item() for a in axes}
        own = sweep_points.evaluate_point(sweep_points.point(scenario, changes))
        for column, value in own.figures.items():
            assert grid.extra[column][i] == value, (changes, column)


def test_only_keys_nothing_derives_from_follow_a_shape():
    base = resolve()
    with pytest.raises(ValueError, match="CHECKED_ONLY"):
        what_if.changed(base, {"hidden_size": 4096}, lambda shape, values: {"num_layers": 3})
    followed = what_if.changed(
        base, {"hidden_size": 4096}, lambda shape, values: {"activated_params": 4 * 10**9}
    )
    # as if the count were one of the changes (resolve's, but for the name it gives)
    assert followed == what_if.changed(base, {"hidden_size": 4096, "activated_params": 4 * 10**9})
    assert followed.values == {
        **resolve(overrides={"hidden_size": 4096, "activated_params": 4 * 10**9}).values,
        "name": base.name,
    }
    assert followed.sources["activated_params"] == "--set"


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(valid_scenarios())
def test_on_lanes_every_point_of_any_valid_scenario_is_its_own_evaluation(overrides):
    """Scenarios drawn from the whole valid space, each swept over its width and length: the
    figures evaluated at once on lanes (split where they must be) are each point's own, to the
    last bits an integer carried as a float may change."""
    try:
        base = resolve(overrides=overrides)
    except CostModelError:
        assume(False)
    widths = {base.hidden_size * f // 4 for f in (2, 3, 4, 5, 6, 8)}
    lengths = {base.seq_len, max(base.mean_tokens_per_sample, base.seq_len // 2)}
    points = [
        sweep_points.point(base, {"hidden_size": h, "seq_len": int(s)})
        for h in sorted(widths)
        for s in sorted(lengths)
        if h > 0
    ]
    points = [sc for sc in points if not isinstance(sc, str)]
    assume(len(points) >= 3)
    shapes = [sc.shape for sc in points]
    with np.errstate(all="ignore"):
        got = sweep_lanes.evaluate(
            points, shapes, sweep_points._model_figures, sweep_points._lanes_apart
        )
    for sc, shape, (arguments, bound, figures) in zip(points, shapes, got):
        own_arguments, own_bound, own = sweep_points._model_figures(sc, shape)
        assert np.allclose(arguments, own_arguments, rtol=1e-12, equal_nan=True)
        assert bound == pytest.approx(own_bound, rel=1e-12)
        for column, value in own.items():
            if isinstance(value, str):
                assert figures[column] == value, column
            else:
                assert figures[column] == pytest.approx(value, rel=1e-12, nan_ok=True), column
