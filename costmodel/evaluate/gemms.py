"""The model's GEMMs for one scenario: one list, used by every notebook and the report."""

from __future__ import annotations

from costmodel.derive import moe
from costmodel.derive.roofline import intensity
from costmodel.derive.symbols import E, S, b_micro, k_top
from costmodel.evaluate.layouts import default_ep_size
from costmodel.inputs.assumptions import assumed
from costmodel.inputs.widths import dense_ffn_width, expert_width


def model_gemms(
    values,
    micro_batch: int | None = None,
    tokens_per_sequence: float | None = None,
    beta: int = 2,
    assume_head_dim: bool = False,
) -> list[dict]:
    """The main matrix multiplies of one layer, and the lm_head, for one micro batch, as
    (m x k)(k x n) with their arithmetic intensity at `beta` bytes per element.

    `values` are a resolved scenario's values. A micro batch holds micro_batch sequences of
    `tokens_per_sequence` token slots (default seq_len). Rows, each with `key` (a short stable
    name), `weights` (a weight GEMM, whose m grows with the micro batch) and `source` (where a
    width not in the scenario comes from):
    - the attention projection hidden -> attention width;
    - the FFN: one routed expert, whose rows gather the tokens of an EP group
      (derive.moe.expert_rows, EP = layouts.default_ep_size), or the dense FFN; widths from
      inputs.widths (the scenario's model config, else stated rules);
    - the attention core QK^T of one head (s x d_h)(d_h x s), when the head width is known
      (head_dim, else attention width / heads; with `assume_head_dim`, else the course's
      assumed head_dim): activations only, independent of the micro batch;
    - the lm_head hidden -> vocab.
    """
    batch = micro_batch or values["micro_batch"]
    seq = float(tokens_per_sequence or values["seq_len"])
    tokens, hidden = batch * seq, values["hidden_size"]
    rows = [
        {
            "name": "attention projection (hidden -> attention width)",
            "key": "attention_projection",
            "m": tokens,
            "k": hidden,
            "n": values["attention_dim"],
            "weights": True,
            "source": "scenario",
        }
    ]
    if values["num_experts"]:
        width = expert_width(values.get("model"))
        ep_size = default_ep_size(values["num_experts"], values["num_gpus"])
        expert_m = float(
            moe.expert_rows.subs(
                {
                    moe.ep: ep_size,
                    b_micro: batch,
                    S: seq,
                    k_top: values["experts_per_token"],
                    E: values["num_experts"],
                }
            )
        )
        rows.append(
            {
                "name": "one routed expert (hidden -> expert width)",
                "key": "expert",
                "m": expert_m,
                "k": hidden,
                "n": width.value,
                "weights": True,
                "source": f"{width.detail}; EP = {ep_size}",
            }
        )
    else:
        width = dense_ffn_width(hidden, values.get("model"))
        rows.append(
            {
                "name": "dense FFN (hidden -> FFN width)",
                "key": "dense_ffn",
                "m": tokens,
                "k": hidden,
                "n": width.value,
                "weights": True,
                "source": width.detail,
            }
        )
    head_dim, head_source = values.get("head_dim"), "scenario"
    if head_dim is None and values.get("num_heads"):
        head_dim = values["attention_dim"] / values["num_heads"]
    if head_dim is None and assume_head_dim:
        head_dim, head_source = assumed("head_dim"), "assumed head_dim"
    if head_dim:
        rows.append(
            {
                "name": "attention core QK^T, one head",
                "key": "attention_core",
                "m": seq,
                "k": head_dim,
                "n": seq,
                "weights": False,
                "source": head_source,
            }
        )
    rows.append(
        {
            "name": "lm_head (hidden -> vocab)",
            "key": "lm_head",
            "m": tokens,
            "k": hidden,
            "n": values["vocab_size"],
            "weights": True,
            "source": "scenario",
        }
    )
    for row in rows:
        row["intensity"] = intensity(row["m"], row["n"], row["k"], beta)
    return rows
