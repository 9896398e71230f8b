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

Per step (bytes one GPU sends; layers per stage L / p_p, the most loaded stage may have more):

- Data parallel (Rajbhandari et al., ZeRO, arXiv:1910.02054; Megatron-LM's distributed
  optimizer). Each rank holds N_rank parameters: the dense part N_total - N_exp split by TP and
  PP, the routed experts also by EP. Ranks holding the same shard: d_p c_p for the dense part
  (CP ranks hold the same weights and see other tokens), d_p c_p / e_p for the experts.
  ZeRO 0: one all-reduce of the gradients (beta_g bytes each) per step. ZeRO 1 and 2: a
  reduce-scatter of the gradients, then an all-gather of the updated weights (beta bytes, BF16);
  the same volume when beta_g = beta. ZeRO 3 gathers the weights again for every micro batch's
  forward and backward and reduce-scatters the gradients per micro batch: with one micro batch
  and beta_g = beta, 1.5x ZeRO 0, as the ZeRO paper says.
- Tensor parallel (Narayanan et al., arXiv:2104.04473, sections 2.3 and 3.2): per layer,
  two all-reduces of the b (S / c_p) h activations in the forward (after the attention or mixer
  block, after the MLP) and two in the backward. With sequence parallelism (Korthikanti et al.,
  arXiv:2205.05198) each all-reduce becomes an all-gather plus a reduce-scatter: the same bytes.
- Context parallel (ring attention): per full-attention layer the c_p ranks pass their K and V
  blocks, b (S / c_p) d_kv each, around the ring c_p - 1 times in the forward; the backward
  passes K, V and their gradients (4 blocks).
- Expert parallel (DeepSeek-V3 report, arXiv:2412.19437): per MoE layer an all-to-all dispatch
  and an all-to-all combine in the forward, the same two in the backward, each of the rank's
  tokens x k_top x h x beta (every token sent once per chosen expert). The rank's tokens are
  b S / (c_p t_p): Megatron-LM runs MoE with TP only with sequence parallelism, so each TP rank
  dispatches its own slice.
- Pipeline parallel (arXiv:2104.04473, sections 2.2, 3.2 and 4.1): per micro batch and stage
  boundary, the activations b S h / c_p forward and their gradients backward, point-to-point;
  the paper's scatter/gather optimization splits them over the t_p ranks of a stage. The 1F1B
  bubble is (p_p - 1) / n_mb of the ideal time, (p_p - 1) / (n_mb + p_p - 1) of the step.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.symbols import (
    L,
    L_full,
    L_moe,
    N_exp,
    N_rank,
    N_total,
    S,
    W,
    W_inter,
    W_intra,
    b_micro,
    beta_g,
    buffer_bytes,
    bytes_per_element,
    c_p,
    d_kv,
    d_p,
    ep,
    g_node,
    h,
    k_top,
    n_mb,
    n_r,
    p_p,
    t_p,
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
#: ZeRO 1/2: reduce-scatter of the gradients, all-gather of the updated BF16 weights.
dp_grad_reduce_scatter = _share * beta_g
dp_param_all_gather = _share * bytes_per_element
dp_zero12 = dp_grad_reduce_scatter + dp_param_all_gather
#: ZeRO 3: per micro batch, the weights gathered for the forward and for the backward, the
#: gradients reduce-scattered.
dp_zero3 = n_mb * (2 * dp_param_all_gather + dp_grad_reduce_scatter)

# ------------------------------------------------------------------ tensor parallel
#: Activations one TP collective carries: a micro batch's tokens on this CP rank, h wide.
tp_buffer = b_micro * (S / c_p) * h * bytes_per_element
_tp_layers = L / p_p * n_mb
#: Two all-reduces per layer forward, two backward.
tp_forward = _tp_layers * 2 * all_reduce.subs({n_r: t_p, buffer_bytes: tp_buffer})
tp_backward = tp_forward
tp_step = tp_forward + tp_backward
#: With sequence parallelism: each all-reduce is an all-gather + a reduce-scatter.
tp_step_sequence_parallel = (
    _tp_layers * 4 * (all_gather + reduce_scatter).subs({n_r: t_p, buffer_bytes: tp_buffer})
)

# ------------------------------------------------------------------ context parallel
#: One K (or V) block of this CP rank: its S / c_p tokens of one micro batch.
cp_block = b_micro * (S / c_p) * d_kv * bytes_per_element
_cp_layers = L_full / p_p * n_mb
#: Forward: K and V passed c_p - 1 times; backward: K, V, dK, dV.
cp_forward = _cp_layers * (c_p - 1) * 2 * cp_block
cp_backward = _cp_layers * (c_p - 1) * 4 * cp_block
cp_step = cp_forward + cp_backward

# ------------------------------------------------------------------ expert parallel
#: Tokens one rank dispatches per micro batch and MoE layer.
ep_tokens = b_micro * S / (c_p * t_p)
#: The all-to-all buffer: every token sent once per chosen expert.
ep_buffer = ep_tokens * k_top * h * bytes_per_element
_ep_layers = L_moe / p_p * n_mb
#: Dispatch + combine in the forward, the same two in the backward.
ep_forward = _ep_layers * 2 * all_to_all.subs({n_r: ep, buffer_bytes: ep_buffer})
ep_backward = ep_forward
ep_step = ep_forward + ep_backward

# ------------------------------------------------------------------ pipeline parallel
#: Activations sent across one stage boundary per micro batch (split over the stage's TP ranks).
pp_buffer = b_micro * S * h * bytes_per_element / (c_p * t_p)
#: A middle stage sends each micro batch's activations forward and its gradients backward.
pp_step = 2 * n_mb * pp_buffer
#: The 1F1B bubble: share of the step the stages wait, and over the ideal time.
bubble_fraction = (p_p - 1) / (n_mb + p_p - 1)
bubble_over_ideal = (p_p - 1) / n_mb
