"""The layer's bytes in SymPy symbols, and the closed forms derived from them on first use
(read as attributes of ``costmodel.derive.activations``)."""

from __future__ import annotations

from costmodel.derive.activations.layer import layer_activation_bytes
from costmodel.derive.activations.tables import FP32


def symbolic_layer_bytes(
    kind: str = "attention",
    mlp: str = "dense",
    *,
    attention_kernel: str = "flash",
    elementwise: str = "fused",
    recompute: str = "none",
    sp: bool = True,
    **options,
) -> dict[str, object]:
    """``layer_activation_bytes`` in the symbols of ``costmodel.derive.symbols`` (b, s, h, n_h,
    n_kv, d_h, d_hv, d_ff, E, k_top, d_e, r_q, r_kv, the gated-DeltaNet widths and chunk C, β,
    t_p, c_p). ``options`` passes the flags (qk_norm, router_fp32, norm_topk) or overrides a
    symbol with a number (for example shared_ffn=0)."""
    import sympy

    from costmodel.derive.symbols import (
        C,
        E,
        b_micro,
        bytes_per_element,
        c_p,
        d_e,
        d_ff,
        d_head,
        d_hv,
        d_k,
        d_v,
        h,
        k_top,
        n_heads,
        n_k,
        n_kv,
        n_v,
        r_kv,
        r_q,
        s,
        t_p,
    )

    shape = {
        "b": b_micro,
        "s": s,
        "hidden": h,
        "heads": n_heads,
        "kv_heads": n_kv,
        "head_dim": d_head,
        "v_head_dim": d_hv,
        "ffn": d_ff,
        "q_lora_rank": r_q,
        "kv_lora_rank": r_kv,
        "experts": E,
        "top_k": k_top,
        "moe_ffn": d_e,
        "shared_ffn": 0,
        "linear_key_heads": n_k,
        "linear_value_heads": n_v,
        "linear_key_head_dim": d_k,
        "linear_value_head_dim": d_v,
        "chunk": C,
        "cp": c_p,
        "bytes_per_element": bytes_per_element,
    }
    shape.update(options)
    return {
        name: sympy.factor(value)
        for name, value in layer_activation_bytes(
            kind,
            mlp,
            tp=t_p,
            sp=sp,
            attention_kernel=attention_kernel,
            elementwise=elementwise,
            recompute=recompute,
            **shape,
        ).items()
    }


def total(terms: dict) -> object:
    """Sum of named terms (numbers or expressions)."""
    return sum(terms.values())


#: Closed forms derived on first use (each runs SymPy's factor over a layer's tensors; a cold
#: `costmodel report` needs only numbers): read them as module attributes.
#: dense_flash_layer_bytes: a GQA layer with a dense SwiGLU MLP, flash attention, fused RMSNorm
#:   and SwiGLU, no recompute, TP with sequence parallelism and CP: linear in s (no s x s term).
#: dense_eager_layer_bytes: the same layer with Hugging Face's eager attention: K and V expanded
#:   to the query heads, and (4 + β) bytes per score (the fp32 softmax output beside the
#:   probabilities in β).
#: eager_square_bytes: the s x s part of the eager layer, which selective recompute removes.
#: full_recompute_layer_bytes: full recompute keeps one tensor per layer, its input,
#:   β·b·s·h/(c_p·t_p) with SP.
#: logits_activation_bytes: logits per micro batch on one GPU, the output in β and the loss's
#:   fp32 log-softmax, split by a vocabulary-parallel lm_head (t_p), by CP (c_p) and by chunked
#:   cross-entropy (c).
#: rope_bytes: RoPE's cos and sin, computed once per forward for the (1, s) positions.
#: first_stage_dense_flash_bytes: the first pipeline stage of a dense model, L/p_p such layers
#:   for each of the n_f micro batches in flight (1F1B: n_f = p_p, so about the bytes of all L
#:   layers for one micro batch).
def _derive(name: str):
    """The closed form `name` of FORMS (SymPy and the symbols imported here, on first use)."""
    import sympy

    from costmodel.derive.symbols import (
        L,
        V,
        b_micro,
        bytes_per_element,
        c_p,
        chunks,
        d_r,
        n_f,
        p_p,
        s,
        t_p,
    )

    forms = {
        "dense_flash_layer_bytes": lambda: sympy.factor(
            sympy.expand(total(symbolic_layer_bytes()))
        ),
        "dense_eager_layer_bytes": lambda: sympy.factor(
            sympy.expand(total(symbolic_layer_bytes(attention_kernel="eager")))
        ),
        "eager_square_bytes": lambda: sympy.factor(
            sympy.expand(derived_form("dense_eager_layer_bytes")).coeff(s, 2) * s**2
        ),
        "full_recompute_layer_bytes": lambda: sympy.factor(
            total(symbolic_layer_bytes(recompute="full"))
        ),
        "logits_activation_bytes": lambda: sympy.factor(
            (bytes_per_element + FP32) * b_micro * (s / c_p) * V / (t_p * chunks)
        ),
        "rope_bytes": lambda: 2 * bytes_per_element * (s / c_p) * d_r,
        "first_stage_dense_flash_bytes": lambda: n_f
        * (L / p_p)
        * derived_form("dense_flash_layer_bytes"),
    }
    return forms[name]()


FORMS = (
    "dense_flash_layer_bytes",
    "dense_eager_layer_bytes",
    "eager_square_bytes",
    "full_recompute_layer_bytes",
    "logits_activation_bytes",
    "rope_bytes",
    "first_stage_dense_flash_bytes",
)
_forms: dict[str, object] = {}


def derived_form(name: str):
    if name not in _forms:
        _forms[name] = _derive(name)
    return _forms[name]
