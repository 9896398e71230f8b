"""The roofline: is an operation limited by compute or by memory bandwidth?

Arithmetic intensity (AI) of an (m x k)(k x n) GEMM reading both inputs and writing the output
once, at beta bytes per element:  AI = 2mnk / (beta (mk + kn + mn)).
Machine balance = P / BW (FLOP per byte). Attainable FLOP/s = min(P, AI * BW): below the
balance an operation is memory-bound.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.flops import gemm_flops
from costmodel.derive.symbols import BW, P, bytes_per_element, k_dim, m, n

gemm_bytes = bytes_per_element * (m * k_dim + k_dim * n + m * n)
gemm_intensity = gemm_flops(m, n, k_dim) / gemm_bytes
machine_balance = P / BW
attainable = sp.Min(P, gemm_intensity * BW)


def intensity(m_, n_, k_, beta=2):
    """gemm_intensity for numbers, the one numeric form every layer uses: an (m x k)(k x n) GEMM
    at beta bytes an element, 2mnk / (beta (mk + kn + mn)) FLOP/byte; m may be a NumPy array
    (tests/test_model_gemms.py checks it against the form)."""
    return 2 * m_ * n_ * k_ / (beta * (m_ * k_ + k_ * n_ + m_ * n_))


def attainable_flops(ai, peak, bandwidth) -> float:
    return min(float(peak), float(ai) * float(bandwidth))
