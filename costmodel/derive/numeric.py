"""GENERATED from the SymPy derivations by costmodel.derive.numeric_forms: do not edit.
Regenerate with `make numeric` (`python -m costmodel.numeric_build`);
tests/derive/test_numeric.py fails when this file is stale.

Each function takes `v`, a mapping from the names of costmodel.derive.symbols to numbers, and
evaluates one derived expression as SymPy evaluates it (integers stay exact: Fractions).
"""

# ruff: noqa: E501

import math
from fractions import Fraction as _Q


def _inv(x):
    return 1 / x if isinstance(x, float) else _Q(1) / x


def _pow(x, n):
    return float(_Q(x) ** n) if isinstance(x, float) else x**n


def _inv_pow(x, n):
    """1 / x**n as SymPy's Floats compute it (mpmath: x**n to 58 bits, then its inverse)."""
    if not isinstance(x, float):
        return _Q(1) / x**n
    power = _Q(x) ** n
    shift = 58 - (power.numerator.bit_length() - power.denominator.bit_length())
    while not (1 << 57) <= power * _Q(2) ** shift < (1 << 58):
        shift += 1 if power * _Q(2) ** shift < (1 << 57) else -1
    rounded = _Q(round(power * _Q(2) ** shift), 1) / _Q(2) ** shift
    return float(1 / rounded)


def _ceil(x):
    return math.ceil(x)

SQUARE_FRACTION = {'full': 1, 'causal': _Q(1, 2)}
KERNEL_BACKWARD_OVER_FORWARD = {'eager': 2, 'flash': _Q(5, 2)}
CONVENTION_NAMES = {'course': 'course (3x, full square)', 'causal': 'causal (3x, half square)', 'flash': 'FlashAttention (3.5x, full square)', 'flash_causal': 'FlashAttention causal (3.5x, half square)'}
RECOMPUTE_POLICIES = {'none': 0, 'selective': _Q(3, 10), 'full': 1}
PADDING_FIGURES = ('slots', 'useful_fraction', 'waste_fraction', 'packing_speedup', 'step_time_after_packing', 'mfu_after_packing', 'hfu_of_slots')
BATCHINGS = ('padded', 'packed')
SCHEDULES = ('1f1b', 'interleaved', 'zero_bubble', 'dualpipe')
FP8_DISPATCH_BYTES = _Q(33, 32)
COLLECTIVE_KINDS = ('all-reduce', 'reduce-scatter', 'all-gather', 'all-to-all', 'point-to-point')
TP_COLLECTIVES = {False: (('all-reduce', 2, 2),), True: (('all-gather', 2, 4), ('reduce-scatter', 2, 2))}
CP_COLLECTIVES = {'p2p': ('point-to-point',), 'all_gather': ('all-gather', 'reduce-scatter'), 'a2a': ('all-to-all',)}
EP_DIRECTIONS = ('dispatch', 'combine')
ACCOUNT_FIGURES = ('model_flops_per_step', 'hardware_flops_per_step', 'recompute_factor', 'achieved_flops_per_s', 'achieved_flops_per_s_per_gpu', 'mfu', 'hfu', 'tokens_per_s', 'tokens_per_s_per_gpu', 'mfu_if_total_params', 'mfu_from_measured_tokens_per_s', 'padded.slots', 'padded.useful_fraction', 'padded.waste_fraction', 'padded.packing_speedup', 'padded.step_time_after_packing', 'padded.mfu_after_packing', 'padded.hfu_of_slots', 'packed.slots', 'packed.useful_fraction', 'packed.waste_fraction', 'packed.packing_speedup', 'packed.step_time_after_packing', 'packed.mfu_after_packing', 'packed.hfu_of_slots', 'attention_padded', 'attention_actual', 'attention_padded_hardware', 'attention_actual_hardware', 'share_padded', 'share_actual', 'mfu_with_attention_padded', 'mfu_with_attention_actual', 'hfu_with_attention_padded', 'hfu_with_attention_actual', 'linear_attention_hardware', 'linear_share', 'logits_bytes', 'machine_balance', 'tokens_per_expert')
ACCOUNT_ARGS = ('B', 'BW', 'D', 'E', 'F_lin', 'L_full', 'N', 'N_total', 'P', 'S', 'T', 'V', 'sum_sq', 'kappa', 'a_sq', 'b_micro', 'd_attn', 'k_top', 'n_gpu', 'r', 'r_core', 'tau')


def account_figures(B, BW, D, E, F_lin, L_full, N, N_total, P, S, T, V, sum_sq, kappa, a_sq, b_micro, d_attn, k_top, n_gpu, r, r_core, tau):
    return [6*D*N, 6*D*N*((1/3)*r + 1), (1/3)*r + 1, 6*D*N/T, 6*D*N/(T*n_gpu), 6*D*N/(P*T*n_gpu), 6*D*N*((1/3)*r + 1)/(P*T*n_gpu), D/T, D/(T*n_gpu), 6*D*N_total/(P*T*n_gpu), 6*N*tau/(P*n_gpu), B*S, D/(B*S), 1 - D/(B*S), B*S/D, D*T/(B*S), 6*B*N*S/(P*T*n_gpu), 6*B*N*S*((1/3)*r + 1)/(P*T*n_gpu), D, 1, 0, 1, T, 6*D*N/(P*T*n_gpu), 6*D*N*((1/3)*r + 1)/(P*T*n_gpu), 12*B*L_full*S**2*a_sq*d_attn, 12*sum_sq*L_full*a_sq*d_attn, 12*B*L_full*S**2*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3), 12*sum_sq*L_full*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3), 12*B*L_full*S**2*a_sq*d_attn/(F_lin + 12*B*L_full*S**2*a_sq*d_attn + 6*D*N), 12*sum_sq*L_full*a_sq*d_attn/(12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N), (F_lin + 12*B*L_full*S**2*a_sq*d_attn + 6*D*N)/(P*T*n_gpu), (12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N)/(P*T*n_gpu), (F_lin*((1/3)*r_core + 1) + 12*B*L_full*S**2*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3) + 6*D*N*((1/3)*r + 1))/(P*T*n_gpu), (12*sum_sq*L_full*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3) + F_lin*((1/3)*r_core + 1) + 6*D*N*((1/3)*r + 1))/(P*T*n_gpu), F_lin*((1/3)*r_core + 1), F_lin/(12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N), 2*S*V*b_micro, P/BW, D*k_top/E]


def comm_n_mb(v):
    return v["n_mb"]


def comm_two_n_mb(v):
    return (2 * v["n_mb"])


def comm_sent_all_reduce(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * ((-2) + (2 * v["n_r"])))


def comm_intra_all_reduce(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-2) + (2 * v["n_r"])))


def comm_inter_all_reduce(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-2) + (2 * v["n_r"])))


def comm_sent_reduce_scatter(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"]))


def comm_intra_reduce_scatter(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-1) + v["n_r"]))


def comm_inter_reduce_scatter(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["n_r"]))


def comm_sent_all_gather(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"]))


def comm_intra_all_gather(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-1) + v["n_r"]))


def comm_inter_all_gather(v):
    return (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["n_r"]))


def comm_sent_all_to_all(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"]))


def comm_intra_all_to_all(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["g_node"]))


def comm_inter_all_to_all(v):
    return (v["buffer_bytes"] * _inv(v["n_r"]) * (v["n_r"] + ((-1) * v["g_node"])))


def comm_sent_point_to_point(v):
    return v["buffer_bytes"]


def comm_intra_point_to_point(v):
    return 0


def comm_inter_point_to_point(v):
    return v["buffer_bytes"]


def comm_dp_dense_grads(v):
    return (v["beta_g"] * _inv(v["p_p"]) * _inv(v["t_p"]) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_weights(v):
    return (v["bytes_per_element"] * _inv(v["p_p"]) * _inv(v["t_p"]) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_zero0(v):
    return (2 * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_reduce_scatter(v):
    return (v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_reduce_scatter_each(v):
    return (v["beta_g"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_all_gather(v):
    return (v["bytes_per_element"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_dense_all_gathers_zero3(v):
    return (2 * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"])))


def comm_dp_experts_grads(v):
    return (v["N_exp"] * v["beta_g"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"]))


def comm_dp_experts_weights(v):
    return (v["N_exp"] * v["bytes_per_element"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"]))


def comm_dp_experts_zero0(v):
    return (2 * v["N_exp"] * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"]))))


def comm_dp_experts_reduce_scatter(v):
    return (v["N_exp"] * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"]))))


def comm_dp_experts_reduce_scatter_each(v):
    return (v["N_exp"] * v["beta_g"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"]))))


def comm_dp_experts_all_gather(v):
    return (v["N_exp"] * v["bytes_per_element"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"]))))


def comm_dp_experts_all_gathers_zero3(v):
    return (2 * v["N_exp"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"]))))


def comm_tp_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"]))


def comm_tp_0_0_all_reduce_calls(v):
    return (4 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_0_0_all_reduce_bytes(v):
    return (4 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-2) + (2 * v["t_p"])) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_0_1_all_reduce_calls(v):
    return (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_0_1_all_reduce_bytes(v):
    return (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-2) + (2 * v["t_p"])) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_0_all_gather_calls(v):
    return (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_0_all_gather_bytes(v):
    return (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_0_reduce_scatter_calls(v):
    return (4 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_0_reduce_scatter_bytes(v):
    return (4 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_1_all_gather_calls(v):
    return (8 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_1_all_gather_bytes(v):
    return (8 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_1_reduce_scatter_calls(v):
    return (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_tp_1_1_reduce_scatter_bytes(v):
    return (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"]))))


def comm_cp_p2p_0_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_p2p_0_0_calls(v):
    return (v["n_mb"] * ((-3) + (3 * v["c_p"])) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_p2p_0_0_bytes(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-3) + (3 * v["c_p"])) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_p2p_1_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_p2p_1_0_calls(v):
    return (v["n_mb"] * ((-4) + (4 * v["c_p"])) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_p2p_1_0_bytes(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-4) + (4 * v["c_p"])) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_0_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_all_gather_0_0_calls(v):
    return (2 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_0_0_bytes(v):
    return (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_0_1_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_all_gather_0_1_calls(v):
    return (v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_0_1_bytes(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_1_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_all_gather_1_0_calls(v):
    return (3 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_1_0_bytes(v):
    return (3 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_1_1_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))))


def comm_cp_all_gather_1_1_calls(v):
    return (v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_all_gather_1_1_bytes(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_a2a_0_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))))


def comm_cp_a2a_0_0_calls(v):
    return (2 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_a2a_0_0_bytes(v):
    return (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv_pow(v["c_p"], 2) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_a2a_1_0_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))))


def comm_cp_a2a_1_0_calls(v):
    return (3 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_cp_a2a_1_0_bytes(v):
    return (3 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv_pow(v["c_p"], 2) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_ep_0_calls(v):
    return (2 * v["n_mb"] * min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_ep_1_calls(v):
    return (3 * v["n_mb"] * min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"])))))


def comm_ep_dispatch_buffer(v):
    return (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]))


def comm_ep_dispatch_nvlink(v):
    return (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"]))


def comm_ep_dispatch_network(v):
    return (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"]))))


def comm_ep_combine_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]))


def comm_ep_combine_nvlink(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"]))


def comm_ep_combine_network(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"]))))


def comm_pp_buffer(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"]))


def comm_pp_buffer_sequence_parallel(v):
    return (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"]) * _inv(v["t_p"]))


def comm_pp_step(v):
    return (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]))


def comm_pp_step_sequence_parallel(v):
    return (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]))


def comm_bubble_fraction(v):
    return (_inv(((-1) + v["p_p"] + v["n_mb"])) * ((-1) + v["p_p"]))


def micro_batches_padded(v):
    return (v["B"] * _inv(v["b_micro"]) * _inv(v["d_p"]))


def micro_batches_packed(v):
    return (v["D"] * _inv(v["S"]) * _inv(v["b_micro"]) * _inv(v["d_p"]))


def bubble_1f1b(v):
    return (_inv(v["n_mb"]) * ((-1) + v["p_p"]))


def bubble_interleaved(v):
    return (_inv(v["n_mb"]) * _inv(v["v_pp"]) * ((-1) + v["p_p"]))


def bubble_zero_bubble(v):
    return 0


def bubble_dualpipe(v):
    return (_Q(1, 3) * _inv(v["n_mb"]) * ((-2) + v["p_p"]))


def model_state_weights_0(v):
    return (v["Psi"] * v["bytes_per_element"])


def model_state_weights_1(v):
    return (v["Psi"] * v["bytes_per_element"])


def model_state_weights_2(v):
    return (v["Psi"] * v["bytes_per_element"])


def model_state_weights_3(v):
    return (v["Psi"] * v["bytes_per_element"] * _inv(v["N_d"]))


def model_state_gradients_0(v):
    return (v["Psi"] * v["beta_g"])


def model_state_gradients_1(v):
    return (v["Psi"] * v["beta_g"])


def model_state_gradients_2(v):
    return (v["Psi"] * v["beta_g"] * _inv(v["N_d"]))


def model_state_gradients_3(v):
    return (v["Psi"] * v["beta_g"] * _inv(v["N_d"]))


def model_state_optimizer_0(v):
    return (v["K_opt"] * v["Psi"])


def model_state_optimizer_1(v):
    return (v["K_opt"] * v["Psi"] * _inv(v["N_d"]))


def model_state_optimizer_2(v):
    return (v["K_opt"] * v["Psi"] * _inv(v["N_d"]))


def model_state_optimizer_3(v):
    return (v["K_opt"] * v["Psi"] * _inv(v["N_d"]))


def attention_actual(v):
    return (12 * v["L_full"] * v["sum_sq"] * v["a_sq"] * v["d_attn"])


def linear_core_forward_per_token(v):
    return (((-1) * v["d_k"] * v["n_v"]) + ((-1) * v["d_v"] * v["n_v"]) + (3 * v["C"] * v["d_v"] * v["n_v"]) + (5 * v["C"] * v["d_k"] * v["n_v"]) + (6 * v["d_k"] * v["d_v"] * v["n_v"]))


def linear_conv_forward_per_token(v):
    return (v["K_conv"] * ((2 * v["d_v"] * v["n_v"]) + (4 * v["d_k"] * v["n_k"])))


def linear_core_training(v):
    return (((-3) * v["D"] * v["L_linear"] * v["d_k"] * v["n_v"]) + ((-3) * v["D"] * v["L_linear"] * v["d_v"] * v["n_v"]) + (9 * v["D"] * v["C"] * v["L_linear"] * v["d_v"] * v["n_v"]) + (15 * v["D"] * v["C"] * v["L_linear"] * v["d_k"] * v["n_v"]) + (18 * v["D"] * v["L_linear"] * v["d_k"] * v["d_v"] * v["n_v"]))


def expert_rows(v):
    return (((((1 * _inv(v["E"])) * v["S"]) * v["b_micro"]) * v["ep"]) * v["k_top"])


def sum_sq_of_mean(v):
    return ((1 * v["B"]) * _pow(v["s_mean"], 2))


def modules_fraction(v):
    return ((1 * _inv(v["N"])) * v["N_m"])
