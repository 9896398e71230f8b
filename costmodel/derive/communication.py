"""Communication of one training step: bytes each GPU sends, and the time at link speed.

Collectives (NVIDIA nccl-tests, doc/PERFORMANCE.md, "bus bandwidth"). A collective over n_r
ranks of a buffer of B_c bytes (the whole array: for reduce-scatter and all-gather, n_r times one
rank's share) needs, at best, every rank to send

    all-reduce                  2 (n_r - 1) / n_r * B_c
    reduce-scatter, all-gather    (n_r - 1) / n_r * B_c
    all-to-all                    (n_r - 1) / n_r * B_c
    point-to-point (send/recv)                    B_c

over its own link: an all-reduce is n_r - 1 additions and n_r assignments per element, each a
transfer to another rank, spread over n_r links; reduce-scatter is the additions only,
all-gather the assignments only; in an all-to-all each rank keeps 1/n_r of its buffer and sends
the rest. nccl-tests call these factors the bus-bandwidth correction: busbw = algbw x factor is
what is compared with the hardware's one-direction link speed W. So the time is

    time = bytes sent per GPU / W.

A group that spans nodes uses two links, NVLink inside a node (W_intra) and the network card
(W_inter), at the same time; the slower share sets the time. With g_n ranks of the group on
each node (one NIC per GPU):

- ring collectives (all-reduce, reduce-scatter, all-gather): a ring through n_r ranks on
  n_r / g_n nodes has one hop in g_n leaving a node; NCCL runs several rings (channels) that
  enter and leave each node through different NICs, so each GPU's NIC carries 1/g_n of what
  the GPU sends and NVLink the other (g_n - 1)/g_n;
- all-to-all: each rank sends B_c / n_r to every other rank, g_n - 1 of them on its node and
  n_r - g_n elsewhere;
- point-to-point in a chain or ring (pipeline stages, the CP ring): the rank at a node's edge
  sends its whole buffer through its NIC, and the step waits for it.

Per step (bytes one GPU sends). The layers are those of the most loaded pipeline stage: it holds
ceil(L / p_p) layers, and a collective that runs on one kind of layer counts that kind first
(min(L_moe, ceil(L / p_p)) MoE layers): an upper bound whatever the placement. L, L_full and
L_moe count the multi-token-prediction layers when they are trained (each a full layer).

- Micro batches per step on one pipeline (n_mb): the step's rows of S token slots over the d_p
  pipelines, b rows each. Padded, a row is one sample: B / (d_p b). Packed, the documents are
  concatenated into rows of S tokens (Megatron-LM's GPT dataset, the varlen kernels' packed
  rows): D / (S d_p b), not B / (d_p b): a row holds several documents.
- Data parallel (Rajbhandari et al., ZeRO, arXiv:1910.02054; Megatron-LM's distributed
  optimizer). Each rank holds N_rank parameters: the dense part N_total - N_exp split by TP and
  PP, the routed experts also by EP. Ranks holding the same shard: d_p c_p for the dense part
  (CP ranks hold the same weights and see other tokens), d_p c_p / e_p for the experts.
  ZeRO 0: one all-reduce of the gradients (beta_g bytes each) per step. ZeRO 1 (the distributed
  optimizer): the gradients accumulate over the micro batches in a full buffer, then one
  reduce-scatter per step, then an all-gather of the updated weights (beta bytes, BF16).
  ZeRO 2 keeps only its shard of the gradients, so it reduce-scatters each micro batch's
  gradients as its backward produces them (the ZeRO paper, section 5.2: "reduce-scatter"
  during the backward; DeepSpeed's stage 2): n_mb reduce-scatters and one all-gather a step.
  ZeRO 3 gathers the weights again for every micro batch's forward and backward and
  reduce-scatters the gradients per micro batch: with one micro batch and beta_g = beta, 1.5x
  ZeRO 0, as the ZeRO paper says.
- Tensor parallel (Narayanan et al., arXiv:2104.04473, sections 2.3 and 3.2): per layer,
  two all-reduces of the b (S / c_p) h activations in the forward (after the attention or mixer
  block, after the MLP) and two in the backward. With sequence parallelism (Korthikanti et al.,
  arXiv:2205.05198, section 4.2.2) the forward runs two all-gathers and two reduce-scatters, the
  backward their conjugates (two reduce-scatters, two all-gathers) and, since a column-parallel
  layer keeps only its rank's share of its input for the weight gradient, the all-gather of
  that input again (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication): six
  all-gathers and four reduce-scatters a layer, 10 halves of an all-reduce instead of 8.
- Context parallel, by Megatron-LM's --cp-comm-type (TransformerEngine,
  transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py). One rank's
  K and V: its b S / c_p tokens, its TP share of the K/V heads (at least one head: when t_p
  exceeds the K/V heads each rank keeps a copy of one), kv_block = b (S / c_p) max(n_kv / t_p, 1)
  (d_h + d_hv) beta, per full-attention layer:
  p2p (ring attention, AttnFuncWithCPAndKVP2P): the forward passes K/V to the next rank c_p - 1
  times; the backward passes K/V c_p - 1 times and dK/dV c_p - 1 times;
  all_gather (AttnFuncWithCPAndKVAllGather; Megatron spells it `allgather`): the forward
  all-gathers K/V, the backward all-gathers them again and reduce-scatters dK/dV: the same
  bytes as p2p, in ring collectives;
  a2a (DeepSpeed-Ulysses, Jacobs et al., arXiv:2309.14509; AttnFuncWithCPAndQKVOA2A): the
  forward turns Q, K, V from a share of the sequence into a share of the heads with one
  all-to-all each, and O back with a fourth; the backward does the same for dO, dQ, dK, dV.
- Expert parallel (DeepSeek-V3 report, arXiv:2412.19437, section 3.2.2; DeepEP's kernels): per
  MoE layer a dispatch and a combine in the forward; in the backward the combine's gradient
  travels the dispatch's way (to the experts) and the dispatch's gradient the combine's way.
  Each rank sends its t = b S / (c_p t_p) tokens (Megatron-LM runs MoE with TP only with
  sequence parallelism, so each TP rank dispatches its own slice), each to k_top experts.
  With the group on e_p / g_n nodes, g_n ranks on each, per token and transfer:
  over the network, min(k_top, M_n, e_p / g_n) (e_p / g_n - 1) / (e_p / g_n) copies: a token
  crosses the network once per destination node other than its own (per-node de-duplication,
  then forwarded over NVLink), to at most M_n nodes under node-limited routing (DeepSeek-V3:
  4; without it M_n is the group's nodes), the own node being one of them in 1 of e_p / g_n;
  over NVLink, k_top (g_n - 1) / g_n copies: each expert copy reaches its GPU from the sender
  (own node) or from the GPU the network delivered it to (the same local index), unless it is
  that GPU. In one node (g_n = e_p) this is nccl-tests' all-to-all of the t k_top h buffer.
  Bytes per element: beta_d in the dispatch direction (BF16 2; FP8 dispatch 1 + 4/128: E4M3
  and one fp32 scale per 128 channels, DeepEP's format), beta in the combine direction
  (DeepSeek-V3 keeps both combines in BF16).
- Pipeline parallel (arXiv:2104.04473, sections 2.2 and 4.1; Megatron-Core's
  schedules.get_tensor_shapes): per micro batch and stage boundary, the activations
  (S / c_p, b, h) forward and their gradients backward, point-to-point; split over the t_p
  ranks of a stage only with sequence parallelism. The 1F1B bubble is (p_p - 1) / n_mb of the
  ideal time, (p_p - 1) / (n_mb + p_p - 1) of the step.

Latency (NCCL's cost model: NVIDIA/nccl src/graph/tuning.cc, ncclTopoTuneModel, the Simple
protocol of large messages). A call takes its latency plus its bytes over the links. The
latency is a base alpha_0 and one term per step of the algorithm: a ring over n_r ranks on
n_r / g_n nodes takes n_r - 1 steps (an all-reduce 2 (n_r - 1)), of which n_r / g_n - 1 (2 (n_r /
g_n - 1)) cross nodes at lambda_n and the rest stay inside a node at lambda_i; NCCL's tree
all-reduce climbs g_n - 1 ranks in a node and floor(log2(n_r / g_n)) levels between nodes, up
and back down, and NCCL runs whichever is faster, so the all-reduce takes the smaller. A
point-to-point transfer is one step; an all-to-all sends to every peer at once, counted as one
step too (a lower bound). So a ring's latency grows with its ranks: a ZeRO 3 all-gather over
thousands of ranks waits milliseconds per call, whatever its size.

Overlap. A collective hides behind compute it can run beside: the phases' hardware FLOPs at
the GPU's peak (forward: 2ND and the attention core's forward; backward: 4ND, the core's
backward by kernel, and what recompute redoes; the attention core alone), per GPU. That is a
lower bound on the compute time, so the communication left exposed is an upper bound.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive import attention
from costmodel.derive.flops import forward_flops, model_flops
from costmodel.derive.padding import SLOTS
from costmodel.derive.plain import micro_batches  # noqa: F401 (re-exported)
from costmodel.derive.recompute import recompute_factor
from costmodel.derive.symbols import (
    L,
    L_full,
    L_moe,
    M_devices,
    M_nodes,
    N_exp,
    N_rank,
    N_total,
    P,
    S,
    W,
    W_inter,
    W_intra,
    alpha_0,
    b_micro,
    beta_dispatch,
    beta_g,
    buffer_bytes,
    bytes_per_element,
    c_p,
    d_head,
    d_hv,
    d_p,
    ep,
    g_node,
    h,
    k_top,
    lam_i,
    lam_n,
    lam_ti,
    lam_tn,
    log_nodes,
    n_gpu,
    n_heads,
    n_kv,
    n_mb,
    n_r,
    p_p,
    t_p,
    x_node,
)

# ------------------------------------------------------------------ one collective
#: Bytes one GPU sends, buffer B_c over n_r ranks (nccl-tests' bus-bandwidth factors).
all_reduce = 2 * (n_r - 1) / n_r * buffer_bytes
reduce_scatter = (n_r - 1) / n_r * buffer_bytes
all_gather = (n_r - 1) / n_r * buffer_bytes
all_to_all = (n_r - 1) / n_r * buffer_bytes
point_to_point = buffer_bytes

COLLECTIVES: dict[str, sp.Expr] = {
    "all-reduce": all_reduce,
    "reduce-scatter": reduce_scatter,
    "all-gather": all_gather,
    "all-to-all": all_to_all,
    "point-to-point": point_to_point,
}
#: The collectives NCCL runs as rings (their traffic crosses nodes on one hop in g_n).
RINGS = ("all-reduce", "reduce-scatter", "all-gather")

#: Nodes a group of n_r ranks spans with g_n of them on each (1: inside a node).
group_nodes = n_r / g_node
#: Steps of a ring collective, and those of its steps that cross nodes.
RING_STEPS = {
    "all-reduce": (2 * (n_r - 1), 2 * (group_nodes - 1)),
    "reduce-scatter": (n_r - 1, group_nodes - 1),
    "all-gather": (n_r - 1, group_nodes - 1),
}
#: A ring's latency: the base, its steps inside nodes and between them.
ring_latency = {
    kind: alpha_0 + (steps - inter) * lam_i + inter * lam_n
    for kind, (steps, inter) in RING_STEPS.items()
}
#: A tree all-reduce's latency: up and down g_n - 1 ranks in a node and log2 of the nodes.
tree_latency = alpha_0 + 2 * ((g_node - 1) * lam_ti + log_nodes * lam_tn)
#: One step: a send to the next rank (inside a node, or across: x_n), or to every peer at once.
one_step_latency = alpha_0 + lam_i + x_node * (lam_n - lam_i)
#: The latency of one call of each kind (module docstring, "Latency").
LATENCY: dict[str, sp.Expr] = {
    "all-reduce": sp.Min(ring_latency["all-reduce"], tree_latency),
    "reduce-scatter": ring_latency["reduce-scatter"],
    "all-gather": ring_latency["all-gather"],
    "all-to-all": one_step_latency,
    "point-to-point": one_step_latency,
}

#: Time of an all-reduce on one link: bytes sent per GPU / one-direction bandwidth.
all_reduce_time = all_reduce / W


def collective_time(kind: str) -> sp.Expr:
    """Seconds of one collective of `kind` on a link of W byte/s per GPU, one direction."""
    return COLLECTIVES[kind] / W


def across_nodes(kind: str) -> tuple[sp.Expr, sp.Expr]:
    """(intra-node bytes, network bytes) one GPU sends when the group spans several nodes with
    g_n of its ranks on each."""
    sent = COLLECTIVES[kind]
    if kind in RINGS:
        return sent * (g_node - 1) / g_node, sent / g_node
    if kind == "all-to-all":
        return (g_node - 1) / n_r * buffer_bytes, (n_r - g_node) / n_r * buffer_bytes
    return sp.Integer(0), sent  # point-to-point: the rank at a node's edge sends it all


def time_across_nodes(kind: str) -> sp.Expr:
    """Seconds of one collective over a group spanning nodes: both links work at once, the
    slower share sets the time."""
    intra, inter = across_nodes(kind)
    return sp.Max(intra / W_intra, inter / W_inter)


# ------------------------------------------------------------------ micro batches
#: Micro batches per step on one pipeline: the step's rows of S token slots (derive.padding's
#: SLOTS: padded B S, packed D) over d_p pipelines of b rows each.
MICRO_BATCHES: dict[str, sp.Expr] = {
    batching: slots / (S * d_p * b_micro) for batching, slots in SLOTS.items()
}


# ------------------------------------------------------------------ the most loaded stage
#: Layers of the most loaded pipeline stage, and of each kind on it (that kind first).
stage_layers = sp.ceiling(L / p_p)
stage_full_attention_layers = sp.Min(L_full, stage_layers)
stage_moe_layers = sp.Min(L_moe, stage_layers)

# ------------------------------------------------------------------ data parallel
#: Parameters one rank holds: the dense part (split by TP and PP), the experts (also by EP).
dense_params_per_rank = (N_total - N_exp) / (t_p * p_p)
expert_params_per_rank = N_exp / (t_p * p_p * ep)
#: Ranks holding the same shard, among which gradients are reduced.
dense_dp_group = d_p * c_p
expert_dp_group = d_p * c_p / ep

_share = (n_r - 1) / n_r * N_rank
#: ZeRO 0: one all-reduce of the gradients per step.
dp_zero0 = 2 * _share * beta_g
#: ZeRO 1: one reduce-scatter of the accumulated gradients, one all-gather of the updated BF16
#: weights.
dp_grad_reduce_scatter = _share * beta_g
dp_param_all_gather = _share * bytes_per_element
dp_zero1 = dp_grad_reduce_scatter + dp_param_all_gather
#: ZeRO 2: each micro batch's gradients reduce-scattered, the weights gathered once.
dp_zero2 = n_mb * dp_grad_reduce_scatter + dp_param_all_gather
#: ZeRO 3: per micro batch, the weights gathered for the forward and for the backward, the
#: gradients reduce-scattered.
dp_zero3 = n_mb * (2 * dp_param_all_gather + dp_grad_reduce_scatter)

# ------------------------------------------------------------------ tensor parallel
#: Activations one TP collective carries: a micro batch's tokens on this CP rank, h wide.
tp_buffer = b_micro * (S / c_p) * h * bytes_per_element
#: Per layer and micro batch, by sequence parallelism: (kind, calls forward, calls backward).
#: Without it, two all-reduces each way; with it, two all-gathers and two reduce-scatters
#: forward, and backward the conjugates plus the inputs of the two column-parallel layers
#: gathered again.
TP_COLLECTIVES: dict[bool, tuple[tuple[str, int, int], ...]] = {
    False: (("all-reduce", 2, 2),),
    True: (("all-gather", 2, 4), ("reduce-scatter", 2, 2)),
}


def _tp_step(sequence_parallel: bool) -> sp.Expr:
    return (
        stage_layers
        * n_mb
        * sum(
            (forward + backward) * COLLECTIVES[kind].subs({n_r: t_p, buffer_bytes: tp_buffer})
            for kind, forward, backward in TP_COLLECTIVES[sequence_parallel]
        )
    )


tp_step = _tp_step(False)
tp_step_sequence_parallel = _tp_step(True)

# ------------------------------------------------------------------ context parallel
#: K/V heads on one TP rank (at least one: with t_p above n_kv, a copy of one head).
kv_heads_per_rank = sp.Max(n_kv / t_p, 1)
#: K and V of this CP rank's S / c_p tokens of one micro batch, its TP share of the heads.
kv_block = b_micro * (S / c_p) * kv_heads_per_rank * (d_head + d_hv) * bytes_per_element
#: Q, K, V and O of this CP rank's tokens (a2a: each moved by one all-to-all).
qkvo_block = b_micro * (S / c_p) * (n_heads / t_p + kv_heads_per_rank) * (d_head + d_hv)
qkvo_block *= bytes_per_element
#: Per full-attention layer and micro batch, by cp_comm_type: (kind, buffer, calls forward,
#: calls backward). a2a's four all-to-alls each way are counted as one of their summed buffer.
CP_COLLECTIVES: dict[str, tuple[tuple[str, sp.Expr, sp.Expr, sp.Expr], ...]] = {
    "p2p": (("point-to-point", kv_block, c_p - 1, 2 * (c_p - 1)),),
    "all_gather": (
        ("all-gather", c_p * kv_block, sp.Integer(1), sp.Integer(1)),
        ("reduce-scatter", c_p * kv_block, sp.Integer(0), sp.Integer(1)),
    ),
    "a2a": (("all-to-all", qkvo_block, sp.Integer(1), sp.Integer(1)),),
}


def cp_step(cp_comm_type: str) -> sp.Expr:
    """Bytes one GPU sends per step for context parallelism of `cp_comm_type`."""
    return (
        stage_full_attention_layers
        * n_mb
        * sum(
            (forward + backward) * COLLECTIVES[kind].subs({n_r: c_p, buffer_bytes: buffer})
            for kind, buffer, forward, backward in CP_COLLECTIVES[cp_comm_type]
        )
    )


# ------------------------------------------------------------------ expert parallel
#: Tokens one rank dispatches per micro batch and MoE layer.
ep_tokens = b_micro * S / (c_p * t_p)
#: Nodes one EP group spans (g_n of its ranks on each).
ep_nodes = ep / g_node
#: Copies of one token per transfer: over the network once per destination node but its own,
#: at most M_n nodes; over NVLink once per expert copy, but the one landing on its GPU.
ep_network_copies = sp.Min(k_top, M_nodes, ep_nodes) * (ep_nodes - 1) / ep_nodes
ep_nvlink_copies = k_top * (g_node - 1) / g_node
#: FP8 dispatch: one E4M3 byte per element and one fp32 scale per 128 channels (DeepEP).
FP8_DISPATCH_BYTES = 1 + sp.Rational(4, 128)
#: Bytes per element in each direction: dispatch (to the experts: the forward's dispatch, the
#: backward's combine gradient) and combine (back: the forward's combine, the backward's
#: dispatch gradient).
EP_DIRECTIONS: dict[str, sp.Symbol] = {"dispatch": beta_dispatch, "combine": bytes_per_element}
#: One transfer of one MoE layer and micro batch in a direction, bytes per element aside: the
#: all-to-all's buffer (every token once per chosen expert), and what one GPU sends on each link.
ep_buffer = ep_tokens * k_top * h
ep_network_bytes = ep_tokens * ep_network_copies * h
ep_nvlink_bytes = ep_tokens * ep_nvlink_copies * h
#: Device-limited routing with per-device de-duplication (DeepSeek-V2, arXiv:2405.04434,
#: section 2.2.2): a token's experts lie on at most M_d GPUs and it travels once per GPU, not
#: once per expert: min(k_top, M_d, e_p) copies, of which the network carries one per node
#: other than its own (at most M_d nodes too) and NVLink each one the network did not deliver
#: to its GPU.
ep_device_copies = sp.Min(k_top, M_devices, ep)
ep_network_copies_device = sp.Min(k_top, M_nodes, ep_nodes, M_devices) * (ep_nodes - 1) / ep_nodes
ep_nvlink_copies_device = ep_device_copies * (g_node - 1) / g_node
ep_network_bytes_device = ep_tokens * ep_network_copies_device * h
ep_nvlink_bytes_device = ep_tokens * ep_nvlink_copies_device * h
#: Per step: both directions, forward and backward, on the stage's MoE layers.
ep_step_network = stage_moe_layers * n_mb * 2 * (beta_dispatch + bytes_per_element)
ep_step_network *= ep_network_bytes
ep_step_nvlink = stage_moe_layers * n_mb * 2 * (beta_dispatch + bytes_per_element)
ep_step_nvlink *= ep_nvlink_bytes

# ------------------------------------------------------------------ pipeline parallel
#: Activations sent across one stage boundary per micro batch: (S / c_p, b, h), split over the
#: stage's TP ranks with sequence parallelism.
pp_buffer = b_micro * S * h * bytes_per_element / c_p
pp_buffer_sequence_parallel = pp_buffer / t_p
#: A middle stage sends each micro batch's activations forward and its gradients backward.
pp_step = 2 * n_mb * pp_buffer
pp_step_sequence_parallel = 2 * n_mb * pp_buffer_sequence_parallel
#: The 1F1B bubble: share of the step the stages wait, and over the ideal time.
bubble_fraction = (p_p - 1) / (n_mb + p_p - 1)
bubble_over_ideal = (p_p - 1) / n_mb

# ------------------------------------------------------------------ the compute it hides behind
#: Hardware FLOPs of a step by phase (the cluster's): the forward (2ND and the attention
#: core's forward), the backward (4ND, the core's backward by kernel, and what recompute
#: redoes of both), the attention core alone (forward and backward).
forward_phase_flops = forward_flops + attention.attention_actual / (
    1 + attention.BACKWARD_OVER_FORWARD
)
backward_phase_flops = (
    recompute_factor * model_flops + attention.attention_actual_hardware - forward_phase_flops
)
attention_core_flops = attention.attention_actual_hardware
#: Seconds of a phase on one GPU at its peak: a lower bound on its compute time.
PHASE_SECONDS: dict[str, sp.Expr] = {
    name: sp.cancel(flops / (n_gpu * P))
    for name, flops in (
        ("forward", forward_phase_flops),
        ("backward", backward_phase_flops),
        ("attention", attention_core_flops),
    )
}
