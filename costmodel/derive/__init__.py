"""Layer 1, derive: SymPy closed forms and their derivations (a GEMM is 2mnk FLOPs, 6ND from a
linear layer's three GEMMs, 4/3 from the recompute schedule, 4 s^2 d from the attention GEMMs).
No I/O and no scenario dicts: only SymPy, NumPy and this layer."""
