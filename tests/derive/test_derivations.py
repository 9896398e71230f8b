"""The formulas come out of SymPy algebra, and agree with the course."""

import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.derive import attention, flops, padding, recompute, roofline, utilization
from costmodel.derive.symbols import BW, B, D, N, P, S, T, d_attn, n_gpu, r, s, s_mean, tau
from costmodel.evaluate.account import packing


def test_gemm_is_two_mnk():
    m, n, k = sp.symbols("m n k")
    assert flops.gemm_flops(m, n, k) == 2 * m * n * k


def test_backward_is_twice_forward():
    layer = flops.linear_layer_flops()
    ratio = sp.simplify((layer["backward_input"] + layer["backward_weight"]) / layer["forward"])
    assert ratio == 2
    assert flops.FORWARD_PER_PARAM_TOKEN == 2 and flops.BACKWARD_PER_PARAM_TOKEN == 4


def test_total_is_six_nd():
    assert sp.simplify(flops.model_flops - 6 * N * D) == 0
    assert sp.simplify(flops.forward_flops - 2 * N * D) == 0
    assert sp.simplify(flops.backward_flops - 4 * N * D) == 0


def test_six_nd_holds_for_any_stack_of_layers():
    shapes = [sp.symbols(f"i{j} o{j}", positive=True) for j in range(4)]
    net = flops.network_flops(shapes)
    assert sp.simplify(net["forward"] + net["backward"] - 6 * net["params"] * D) == 0


def test_full_recompute_factor_is_four_thirds():
    assert recompute.factor("full") == sp.Rational(4, 3)
    assert recompute.factor("none") == 1
    assert sp.simplify(recompute.recompute_factor - (1 + r / 3)) == 0
    hw = recompute.hardware_flops_with_recompute.subs(r, 1)
    assert sp.simplify(hw - 8 * N * D) == 0


def test_attention_forward_is_four_s_squared_d():
    assert sp.simplify(attention.forward_per_layer - 4 * s**2 * d_attn) == 0
    assert attention.BACKWARD_OVER_FORWARD == 2


def test_mfu_and_hfu_of_a_small_step():
    # by hand: 6 x 1e9 x 1e6 = 6e15 model FLOPs; full recompute runs 8e15; the cluster could do
    # 10 s x 8 GPUs x 1e15 FLOP/s = 8e16, so MFU = 7.5% and HFU = 10%
    values = {N: 10**9, D: 10**6, T: 10, n_gpu: 8, P: 10**15, r: 1}
    assert utilization.mfu.subs(values) == sp.Rational(3, 40)
    assert utilization.hfu.subs(values) == sp.Rational(1, 10)


def test_throughput_form_equals_step_time_form():
    form = utilization.mfu_from_throughput.subs(tau, utilization.tokens_per_s)
    assert sp.simplify(form - utilization.mfu) == 0


def test_padding_of_a_small_batch():
    # by hand: 4 samples padded to 8 slots = 32 slots, 20 of them real tokens (mean 5)
    values = {B: 4, S: 8, D: 20, T: 120}
    assert padding.tokens_in_batch.subs({B: 4, s_mean: 5}) == 20
    assert padding.useful_fraction.subs(values) == sp.Rational(5, 8)
    assert padding.waste_fraction.subs(values) == sp.Rational(3, 8)
    assert padding.packing_speedup.subs(values) == sp.Rational(8, 5)
    assert padding.step_time_after_packing.subs(values) == 75


def test_roofline_intensity_of_square_gemm():
    n = sp.Symbol("n", positive=True)
    ai = roofline.gemm_intensity.subs(
        {roofline.m: n, roofline.n: n, roofline.k_dim: n, roofline.bytes_per_element: 2}
    )
    assert sp.simplify(ai - n / 3) == 0
    assert roofline.machine_balance == P / BW


def test_greedy_pack():
    bins = packing.greedy_pack([5, 4, 3, 3, 1], capacity=8)
    assert sorted(map(sorted, bins)) == [[1, 3, 4], [3, 5]]


def _first_fit_decreasing(lengths, capacity):
    """First-fit decreasing as written down: each sample, longest first, into the first bin
    with room, scanning the bins in order."""
    bins, room = [], []
    for length in sorted(lengths, reverse=True):
        for index, free in enumerate(room):
            if length <= free:
                bins[index].append(length)
                room[index] -= length
                break
        else:
            bins.append([length])
            room.append(capacity - length)
    return bins


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64).flatmap(lambda c: st.tuples(st.just(c), st.lists(st.integers(0, c)))))
def test_greedy_pack_is_first_fit_decreasing(case):
    """The tree that finds the first bin with room gives the bins of the scan, in order."""
    capacity, lengths = case
    assert packing.greedy_pack(lengths, capacity) == _first_fit_decreasing(lengths, capacity)
