"""The course's two exercises (思考题): combining speedups, the part of a step that does not
shrink, and what a shorter step does to the wall time of a whole run.

Combining two levers. If a step's compute time is  slots x (FLOPs per slot) / rate,  packing
changes the slots (B S -> D) and a lighter recompute policy changes the FLOPs per slot
(factor f_now -> f_new); the two factors of a product shrink independently, so the speedups
multiply. Adding their gains (1 + (g1 - 1) + (g2 - 1)) undercounts.

The part that does not shrink (Amdahl). If a fraction c of today's step time T is spent in
work the levers do not touch (for example communication that is not overlapped with
compute), a speedup g of the rest gives

    T' = T (1 - c) / g + c T,     overall speedup T / T' = 1 / ((1 - c) / g + c),

and the fixed part's share grows from c to c T / T'.

The run. With the same number of steps, the wall time of a run scales like the step time:
hours' = hours / speedup. The run's size implied by an assumed wall time is
steps = hours x 3600 / T and tokens = steps x D.

The roofline of the model's GEMMs at the scenario's micro batch: `model_gemms` lists the
matrix multiplies of one micro batch of one layer (m tokens x k) (k x n) with their
arithmetic intensity, to be compared with the machine balance P / BW.
"""

from __future__ import annotations

from typing import Any, Mapping

import sympy as sp

from costmodel import models, roofline
from costmodel.symbols import B, D, N, S, T

# ------------------------------------------------------------------ combining two levers

g_1, g_2 = sp.symbols("g_1 g_2", positive=True)  # speedups of two levers
rate = sp.Symbol("R", positive=True)  # FLOP/s the hardware sustains on this work
f_now, f_new = sp.symbols(r"f_{now} f_{new}", positive=True)  # recompute factors

def compute_time(slots, factor):
    """Compute time of a step: slots computed x hardware FLOPs per slot / sustained rate."""
    return slots * factor * 6 * N / rate


#: Speedup of packing (B S -> D slots) and a lighter recompute (f_now -> f_new) together.
combined_speedup_derived = sp.simplify(compute_time(B * S, f_now) / compute_time(D, f_new))

combined_multiply = g_1 * g_2
combined_add = 1 + (g_1 - 1) + (g_2 - 1)

# ------------------------------------------------------------------ the part that does not shrink

c = sp.Symbol("c", positive=True)  # share of today's step time that the levers do not touch
g = sp.Symbol("g", positive=True)  # speedup of the part they do touch

step_time_with_fixed_part = T * (1 - c) / g + c * T
overall_speedup = sp.simplify(T / step_time_with_fixed_part)
fixed_share_after = sp.simplify(c * T / step_time_with_fixed_part)

# ------------------------------------------------------------------ the run

H = sp.Symbol("H", positive=True)  # wall time of the run today, hours
run_hours_after = H / g
steps_in_run = H * 3600 / T
tokens_in_run = steps_in_run * D


def with_fixed_part(step_time: float, fixed_share: float, speedup: float) -> dict[str, float]:
    """Step time, overall speedup and the fixed part's new share when only (1 - fixed_share)
    of the step speeds up by `speedup`."""
    if not 0 <= fixed_share < 1:
        raise ValueError(f"fixed_share {fixed_share!r}: expected 0 <= share < 1")
    if speedup <= 0:
        raise ValueError(f"speedup {speedup!r}: expected > 0")
    new_time = step_time * (1 - fixed_share) / speedup + fixed_share * step_time
    return {"step_time": new_time, "speedup": step_time / new_time,
            "fixed_share": fixed_share * step_time / new_time}


def run_after(hours: float, step_time: float, tokens_per_step: float,
              speedup: float) -> dict[str, float]:
    """The run implied by `hours` of wall time at `step_time` per step, and its new wall time."""
    steps = hours * 3600 / step_time
    return {"steps": steps, "tokens": steps * tokens_per_step, "hours_after": hours / speedup}


# ------------------------------------------------------------------ roofline of the GEMMs


def model_gemms(values: Mapping[str, Any], expert_width: int | None = None,
                tokens_per_sequence: float | None = None) -> list[dict[str, Any]]:
    """The matrix multiplies of one micro batch through one layer, as (m x k)(k x n), with
    their arithmetic intensity at BF16 (2 bytes per element).

    `values` are a resolved scenario's values. Tokens in a micro batch: micro_batch x
    `tokens_per_sequence` (default: seq_len, the slots of a padded or packed micro batch).
    Rows: a weight GEMM on the hidden size (hidden -> attention width, as the attention
    projections), the routed experts' GEMM when the model is MoE and `expert_width` is known
    (m = tokens x k / E per expert), and the attention core QK^T of one head (s x d_h)(d_h x s)
    when the head width is known. The lm_head (hidden -> vocab) closes the list.
    """
    seq = float(tokens_per_sequence if tokens_per_sequence is not None else values["seq_len"])
    tokens = values["micro_batch"] * seq
    hidden = values["hidden_size"]
    rows = [{"name": "projection (hidden -> attention width)", "m": tokens, "k": hidden,
             "n": values["attention_dim"]}]
    experts, top_k = values["num_experts"], values["experts_per_token"]
    if experts and expert_width:
        rows.append({"name": "one routed expert (hidden -> expert width)",
                     "m": tokens * top_k / experts, "k": hidden, "n": expert_width})
    head_dim = values.get("head_dim")
    if head_dim is None and values.get("num_heads"):
        head_dim = values["attention_dim"] / values["num_heads"]
    if head_dim:
        rows.append({"name": "attention core QK^T, one head", "m": seq, "k": head_dim, "n": seq})
    rows.append({"name": "lm_head (hidden -> vocab)", "m": tokens, "k": hidden,
                 "n": values["vocab_size"]})
    for row in rows:
        row["intensity"] = roofline.intensity(row["m"], row["n"], row["k"])
    return rows


# ------------------------------------------------------------------ the model's real config

#: The course's model, as shipped with the package.
COURSE_MODEL = "qwen3.6-35b-a3b"
#: Scenario keys that must agree with a config for the config to describe the scenario's model.
STRUCTURE_KEYS = ("hidden_size", "num_layers", "num_experts", "experts_per_token", "vocab_size")


def matching_shape(values: Mapping[str, Any], default_model: str = COURSE_MODEL):
    """The ModelShape of the scenario's model: the config named by `model:` if any, else the
    course's model; None when that config's shape (STRUCTURE_KEYS) is not the scenario's."""
    shape = models.load_shape(values.get("model") or default_model)
    keys = models.scenario_keys(shape)
    if all(values.get(key) == keys[key] for key in STRUCTURE_KEYS):
        return shape
    return None
