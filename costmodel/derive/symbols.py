"""Every symbol of the cost model, defined once, with its unit and meaning.

The other modules build expressions from these; `costmodel.inputs.scenario` maps scenario keys to
them, so an expression can be evaluated for any scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp


@dataclass(frozen=True)
class Meaning:
    unit: str
    text: str


MEANING: dict[sp.Symbol, Meaning] = {}


def _define(name: str, unit: str, text: str, **assumptions) -> sp.Symbol:
    symbol = sp.Symbol(name, positive=True, **assumptions)
    MEANING[symbol] = Meaning(unit, text)
    return symbol


# Parameters and tokens
N = _define("N", "1", "matmul parameters per token: the N of 6ND (input embedding excluded)")
N_total = _define("N_total", "1", "total parameters (every routed expert included)")
D = _define("D", "token", "real (unpadded) tokens per step")

# The step and the cluster
T = _define("T", "s", "wall time of one optimizer step")
n_gpu = _define("n_gpu", "1", "number of GPUs")
P = _define("P", "FLOP/s", "dense BF16 peak of one GPU")
BW = _define("BW", "byte/s", "HBM bandwidth of one GPU")

tau = _define("tau", "token/s", "throughput: real tokens per second, whole cluster")

# The batch
B = _define("B", "1", "samples (sequences) per step")
s_mean = _define(r"\bar{s}", "token", "mean real tokens per sample")
S = _define("S", "token", "configured (padded) sequence length")
b_micro = _define("b", "1", "micro batch: sequences per forward pass")

# The model's shape
h = _define("h", "1", "hidden size")
d_attn = _define("d", "1", "attention width: num_heads x head_dim (not always hidden_size)")
L = _define("L", "1", "layers")
L_full = _define("L_full", "1", "full (softmax) attention layers")
E = _define("E", "1", "routed experts per MoE layer")
k = _define("k_top", "1", "routed experts per token (top-k)")
V = _define("V", "1", "vocabulary size")

# GEMM shapes, generic
m, n, kk = sp.symbols("m n k", positive=True)
i_in, o_out = sp.symbols("i o", positive=True)  # a weight W of shape (i x o)
s = _define("s", "token", "length of one sequence")
bytes_per_element = _define("beta", "byte", "bytes per element (2 for BF16)")

# Recompute
r = sp.Symbol("r", nonnegative=True)  # fraction of the forward pass that is recomputed
MEANING[r] = Meaning("1", "fraction of forward FLOPs recomputed during backward")


def describe(symbol: sp.Symbol) -> str:
    """One line: symbol, unit and meaning."""
    meaning = MEANING[symbol]
    return f"{symbol} [{meaning.unit}]: {meaning.text}"
