"""The roofline: is an operation limited by compute or by memory bandwidth?

Arithmetic intensity (AI) of an (m x k)(k x n) GEMM reading both inputs and writing the output
once, at beta bytes per element:  AI = 2mnk / (beta (mk + kn + mn)).
Machine balance = P / BW (FLOP per byte). Attainable FLOP/s = min(P, AI * BW): below the
balance an operation is memory-bound.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.flops import gemm_flops
from costmodel.derive.plain import attainable_flops, intensity  # noqa: F401 (re-exported)
from costmodel.derive.symbols import BW, P, bytes_per_element, k_dim, m, n

gemm_bytes = bytes_per_element * (m * k_dim + k_dim * n + m * n)
gemm_intensity = gemm_flops(m, n, k_dim) / gemm_bytes
machine_balance = P / BW
attainable = sp.Min(P, gemm_intensity * BW)
