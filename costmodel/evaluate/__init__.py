"""Layer 3, evaluate: numbers for one scenario: the cost account, the model's GEMM list, the
parallel layouts, the simulations (packing, router)."""
