"""costmodel.evaluate.account.packing: the synthetic lengths, the three layouts, and a packed row's masks."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.evaluate.account import packing


def test_synthetic_step_holds_exactly_the_scenarios_tokens(course):
    n, mean, cap = course["samples_per_step"], course["mean_tokens_per_sample"], course["seq_len"]
    for lengths in packing.synthetic_steps(5, n, mean, cap):
        assert len(lengths) == n
        assert lengths.sum() == round(n * mean) == course["tokens_per_step"]
        assert lengths.min() >= 1 and lengths.max() <= cap


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 300),
    st.floats(0, 1),
    st.integers(2, 100_000),
    st.integers(0, 5),
    st.sampled_from([0.5, 2.0, 8.0]),
)
def test_synthetic_step_any_inputs(n, where, cap, seed, shape):
    mean = 1 + where * (cap - 1)
    lengths = packing.synthetic_step(n, mean, cap, np.random.default_rng(seed), shape)
    assert lengths.sum() == round(n * mean)
    assert lengths.min() >= 1 and lengths.max() <= cap


def test_synthetic_steps_are_reproducible():
    a = packing.synthetic_steps(3, 50, 900.0, 2048, seed=7)
    b = packing.synthetic_steps(3, 50, 900.0, 2048, seed=7)
    assert all((x == y).all() for x, y in zip(a, b))


def test_mean_out_of_range_is_an_error():
    with pytest.raises(ValueError):
        packing.synthetic_step(4, 5000, 4096, np.random.default_rng(0))


def test_three_ways_fixed_and_perfect_match_the_account(course, course_account):
    n, mean, cap = course["samples_per_step"], course["mean_tokens_per_sample"], course["seq_len"]
    ways = packing.three_ways(packing.synthetic_steps(4, n, mean, cap), cap)
    assert ways["fixed"]["slots"] == course_account["padding"]["slots"]
    assert ways["perfect"]["slots"] == course["tokens_per_step"]
    assert ways["perfect"]["speedup"] == pytest.approx(course_account["padding"]["packing_speedup"])
    assert ways["fixed"]["speedup"] == 1
    # bins sit between the two
    assert ways["perfect"]["slots"] <= ways["ffd"]["slots"] <= ways["fixed"]["slots"]


def test_three_ways_small_example():
    ways = packing.three_ways([[6, 5, 4, 3, 2]], 10)
    # FFD: [6, 4], [5, 3, 2] -> 2 bins
    assert ways["ffd"]["rows"] == 2 and ways["ffd"]["slots"] == 20
    assert ways["fixed"]["slots"] == 50 and ways["perfect"]["slots"] == 20
    assert ways["ffd"]["speedup"] == 2.5


def test_square_ratio():
    assert packing.square_ratio([5, 5, 5]) == 1
    # lengths 3, 2, 4: sum of squares 29, n * mean^2 = 3 * 9 = 27
    assert packing.square_ratio([3, 2, 4]) == pytest.approx(29 / 27)


def test_packed_row_of_three_samples():
    lengths = [3, 2, 4]
    assert packing.cu_seqlens(lengths) == [0, 3, 5, 9]
    assert packing.position_ids(lengths) == [0, 1, 2, 0, 1, 0, 1, 2, 3]
    assert packing.loss_mask(lengths) == [1, 1, 0, 1, 0, 1, 1, 1, 0]
    block = packing.block_causal_mask(lengths)
    plain = packing.causal_mask(9)
    assert block.sum() == 6 + 3 + 10
    assert plain.sum() == 45
    assert packing.cross_sample_pairs(lengths) == plain.sum() - block.sum() == 26
    assert (block <= plain).all()
    assert block[3, 2] == 0 and plain[3, 2] == 1  # sample 1 would see sample 0


def test_cross_sample_share():
    assert packing.cross_sample_share([[4], [7]]) == 0
    assert packing.cross_sample_share([[3, 2, 4]]) == pytest.approx(26 / 45)


def test_steps_for():
    assert packing.steps_for(80) == 50
    assert packing.steps_for(512) == 8
    assert packing.steps_for(100_000) == 1
