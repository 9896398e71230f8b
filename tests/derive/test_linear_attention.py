"""The gated-DeltaNet core in SymPy (costmodel.derive.linear_attention), against values worked
out by hand and against the model counts that use it."""

import sympy as sp

from costmodel.derive import linear_attention as la
from costmodel.derive.symbols import D
from costmodel.evaluate.simulate import linear
from costmodel.inputs import models


def test_triangular_solve_counts_one_multiply_add_per_entry_below_the_diagonal():
    # a 4 x 4 unit-lower-triangular system, one right-hand side: 0 + 1 + 2 + 3 = 6 multiply-adds
    assert la.unit_triangular_solve_flops(4, 1) == 12
    size, rhs = sp.symbols("s r", positive=True)
    assert sp.expand(la.unit_triangular_solve_flops(size, rhs) - size * (size - 1) * rhs) == 0


def test_core_per_token_is_the_sum_of_the_chunk_terms_written_out():
    by_hand = la.n_v * (
        4 * la.C * la.d_k + 2 * la.C * la.d_v + 6 * la.d_k * la.d_v + (la.C - 1) * (la.d_k + la.d_v)
    )
    assert sp.expand(la.core_forward_per_token - by_hand) == 0
    assert len(la.chunk_forward_per_head()) == 8  # six GEMMs and two triangular solves


def test_qwen36_figure_from_the_docstring():
    # 32 value heads, d_k = d_v = 128, C = 64: 32 x (32768 + 16384 + 98304 + 16128)
    values = {la.n_v: 32, la.d_k: 128, la.d_v: 128, la.C: 64}
    assert la.evaluate(la.core_forward_per_token, values) == 5_234_688
    shape = models.load_shape("qwen3.6-35b-a3b")
    assert linear.linear_attention_flops_per_token(shape) == 5_234_688


def test_training_is_three_forwards_over_every_layer_and_token():
    values = {la.n_v: 32, la.d_k: 128, la.d_v: 128, la.C: 64, D: 1000, la.L_linear: 30}
    assert la.evaluate(la.core_training, values) == 3 * 5_234_688 * 1000 * 30
    shape = models.load_shape("qwen3.6-35b-a3b")
    per_token = linear.linear_attention_flops_per_token(shape)
    layers = shape.num_linear_attention_layers
    assert linear.linear_attention_training_flops(shape, 1000) == 3 * per_token * 1000 * layers
