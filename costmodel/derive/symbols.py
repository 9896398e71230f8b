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
k_top = _define("k_top", "1", "routed experts per token (top-k)")
V = _define("V", "1", "vocabulary size")

# GEMM shapes, generic: C (m x n) = A (m x k) B (k x n)
m = _define("m", "1", "rows of a GEMM's output (token rows, for a weight GEMM)")
n = _define("n", "1", "columns of a GEMM's output")
k_dim = _define("k", "1", "inner (reduction) dimension of a GEMM")
i_in = _define("i", "1", "input width of a weight W of shape (i x o)")
o_out = _define("o", "1", "output width of a weight W of shape (i x o)")
b_rows = _define("b_rows", "token", "rows of x in a linear layer y = x W: tokens in the GEMM")
s = _define("s", "token", "length of one sequence")
bytes_per_element = _define("beta", "byte", "bytes per element (2 for BF16)")
intensity_target = _define(
    "target", "FLOP/byte", "arithmetic intensity to reach (a machine balance)"
)

# Attention heads
n_heads = _define("n_h", "1", "attention heads")
d_head = _define("d_h", "1", "width of one attention head")

# Attention conventions and real lengths (scenario keys attention_flops, attention_kernel,
# sequence_lengths)
a_sq = _define("a", "1", "share of the s x s score square counted (1: full, 1/2: causal)")
kappa = _define(
    r"\kappa", "1", "attention-core backward FLOPs over forward, by kernel (eager 2, flash 5/2)"
)
sum_sq = _define(
    r"\Sigma s^2", "token^2", "sum over a step's samples of the squared length attention runs on"
)
F_lin = _define(
    r"F_{lin}", "FLOP", "linear-attention (gated DeltaNet) core FLOPs of a step, forward+backward"
)

# MoE
ep = _define("e_p", "1", "EP group size: ranks over which one layer's experts are spread")
tokens = _define("t", "token", "tokens that go through one MoE layer (on one rank, or in a step)")

# Memory. Printed "c" like the exercises' fixed share, but a distinct symbol: a count (integer).
chunks = _define(
    "c", "1", "pieces the logits are computed in (chunked cross-entropy)", integer=True
)

# Memory per GPU (derive.activations, derive.model_states)
t_p = _define("t_p", "1", "tensor-parallel size (TP): ranks that split one layer's matrices")
c_p = _define("c_p", "1", "context-parallel size (CP): ranks that split one sequence")
p_p = _define("p_p", "1", "pipeline-parallel size (PP): stages the layers are cut into")
N_d = _define("N_d", "1", "data-parallel ranks over which ZeRO shards the model states")
n_f = _define("n_f", "1", "micro batches whose activations one pipeline stage holds at once")
n_kv = _define("n_kv", "1", "key/value heads (GQA: fewer than the query heads)")
d_ff = _define("d_ff", "1", "intermediate width of a dense SwiGLU MLP")
d_e = _define("d_e", "1", "intermediate width of one routed expert (SwiGLU)")
d_hv = _define("d_hv", "1", "width of one attention value head (MLA: v_head_dim; else d_h)")
r_q = _define("r_q", "1", "MLA query latent width (q_lora_rank)")
r_kv = _define("r_kv", "1", "MLA key/value latent width (kv_lora_rank)")
d_r = _define("d_r", "1", "rotary (RoPE) part of a query/key head (MLA: qk_rope_head_dim)")
Psi = _define(r"\Psi", "1", "parameters one GPU holds before ZeRO shards them")
K_opt = _define("K", "byte", "optimizer-state bytes per parameter (mixed-precision Adam: 12)")
beta_g = _define(r"\beta_g", "byte", "bytes per gradient element (fp32 main grads 4; ZeRO paper 2)")
Psi_l = _define(
    r"\Psi_l", "1", "parameters of the largest layer one GPU holds before ZeRO 3 shards them"
)
f_pre = _define("f_pre", "1", "layers ZeRO 3 gathers ahead of the one computing (prefetch)")

# Recompute
r = sp.Symbol("r", nonnegative=True)  # fraction of the forward pass that is recomputed
MEANING[r] = Meaning("1", "fraction of the weight GEMMs' forward FLOPs recomputed during backward")
r_core = sp.Symbol("r_core", nonnegative=True)
MEANING[r_core] = Meaning(
    "1", "fraction of the attention core's forward recomputed during backward"
)
N_m = sp.Symbol("N_m", positive=True)
MEANING[N_m] = Meaning("1", "matmul parameters per token of the modules recompute redoes")

# Levers (Amdahl and multiplicative gains)
share = _define("f", "1", "part of the step time that a lever speeds up")
x = _define("x", "1", "speedup of that part")
g_1 = _define("g_1", "1", "speedup (gain) of the first lever on the whole step")
g_2 = _define("g_2", "1", "speedup (gain) of the second lever on the whole step")
g_3 = _define("g_3", "1", "speedup (gain) of the third lever on the whole step")
G = _define("G", "1", "speedup of the rest of the step, the untouched part aside")

# Exercises
rate = _define("R", "FLOP/s", "FLOP/s the hardware sustains on this work")
f_now = _define(r"f_{now}", "1", "recompute factor today")
f_new = _define(r"f_{new}", "1", "recompute factor after the change")
fixed_share = _define("c", "1", "share of today's step time that the levers do not touch")
g = _define("g", "1", "speedup of the part of the step the levers do touch")
H = _define("H", "h", "wall time of the run today")

# Linear attention (gated DeltaNet), derive.linear_attention
n_v = _define("n_v", "1", "value heads of a gated-DeltaNet layer", integer=True)
n_k = _define("n_k", "1", "key heads of a gated-DeltaNet layer", integer=True)
d_k = _define("d_k", "1", "key head width of a gated-DeltaNet layer", integer=True)
d_v = _define("d_v", "1", "value head width of a gated-DeltaNet layer", integer=True)
C = _define("C", "token", "chunk size of the chunked gated-delta rule", integer=True)
K_conv = _define("K_conv", "1", "kernel width of the depthwise causal conv1d", integer=True)
L_linear = _define("L_linear", "1", "linear-attention (gated DeltaNet) layers", integer=True)


def describe(symbol: sp.Symbol) -> str:
    """One line: symbol, unit and meaning."""
    meaning = MEANING[symbol]
    return f"{symbol} [{meaning.unit}]: {meaning.text}"


# Communication (derive.communication): collectives, parallel sizes, the links.
# t_p, c_p, p_p and beta_g are defined above (memory per GPU) and shared.
n_r = _define("n_r", "1", "ranks in one collective's group", integer=True)
buffer_bytes = _define(
    "B_c",
    "byte",
    "a collective's whole buffer, nccl-tests' S (for reduce-scatter and all-gather the whole "
    "array: n_r times one rank's share)",
)
g_node = _define("g_n", "1", "ranks of one group on each node it spans", integer=True)
W = _define("W", "byte/s", "link bandwidth of one GPU, one direction")
W_intra = _define("W_intra", "byte/s", "intra-node link (NVLink) of one GPU, one direction")
W_inter = _define("W_inter", "byte/s", "network (NIC) bandwidth of one GPU, one direction")
d_p = _define(
    "d_p", "1", "data-parallel size (CP and PP apart; EP ranks are DP ranks)", integer=True
)
n_mb = _define("n_mb", "1", "micro batches per optimizer step on one pipeline", integer=True)
N_exp = _define("N_exp", "1", "routed-expert parameters: every expert of every MoE layer")
N_rank = _define("N_rank", "1", "parameters one rank holds and keeps in sync with its DP peers")
M_nodes = _define(
    "M_n", "1", "nodes a token's routed copies may reach (node-limited routing; DeepSeek-V3: 4)"
)
M_devices = _define(
    "M_d",
    "1",
    "devices a token's routed copies may reach, each sent once (device-limited routing; "
    "DeepSeek-V2: 3)",
)
beta_dispatch = _define(
    r"\beta_d",
    "byte",
    "bytes per element sent in the EP dispatch direction (BF16: 2; FP8: 1 + a 4-byte scale "
    "per 128)",
)
L_moe = _define("L_moe", "1", "MoE layers")
# The latency of one call (NCCL's cost model: derive.communication, LATENCY).
alpha_0 = _define(r"\alpha_0", "s", "a collective call's base latency")
lam_i = _define(r"\lambda_i", "s", "latency of one ring step inside a node")
lam_n = _define(r"\lambda_n", "s", "latency of one ring step between nodes")
lam_ti = _define(r"\lambda_{ti}", "s", "latency of one tree level inside a node")
lam_tn = _define(r"\lambda_{tn}", "s", "latency of one tree level between nodes")
log_nodes = sp.Symbol("log_N", nonnegative=True, integer=True)
MEANING[log_nodes] = Meaning("1", "floor(log2) of the nodes a group spans (0 inside a node)")
x_node = sp.Symbol("x_n", nonnegative=True, integer=True)
MEANING[x_node] = Meaning("1", "1 where a group spans nodes, else 0")

# Step time (derive.step_time): efficiencies, pipeline schedules, a micro batch's phases.
eta = _define(r"\eta", "1", "a kernel's achieved FLOP/s over the peak P (its efficiency)")
eta_m = _define(r"\eta_m", "1", "achieved HBM bandwidth over BW (memory-bound work)")
v_pp = _define(
    "v", "1", "virtual pipeline stages (model chunks) per GPU, interleaved 1F1B", integer=True
)
t_F = _define("F", "s", "one micro batch's forward through one pipeline stage (one chunk)")
t_B = _define(
    "B_t", "s", "one micro batch's whole backward through one stage (input and weight gradients)"
)
t_W = _define("W_t", "s", "the weight-gradient part of t_B (zero-bubble schedules split it off)")
t_compute = _define("T_c", "s", "compute of one GPU's pipeline stage per step, bubble apart")
Q_mem = _define("Q", "byte", "bytes a memory-bound kernel reads and writes in HBM")
t_gemm_fwd = _define(r"t_{gemm}", "s", "the weight GEMMs' forward time on one GPU per step")
t_core_fwd = _define(r"t_{core}", "s", "the attention core's forward time on one GPU per step")
