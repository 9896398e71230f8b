"""MoE shapes, permute traffic and the simulated router (costmodel.derive.moe)."""

import numpy as np
import pytest
import sympy as sp

from costmodel.derive import moe, roofline
from costmodel.derive.symbols import E, S, b_micro, bytes_per_element, h, k_dim, k_top, n
from costmodel.evaluate.account.account import account
from costmodel.evaluate.levers import router
from costmodel.evaluate.plan import layouts
from costmodel.evaluate.simulate import gemms
from costmodel.inputs import scenario


def test_course_tokens_per_expert(course):
    value = moe.tokens_per_expert_step.subs(course.substitutions())
    assert float(value) == pytest.approx(2.31e6 * 8 / 256)
    assert float(value) == pytest.approx(account(course)["tokens_per_expert"])


def test_expert_rows_over_dense_rows_is_ep_k_over_e():
    assert sp.simplify(moe.expert_rows / moe.dense_rows - moe.ep * k_top / E) == 0
    rows = moe.expert_rows.subs({moe.ep: 8, b_micro: 1, S: 49152, k_top: 8, E: 256})
    assert rows == 12288


def test_permute_bytes_per_direction():
    value = moe.permute_bytes.subs({moe.tokens: 1000, h: 2048, bytes_per_element: 2, k_top: 8})
    assert value == 1000 * 2048 * 2 * 8


def test_intensity_limit_is_derived_from_the_roofline():
    assert sp.simplify(moe.intensity_limit - 2 * k_dim * n / (bytes_per_element * (k_dim + n))) == 0


@pytest.mark.parametrize("target", [37.0, 295.3])
def test_rows_for_intensity_reaches_the_target(target):
    rows = moe.rows_for_intensity(target, 2048, 512)
    assert rows is not None
    assert roofline.intensity(rows, 512, 2048) == pytest.approx(target)
    assert roofline.intensity(rows * 0.9, 512, 2048) < target


def test_rows_for_intensity_out_of_reach():
    limit = float(moe.intensity_limit.subs({k_dim: 2048, n: 512, bytes_per_element: 2}))
    assert moe.rows_for_intensity(limit * 1.01, 2048, 512) is None


def test_the_numeric_intensity_is_the_roofline_form_and_takes_arrays():
    """One numeric intensity (derive.roofline.intensity, m, n, k): the form for numbers, and
    elementwise for a NumPy array of rows (notebook 06 plots it over m)."""
    import numpy as np

    for m_, n_, k_, beta in ((777, 512, 2048, 2), (50, 5120, 5120, 1)):
        form = roofline.gemm_intensity.subs(
            {roofline.m: m_, roofline.n: n_, roofline.k_dim: k_, roofline.bytes_per_element: beta}
        )
        assert roofline.intensity(m_, n_, k_, beta) == pytest.approx(float(form), rel=1e-15)
    rows = np.array([1.0, 64.0, 4096.0])
    got = roofline.intensity(rows, 512, 2048)
    assert got == pytest.approx([roofline.intensity(float(r), 512, 2048) for r in rows])


def test_gemm_shape_and_intensity():
    g = moe.gemm(1024, 2048, 512)
    assert g["flops"] == 2 * 1024 * 2048 * 512
    assert g["intensity"] == pytest.approx(
        2 * 1024 * 2048 * 512 / (2 * (1024 * 2048 + 2048 * 512 + 1024 * 512))
    )


def test_default_ep_size():
    assert layouts.default_ep_size(256, 40) == 8
    assert layouts.default_ep_size(0, 128) == 1
    assert layouts.default_ep_size(60, 40) == 5  # divides both, at most 8
    assert layouts.default_ep_size(7, 3) == 1


def test_expert_width_from_the_course_models_config(course):
    rows = {r["key"]: r for r in gemms.model_gemms(course)}
    assert rows["expert_down"]["k"] == 512  # Qwen3.6-35B-A3B moe_intermediate_size
    assert rows["expert_down"]["source"].startswith("config of qwen3.6-35b-a3b")


def test_zipf_popularity():
    p = router.zipf_popularity(16, 0)
    assert np.allclose(p, 1 / 16)
    q = router.zipf_popularity(16, 1.0)
    assert q.sum() == pytest.approx(1) and q[0] == pytest.approx(16 * q[15])


def test_route_top_k_picks_distinct_experts():
    rng = np.random.default_rng(0)
    counts = router.route_top_k(router.zipf_popularity(32, 2.0), 500, 4, rng)
    assert counts.sum() == 500 * 4
    assert counts.max() <= 500  # an expert is chosen at most once per token


def test_place_experts_is_balanced():
    placement = router.place_experts(256, 8, np.random.default_rng(1))
    assert np.bincount(placement).tolist() == [32] * 8
    with pytest.raises(ValueError):
        router.place_experts(10, 4, np.random.default_rng(1))


def test_greedy_placement_balances_known_loads():
    counts = np.array([10, 9, 8, 7, 1, 1, 1, 1])
    placement = router.place_experts_greedy(counts, 4)
    assert np.bincount(placement).tolist() == [2, 2, 2, 2]
    loads = router.rank_loads(counts, placement, 4)
    assert loads.tolist() == [11, 10, 9, 8]  # 10+1, 9+1, 8+1, 7+1 (hottest first)
    run = router.simulate_router(64, 4, 8, 2000, 1.0, seed=5, placements=16)
    assert run.greedy_factor <= np.median(run.rank_factors)
    assert len(run.rank_factors) == 16 and run.rank_factor == run.rank_factors[0]


def test_straggler_factor():
    assert router.straggler_factor([1, 1, 1, 1]) == 1
    assert router.straggler_factor([2, 1, 1, 0]) == 2


def test_simulation_is_seeded_and_skew_raises_the_factor():
    a = router.simulate_router(64, 4, 8, 2000, 1.0, seed=3)
    b = router.simulate_router(64, 4, 8, 2000, 1.0, seed=3)
    assert np.array_equal(a.expert_counts, b.expert_counts) and a.rank_factor == b.rank_factor
    uniform = router.simulate_router(64, 4, 8, 4000, 0.0, seed=3)
    assert uniform.rank_factor < 1.1
    assert a.rank_factor > uniform.rank_factor
    assert a.rank_loads.sum() == 2000 * 4


def test_team_dense_scenario_has_no_experts():
    team = scenario.resolve(data={"num_experts": 0, "experts_per_token": 0})
    assert layouts.default_ep_size(team["num_experts"], team["num_gpus"]) == 1
