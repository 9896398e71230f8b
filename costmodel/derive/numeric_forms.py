"""The numeric forms of the derivations: the registry that `costmodel.derive.numeric` is
printed from, which `costmodel report`, `params`, `gemms` and the step-time model evaluate instead
of SymPy (a cold command pays no SymPy import and no simplification).

The SymPy expressions stay the source of truth: the tables below (a table's name, each form's
key, its expression, how it is evaluated today) are printed by `costmodel.generate.numeric` as
dicts of the same names and keys, each form a function of one mapping `v` from the names of
`costmodel.derive.symbols` to numbers. A caller names its form by its key
(`numeric.COMM["bubble_fraction"]`), so that grepping the key leads from the caller here; a
table keyed by a scenario's choice (BUBBLE by the pipeline schedule) is indexed by the choice.
`make numeric` writes the module; tests/derive/test_numeric.py fails when it is stale, and
tests/project/test_generated_forms.py when a form is reached by an assembled name or no caller
names it.

Each form is printed the way SymPy evaluates it, so the numbers stay bit-identical:

- `xreplace` (every symbol replaced by a number at once, then the tree evaluated bottom-up): an
  Add or a Mul folds its arguments left to right in SymPy's order; a Rational is a Fraction and
  x**-1 of an integer stays exact, so integer inputs give the exact value (float() rounds once),
  and float inputs round at each operation as SymPy's Floats do;
- `subs` (one symbol after another, in SymPy's order): monomials, folded in that order;
- `lambdify` (the account's figures): the source `sympy.lambdify(..., modules="math")` prints.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive import (
    attention,
    model_states,
    moe,
    padding,
    recompute,
    roofline,
    symbols,
    utilization,
)
from costmodel.derive import communication as comm
from costmodel.derive import linear_attention as la
from costmodel.derive import step_time as steps
from costmodel.derive.flops import model_flops, tokens_per_expert
from costmodel.derive.memory import logits_bytes

BF16_BYTES = 2

#: Every quantity of the account (evaluate.account.account), as an expression of the scenario's symbols.
ACCOUNT_EXPRESSIONS: dict[str, sp.Expr] = {
    "model_flops_per_step": model_flops,
    "hardware_flops_per_step": utilization.hardware_flops,
    "recompute_factor": recompute.recompute_factor,
    "achieved_flops_per_s": utilization.achieved_flops_per_s,
    "achieved_flops_per_s_per_gpu": utilization.achieved_flops_per_s_per_gpu,
    "mfu": utilization.mfu,
    "hfu": utilization.hfu,
    "tokens_per_s": utilization.tokens_per_s,
    "tokens_per_s_per_gpu": utilization.tokens_per_s_per_gpu,
    "mfu_if_total_params": utilization.mfu.subs(symbols.N, symbols.N_total),
    "mfu_from_measured_tokens_per_s": utilization.mfu_from_throughput,
    **{
        f"{batching}.{key}": expr
        for batching in padding.SLOTS
        for key, expr in padding.figures(batching).items()
    },
    "attention_padded": attention.attention_padded,
    "attention_actual": attention.attention_actual,
    "attention_padded_hardware": attention.attention_padded_hardware,
    "attention_actual_hardware": attention.attention_actual_hardware,
    "share_padded": attention.share(attention.attention_padded),
    "share_actual": attention.share(attention.attention_actual),
    "mfu_with_attention_padded": attention.mfu_with_attention(attention.attention_padded),
    "mfu_with_attention_actual": attention.mfu_with_attention(attention.attention_actual),
    "hfu_with_attention_padded": attention.hfu_with_attention(attention.attention_padded_hardware),
    "hfu_with_attention_actual": attention.hfu_with_attention(attention.attention_actual_hardware),
    "linear_attention_hardware": attention.linear_attention_hardware,
    "linear_share": attention.linear_share(attention.attention_actual),
    "logits_bytes": logits_bytes.subs(symbols.bytes_per_element, BF16_BYTES),
    "machine_balance": roofline.machine_balance,
    "tokens_per_expert": tokens_per_expert,
}


def _dp_forms() -> dict[str, dict]:
    """communication_tables' DP table: by the weights (dense, experts), the buffers, ZeRO 3's
    calls (one a layer holding the weights, a micro batch) and each stage's bytes."""
    s = symbols
    dp = {}
    for label, held, group_size, layers in (
        ("dense", comm.dense_params_per_rank, comm.dense_dp_group, comm.stage_layers),
        ("experts", comm.expert_params_per_rank, comm.expert_dp_group, comm.stage_moe_layers),
    ):
        on = {s.N_rank: held, s.n_r: group_size}
        layers = sp.Max(layers, 1)  # ZeRO 3's calls: one a layer that holds these weights
        dp[label] = {
            "grads": held * s.beta_g,
            "weights": held * s.bytes_per_element,
            "layer_grads": held * s.beta_g / layers,
            "layer_weights": held * s.bytes_per_element / layers,
            "zero3_reduce_calls": s.n_mb * layers,
            "zero3_gather_calls": 2 * s.n_mb * layers,
            "zero0": comm.dp_zero0.subs(on),
            "reduce_scatter": 1 * comm.dp_grad_reduce_scatter.subs(on),
            "reduce_scatter_each": s.n_mb * comm.dp_grad_reduce_scatter.subs(on),
            "all_gather": 1 * comm.dp_param_all_gather.subs(on),
            "all_gathers_zero3": 2 * s.n_mb * comm.dp_param_all_gather.subs(on),
        }
    return dp


def communication_tables() -> dict[str, dict]:
    """The forms evaluate.communication.comm_rows evaluates, built as it built them (the DP, TP, CP, EP and PP
    rows of derive.communication, each collective's bytes and split), as tables: COMM by name;
    COLLECTIVES by kind, then sent / intra / inter; DP by the weights (dense, experts), then by
    name; TP by (sequence_parallel, recompute) and CP by (cp_comm_type, recompute), then by the
    row's collective kind, then by name; EP by direction, then by name."""
    s = symbols
    collectives = {}
    for kind, sent in comm.COLLECTIVES.items():
        intra, inter = comm.across_nodes(kind)
        collectives[kind] = {
            "sent": sent,
            "intra": intra,
            "inter": inter,
            "latency": comm.LATENCY[kind],
        }
    dp = _dp_forms()
    tp = {}
    for sequence_parallel in (False, True):
        for recompute_ in (0, 1):
            rows = tp[sequence_parallel, recompute_] = {}
            for kind, forward, backward in comm.TP_COLLECTIVES[sequence_parallel]:
                calls = comm.stage_layers * s.n_mb * (forward * (1 + recompute_) + backward)
                one = comm.COLLECTIVES[kind].subs({s.n_r: s.t_p, s.buffer_bytes: comm.tp_buffer})
                rows[kind] = {"calls": calls, "bytes": calls * one}
    cp = {}
    for cp_comm_type, collectives_ in comm.CP_COLLECTIVES.items():
        for recompute_ in (0, 1):
            rows = cp[cp_comm_type, recompute_] = {}
            for kind, buffer, forward, backward in collectives_:
                calls = (
                    comm.stage_full_attention_layers
                    * s.n_mb
                    * (forward * (1 + recompute_) + backward)
                )
                one = comm.COLLECTIVES[kind].subs({s.n_r: s.c_p, s.buffer_bytes: buffer})
                assert kind not in rows, f"CP {cp_comm_type}: two {kind} rows"
                rows[kind] = {"buffer": buffer, "calls": calls, "bytes": calls * one}
    ep = _ep_forms(comm.ep_nvlink_bytes, comm.ep_network_bytes)
    # device-limited routing, a token once per GPU (moe_router_max_devices)
    ep_device = _ep_forms(comm.ep_nvlink_bytes_device, comm.ep_network_bytes_device)
    named = {
        "n_mb": s.n_mb,
        "two_n_mb": 2 * s.n_mb,
        "tp_buffer": comm.tp_buffer,
        # an all-to-all each way forward (again under full recompute) and backward
        "ep_calls": comm.stage_moe_layers * s.n_mb * 2,
        "ep_calls_full_recompute": comm.stage_moe_layers * s.n_mb * 3,
        "pp_buffer": comm.pp_buffer,
        "pp_buffer_sequence_parallel": comm.pp_buffer_sequence_parallel,
        "pp_step": comm.pp_step,
        "pp_step_sequence_parallel": comm.pp_step_sequence_parallel,
        "bubble_fraction": comm.bubble_fraction,
    }
    return {
        "COMM": named,
        "COLLECTIVES": collectives,
        "DP": dp,
        "TP": tp,
        "CP": cp,
        "EP": ep,
        "EP_DEVICE": ep_device,
    }


def _ep_forms(nvlink, network) -> dict:
    """The EP forms of one routing, by direction: the all-to-all's buffer and what one GPU sends
    over NVLink and over the network in one transfer (derive.communication)."""
    return {
        direction: {
            "buffer": comm.ep_buffer * beta,
            "nvlink": nvlink * beta,
            "network": network * beta,
        }
        for direction, beta in comm.EP_DIRECTIONS.items()
    }


def xreplace_tables() -> dict[str, dict]:
    """Forms evaluated today by replacing every symbol at once (xreplace), by table: each a
    dict keyed by name (or by a choice, then by name), whose leaves are the expressions.
    MICRO_BATCHES is keyed by the batching, BUBBLE by the pipeline schedule and
    MODEL_STATE_BYTES by the ZeRO stage (a scenario's choices)."""
    return {
        **communication_tables(),
        "MICRO_BATCHES": dict(comm.MICRO_BATCHES),
        "BUBBLE": dict(steps.BUBBLE_OVER_COMPUTE),
        "MODEL_STATE_BYTES": {
            stage: {
                "weights": model_states.weights[stage],
                "gradients": model_states.gradients[stage],
                "optimizer": model_states.optimizer[stage],
            }
            for stage in model_states.STAGES
        },
        "FORMS": {
            "attention_actual": attention.attention_actual,
            "zero3_gathered": model_states.zero3_gathered,
        },
        "LINEAR": {
            "core_forward_per_token": la.core_forward_per_token,
            "conv_forward_per_token": la.conv_forward_per_token,
            "core_training": la.core_training,
        },
    }


def subs_tables() -> dict[str, dict]:
    """Monomials evaluated today with .subs (one symbol after another), by name."""
    return {
        "MONOMIALS": {
            "expert_rows": moe.expert_rows,
            "sum_sq_of_mean": attention.sum_sq_of_mean,
            "modules_fraction": recompute.modules_fraction,
        }
    }


def leaves(tables: dict[str, dict]) -> dict[tuple, sp.Expr]:
    """Every expression of `tables` by its path of keys (the table's name first)."""
    out = {}

    def walk(path: tuple, node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk((*path, key), value)
        else:
            out[path] = node

    walk((), tables)
    return out


def constants() -> dict[str, object]:
    """Numbers and names of the derivations that the run-time path reads as data."""

    def exact(x):
        x = sp.nsimplify(x)
        return int(x) if x.is_Integer else _Exact(x)

    return {
        "SQUARE_FRACTION": {key: exact(v) for key, v in attention.SQUARE_FRACTION.items()},
        "KERNEL_BACKWARD_OVER_FORWARD": {
            key: exact(v) for key, v in attention.KERNEL_BACKWARD_OVER_FORWARD.items()
        },
        "CONVENTION_NAMES": {key: c.name for key, c in attention.CONVENTIONS.items()},
        "RECOMPUTE_POLICIES": {key: exact(v) for key, v in recompute.POLICIES.items()},
        "PADDING_FIGURES": tuple(padding.figures("padded")),
        "BATCHINGS": tuple(padding.SLOTS),
        "SCHEDULES": tuple(steps.BUBBLE_OVER_COMPUTE),
        "FP8_DISPATCH_BYTES": exact(comm.FP8_DISPATCH_BYTES),
        "CP_COLLECTIVES": {
            key: tuple(kind for kind, *_ in rows) for key, rows in comm.CP_COLLECTIVES.items()
        },
        "ACCOUNT_FIGURES": tuple(ACCOUNT_EXPRESSIONS),
    }


class _Exact:
    """A Rational printed as a Fraction."""

    def __init__(self, x: sp.Rational):
        self.x = x

    def __repr__(self) -> str:
        return f"_Q({self.x.p}, {self.x.q})"
