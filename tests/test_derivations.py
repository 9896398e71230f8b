"""The formulas come out of SymPy algebra, and agree with the course."""

import sympy as sp

from costmodel.derive import attention, flops, padding, recompute, roofline, utilization
from costmodel.derive.symbols import BW, D, N, P, T, d_attn, r, s, tau
from costmodel.evaluate import packing


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


def test_hfu_is_mfu_times_factor():
    assert sp.simplify(utilization.hfu / utilization.mfu - recompute.recompute_factor) == 0


def test_throughput_form_equals_step_time_form():
    form = utilization.mfu_from_throughput.subs(tau, utilization.tokens_per_s)
    assert sp.simplify(form - utilization.mfu) == 0


def test_packing_speedup_is_inverse_useful_fraction():
    assert sp.simplify(padding.packing_speedup * padding.useful_fraction) == 1
    assert sp.simplify(padding.step_time_after_packing * padding.packing_speedup - T) == 0


def test_roofline_intensity_of_square_gemm():
    n = sp.Symbol("n", positive=True)
    ai = roofline.gemm_intensity.subs(
        {roofline.m: n, roofline.n: n, roofline.kk: n, roofline.bytes_per_element: 2}
    )
    assert sp.simplify(ai - n / 3) == 0
    assert roofline.machine_balance == P / BW


def test_greedy_pack():
    bins = packing.greedy_pack([5, 4, 3, 3, 1], capacity=8)
    assert sorted(map(sorted, bins)) == [[1, 3, 4], [3, 5]]
