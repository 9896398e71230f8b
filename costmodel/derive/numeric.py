"""GENERATED from the SymPy derivations (costmodel.derive.numeric_forms) by
costmodel.generate.numeric: do not edit. Regenerate with `make numeric` (`python -m costmodel.generate.numeric`);
tests/derive/test_numeric.py fails when this file is stale.

Each form takes `v`, a mapping from the names of costmodel.derive.symbols to numbers, and
evaluates one derived expression as SymPy evaluates it (integers stay exact: Fractions). The
forms are in tables (dicts) keyed by name, as costmodel.derive.numeric_forms keys them: a caller
names its form (`COMM["bubble_fraction"]`), or a scenario's choice (`BUBBLE[schedule]`).
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
CP_COLLECTIVES = {'p2p': ('point-to-point',), 'all_gather': ('all-gather', 'reduce-scatter'), 'a2a': ('all-to-all',)}
ACCOUNT_FIGURES = ('model_flops_per_step', 'hardware_flops_per_step', 'recompute_factor', 'achieved_flops_per_s', 'achieved_flops_per_s_per_gpu', 'mfu', 'hfu', 'tokens_per_s', 'tokens_per_s_per_gpu', 'mfu_if_total_params', 'mfu_from_measured_tokens_per_s', 'padded.slots', 'padded.useful_fraction', 'padded.waste_fraction', 'padded.packing_speedup', 'padded.step_time_after_packing', 'padded.mfu_after_packing', 'padded.hfu_of_slots', 'packed.slots', 'packed.useful_fraction', 'packed.waste_fraction', 'packed.packing_speedup', 'packed.step_time_after_packing', 'packed.mfu_after_packing', 'packed.hfu_of_slots', 'attention_padded', 'attention_actual', 'attention_padded_hardware', 'attention_actual_hardware', 'share_padded', 'share_actual', 'mfu_with_attention_padded', 'mfu_with_attention_actual', 'hfu_with_attention_padded', 'hfu_with_attention_actual', 'linear_attention_hardware', 'linear_share', 'logits_bytes', 'machine_balance', 'tokens_per_expert')
ACCOUNT_ARGS = ('B', 'BW', 'D', 'E', 'F_lin', 'L_full', 'N', 'N_total', 'P', 'S', 'T', 'V', 'sum_sq', 'kappa', 'a_sq', 'b_micro', 'd_attn', 'k_top', 'n_gpu', 'r', 'r_core', 'tau')


def account_figures(B, BW, D, E, F_lin, L_full, N, N_total, P, S, T, V, sum_sq, kappa, a_sq, b_micro, d_attn, k_top, n_gpu, r, r_core, tau):
    return [6*D*N, 6*D*N*((1/3)*r + 1), (1/3)*r + 1, 6*D*N/T, 6*D*N/(T*n_gpu), 6*D*N/(P*T*n_gpu), 6*D*N*((1/3)*r + 1)/(P*T*n_gpu), D/T, D/(T*n_gpu), 6*D*N_total/(P*T*n_gpu), 6*N*tau/(P*n_gpu), B*S, D/(B*S), 1 - D/(B*S), B*S/D, D*T/(B*S), 6*B*N*S/(P*T*n_gpu), 6*B*N*S*((1/3)*r + 1)/(P*T*n_gpu), D, 1, 0, 1, T, 6*D*N/(P*T*n_gpu), 6*D*N*((1/3)*r + 1)/(P*T*n_gpu), 12*B*L_full*S**2*a_sq*d_attn, 12*sum_sq*L_full*a_sq*d_attn, 12*B*L_full*S**2*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3), 12*sum_sq*L_full*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3), 12*B*L_full*S**2*a_sq*d_attn/(F_lin + 12*B*L_full*S**2*a_sq*d_attn + 6*D*N), 12*sum_sq*L_full*a_sq*d_attn/(12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N), (F_lin + 12*B*L_full*S**2*a_sq*d_attn + 6*D*N)/(P*T*n_gpu), (12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N)/(P*T*n_gpu), (F_lin*((1/3)*r_core + 1) + 12*B*L_full*S**2*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3) + 6*D*N*((1/3)*r + 1))/(P*T*n_gpu), (12*sum_sq*L_full*a_sq*d_attn*((1/3)*kappa + (1/3)*r_core + 1/3) + F_lin*((1/3)*r_core + 1) + 6*D*N*((1/3)*r + 1))/(P*T*n_gpu), F_lin*((1/3)*r_core + 1), F_lin/(12*sum_sq*L_full*a_sq*d_attn + F_lin + 6*D*N), 2*S*V*b_micro, P/BW, D*k_top/E]


COMM = {
    "n_mb": lambda v: v["n_mb"],
    "two_n_mb": lambda v: (2 * v["n_mb"]),
    "tp_buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"])),
    "ep_calls": lambda v: (2 * v["n_mb"] * min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"]))))),
    "ep_calls_full_recompute": lambda v: (3 * v["n_mb"] * min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"]))))),
    "pp_buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"])),
    "pp_buffer_sequence_parallel": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"]) * _inv(v["t_p"])),
    "pp_step": lambda v: (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"])),
    "pp_step_sequence_parallel": lambda v: (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"])),
    "bubble_fraction": lambda v: (_inv(((-1) + v["p_p"] + v["n_mb"])) * ((-1) + v["p_p"])),
}


COLLECTIVES = {
    "all-reduce": {
        "sent": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * ((-2) + (2 * v["n_r"]))),
        "intra": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-2) + (2 * v["n_r"]))),
        "inter": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-2) + (2 * v["n_r"]))),
        "latency": lambda v: min((v["alpha_0"] + (2 * v["log_nodes"] * v["lam_tn"]) + (2 * v["lam_ti"] * ((-1) + v["g_node"]))), (v["alpha_0"] + (v["lam_i"] * ((2 * v["n_r"]) + ((-2) * v["n_r"] * _inv(v["g_node"])))) + (v["lam_n"] * ((-2) + (2 * v["n_r"] * _inv(v["g_node"])))))),
    },
    "reduce-scatter": {
        "sent": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"])),
        "intra": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-1) + v["n_r"])),
        "inter": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["n_r"])),
        "latency": lambda v: (v["alpha_0"] + (v["lam_i"] * (v["n_r"] + ((-1) * v["n_r"] * _inv(v["g_node"])))) + (v["lam_n"] * ((-1) + (v["n_r"] * _inv(v["g_node"]))))),
    },
    "all-gather": {
        "sent": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"])),
        "intra": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["g_node"]) * ((-1) + v["n_r"])),
        "inter": lambda v: (v["buffer_bytes"] * _inv(v["g_node"]) * _inv(v["n_r"]) * ((-1) + v["n_r"])),
        "latency": lambda v: (v["alpha_0"] + (v["lam_i"] * (v["n_r"] + ((-1) * v["n_r"] * _inv(v["g_node"])))) + (v["lam_n"] * ((-1) + (v["n_r"] * _inv(v["g_node"]))))),
    },
    "all-to-all": {
        "sent": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["n_r"])),
        "intra": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * ((-1) + v["g_node"])),
        "inter": lambda v: (v["buffer_bytes"] * _inv(v["n_r"]) * (v["n_r"] + ((-1) * v["g_node"]))),
        "latency": lambda v: (v["alpha_0"] + v["lam_i"] + (v["x_node"] * (v["lam_n"] + ((-1) * v["lam_i"])))),
    },
    "point-to-point": {
        "sent": lambda v: v["buffer_bytes"],
        "intra": lambda v: 0,
        "inter": lambda v: v["buffer_bytes"],
        "latency": lambda v: (v["alpha_0"] + v["lam_i"] + (v["x_node"] * (v["lam_n"] + ((-1) * v["lam_i"])))),
    },
}


DP = {
    "dense": {
        "grads": lambda v: (v["beta_g"] * _inv(v["p_p"]) * _inv(v["t_p"]) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "weights": lambda v: (v["bytes_per_element"] * _inv(v["p_p"]) * _inv(v["t_p"]) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "layer_grads": lambda v: (v["beta_g"] * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(_ceil((v["L"] * _inv(v["p_p"])))) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "layer_weights": lambda v: (v["bytes_per_element"] * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(_ceil((v["L"] * _inv(v["p_p"])))) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "zero3_reduce_calls": lambda v: (v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
        "zero3_gather_calls": lambda v: (2 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
        "zero0": lambda v: (2 * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "reduce_scatter": lambda v: (v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "reduce_scatter_each": lambda v: (v["beta_g"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "all_gather": lambda v: (v["bytes_per_element"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"]))),
        "all_gathers_zero3": lambda v: (2 * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"])) * (v["N_total"] + ((-1) * v["N_exp"]))),
    },
    "experts": {
        "grads": lambda v: (v["N_exp"] * v["beta_g"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"])),
        "weights": lambda v: (v["N_exp"] * v["bytes_per_element"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"])),
        "layer_grads": lambda v: (v["N_exp"] * v["beta_g"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(max(1, min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"]))))))),
        "layer_weights": lambda v: (v["N_exp"] * v["bytes_per_element"] * _inv(v["ep"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(max(1, min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"]))))))),
        "zero3_reduce_calls": lambda v: (v["n_mb"] * max(1, min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"])))))),
        "zero3_gather_calls": lambda v: (2 * v["n_mb"] * max(1, min(v["L_moe"], _ceil((v["L"] * _inv(v["p_p"])))))),
        "zero0": lambda v: (2 * v["N_exp"] * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"])))),
        "reduce_scatter": lambda v: (v["N_exp"] * v["beta_g"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"])))),
        "reduce_scatter_each": lambda v: (v["N_exp"] * v["beta_g"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"])))),
        "all_gather": lambda v: (v["N_exp"] * v["bytes_per_element"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"])))),
        "all_gathers_zero3": lambda v: (2 * v["N_exp"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["p_p"]) * _inv(v["t_p"]) * _inv(v["d_p"]) * ((-1) + (v["c_p"] * v["d_p"] * _inv(v["ep"])))),
    },
}


TP = {
    (False, 0): {
        "all-reduce": {
            "calls": lambda v: (4 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (4 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-2) + (2 * v["t_p"])) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
    },
    (False, 1): {
        "all-reduce": {
            "calls": lambda v: (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-2) + (2 * v["t_p"])) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
    },
    (True, 0): {
        "all-gather": {
            "calls": lambda v: (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
        "reduce-scatter": {
            "calls": lambda v: (4 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (4 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
    },
    (True, 1): {
        "all-gather": {
            "calls": lambda v: (8 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (8 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
        "reduce-scatter": {
            "calls": lambda v: (6 * v["n_mb"] * _ceil((v["L"] * _inv(v["p_p"])))),
            "bytes": lambda v: (6 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["n_mb"] * _inv(v["c_p"]) * _inv(v["t_p"]) * ((-1) + v["t_p"]) * _ceil((v["L"] * _inv(v["p_p"])))),
        },
    },
}


CP = {
    ("p2p", 0): {
        "point-to-point": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (v["n_mb"] * ((-3) + (3 * v["c_p"])) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-3) + (3 * v["c_p"])) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
    ("p2p", 1): {
        "point-to-point": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (v["n_mb"] * ((-4) + (4 * v["c_p"])) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-4) + (4 * v["c_p"])) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
    ("all_gather", 0): {
        "all-gather": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (2 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
        "reduce-scatter": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
    ("all_gather", 1): {
        "all-gather": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (3 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (3 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
        "reduce-scatter": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"])))),
            "calls": lambda v: (v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv(v["c_p"]) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * max(1, (v["n_kv"] * _inv(v["t_p"]))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
    ("a2a", 0): {
        "all-to-all": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"]))))),
            "calls": lambda v: (2 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (2 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv_pow(v["c_p"], 2) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
    ("a2a", 1): {
        "all-to-all": {
            "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * _inv(v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"]))))),
            "calls": lambda v: (3 * v["n_mb"] * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
            "bytes": lambda v: (3 * v["S"] * v["b_micro"] * v["bytes_per_element"] * v["n_mb"] * _inv_pow(v["c_p"], 2) * ((-1) + v["c_p"]) * (v["d_head"] + v["d_hv"]) * ((v["n_heads"] * _inv(v["t_p"])) + max(1, (v["n_kv"] * _inv(v["t_p"])))) * min(v["L_full"], _ceil((v["L"] * _inv(v["p_p"]))))),
        },
    },
}


EP = {
    "dispatch": {
        "buffer": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"])),
        "nvlink": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"])),
        "network": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"])))),
    },
    "combine": {
        "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"])),
        "nvlink": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"])),
        "network": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"])))),
    },
}


EP_DEVICE = {
    "dispatch": {
        "buffer": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"])),
        "nvlink": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"]) * min(v["M_devices"], v["ep"], v["k_top"])),
        "network": lambda v: (v["S"] * v["beta_dispatch"] * v["b_micro"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_devices"], v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"])))),
    },
    "combine": {
        "buffer": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["k_top"] * _inv(v["c_p"]) * _inv(v["t_p"])),
        "nvlink": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * _inv(v["c_p"]) * _inv(v["t_p"]) * _inv(v["g_node"]) * ((-1) + v["g_node"]) * min(v["M_devices"], v["ep"], v["k_top"])),
        "network": lambda v: (v["S"] * v["b_micro"] * v["bytes_per_element"] * v["h"] * v["g_node"] * _inv(v["c_p"]) * _inv(v["ep"]) * _inv(v["t_p"]) * ((-1) + (v["ep"] * _inv(v["g_node"]))) * min(v["M_devices"], v["M_nodes"], v["k_top"], (v["ep"] * _inv(v["g_node"])))),
    },
}


MICRO_BATCHES = {
    "padded": lambda v: (v["B"] * _inv(v["b_micro"]) * _inv(v["d_p"])),
    "packed": lambda v: (v["D"] * _inv(v["S"]) * _inv(v["b_micro"]) * _inv(v["d_p"])),
}


BUBBLE = {
    "1f1b": lambda v: (_inv(v["n_mb"]) * ((-1) + v["p_p"])),
    "interleaved": lambda v: (_inv(v["n_mb"]) * _inv(v["v_pp"]) * ((-1) + v["p_p"])),
    "zero_bubble": lambda v: 0,
    "dualpipe": lambda v: (_Q(1, 3) * _inv(v["n_mb"]) * ((-2) + v["p_p"])),
}


MODEL_STATE_BYTES = {
    0: {
        "weights": lambda v: (v["Psi"] * v["bytes_per_element"]),
        "gradients": lambda v: (v["Psi"] * v["beta_g"]),
        "optimizer": lambda v: (v["K_opt"] * v["Psi"]),
    },
    1: {
        "weights": lambda v: (v["Psi"] * v["bytes_per_element"]),
        "gradients": lambda v: (v["Psi"] * v["beta_g"]),
        "optimizer": lambda v: (v["K_opt"] * v["Psi"] * _inv(v["N_d"])),
    },
    2: {
        "weights": lambda v: (v["Psi"] * v["bytes_per_element"]),
        "gradients": lambda v: (v["Psi"] * v["beta_g"] * _inv(v["N_d"])),
        "optimizer": lambda v: (v["K_opt"] * v["Psi"] * _inv(v["N_d"])),
    },
    3: {
        "weights": lambda v: (v["Psi"] * v["bytes_per_element"] * _inv(v["N_d"])),
        "gradients": lambda v: (v["Psi"] * v["beta_g"] * _inv(v["N_d"])),
        "optimizer": lambda v: (v["K_opt"] * v["Psi"] * _inv(v["N_d"])),
    },
}


FORMS = {
    "attention_actual": lambda v: (12 * v["L_full"] * v["sum_sq"] * v["a_sq"] * v["d_attn"]),
    "zero3_gathered": lambda v: ((v["Psi_l"] * v["beta_g"]) + (v["Psi_l"] * v["bytes_per_element"] * (1 + v["f_pre"]))),
}


LINEAR = {
    "core_forward_per_token": lambda v: (((-1) * v["d_k"] * v["n_v"]) + ((-1) * v["d_v"] * v["n_v"]) + (3 * v["C"] * v["d_v"] * v["n_v"]) + (5 * v["C"] * v["d_k"] * v["n_v"]) + (6 * v["d_k"] * v["d_v"] * v["n_v"])),
    "conv_forward_per_token": lambda v: (v["K_conv"] * ((2 * v["d_v"] * v["n_v"]) + (4 * v["d_k"] * v["n_k"]))),
    "core_training": lambda v: (((-3) * v["D"] * v["L_linear"] * v["d_k"] * v["n_v"]) + ((-3) * v["D"] * v["L_linear"] * v["d_v"] * v["n_v"]) + (9 * v["D"] * v["C"] * v["L_linear"] * v["d_v"] * v["n_v"]) + (15 * v["D"] * v["C"] * v["L_linear"] * v["d_k"] * v["n_v"]) + (18 * v["D"] * v["L_linear"] * v["d_k"] * v["d_v"] * v["n_v"])),
}


MONOMIALS = {
    "expert_rows": lambda v: (((((1 * _inv(v["E"])) * v["S"]) * v["b_micro"]) * v["ep"]) * v["k_top"]),
    "sum_sq_of_mean": lambda v: ((1 * v["B"]) * _pow(v["s_mean"], 2)),
    "modules_fraction": lambda v: ((1 * _inv(v["N"])) * v["N_m"]),
}
