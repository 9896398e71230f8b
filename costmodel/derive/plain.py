"""The derive layer for numbers, without SymPy: what `costmodel report`, `params`, `gemms` and
the step-time model need at run time. The generated forms (`costmodel.derive.numeric`: the
registry `costmodel.derive.numeric_forms` printed, each named by its key) and the few helpers
written for numbers by hand; the SymPy modules re-export these (roofline.intensity, step_time.gemm_seconds,
recompute.fractions, ...), so both read the same code.
"""

from __future__ import annotations

import functools
import math

from costmodel.derive.lanes import as_float, is_lanes, maximum, minimum


def _numeric():
    """The generated module, read on first use (so that the derivations, and `make numeric`,
    import without it)."""
    from costmodel.derive import numeric

    return numeric


#: Modules whose recompute redoes weight GEMMs (their parameters per token, N_m, make r).
WEIGHT_MODULES = ("mlp", "moe", "shared_experts", "mla_up_proj")
#: Modules whose recompute redoes the attention core (r_core).
CORE_MODULES = ("core_attn",)
#: ZeRO stages.
STAGES = (0, 1, 2, 3)
#: The model states, in the order the memory is shown.
MODEL_STATES = ("weights", "gradients", "optimizer")


def intensity(m_, n_, k_, beta=2):
    """gemm_intensity for numbers, the one numeric form every layer uses: an (m x k)(k x n) GEMM
    at beta bytes an element, 2mnk / (beta (mk + kn + mn)) FLOP/byte; m may be a NumPy array
    (tests/evaluate/test_gemms.py checks it against the form)."""
    return 2 * m_ * n_ * k_ / (beta * (m_ * k_ + k_ * n_ + m_ * n_))


def attainable_flops(ai, peak, bandwidth) -> float:
    return minimum(as_float(peak), as_float(ai) * as_float(bandwidth))


def gemm_seconds(
    m_: float,
    n_: float,
    k_: float,
    peak: float,
    bandwidth: float,
    e: float,
    e_m: float,
    beta=2,
    maximum=maximum,
) -> float:
    """gemm_time for numbers (a step has thousands of GEMMs: no SymPy per call; the tests
    check it against the form); `maximum`: NumPy's for arrays of GEMMs (the plan's search)."""
    compute = 2 * m_ * n_ * k_ / (e * peak)
    memory = beta * (m_ * k_ + k_ * n_ + m_ * n_) / (e_m * bandwidth)
    return maximum(compute, memory)


def head_width(width, heads):
    """The width of one attention head where the model's config or the scenario gives none: the
    attention's width over its query heads (hidden / heads: transformers' default head_dim,
    Megatron-LM's default kv_channels), as a true quotient. Where the heads do not divide the
    width, a config must say its head_dim (inputs.families.common) and the memory model takes
    the whole part (derive.activations.mixers)."""
    return width / heads


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending (in about sqrt(n) steps)."""
    n = int(n)
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def convention_of(attention_flops: str = "full", attention_kernel: str = "eager") -> str:
    """The CONVENTIONS key of a scenario's hardware count (attention_flops, attention_kernel).
    Model FLOPs always use the eager multiplier 3 (course or causal)."""
    key = {"full": "course", "causal": "causal"}[attention_flops]
    if attention_kernel != "eager":  # a flash kernel of any family (flash2, flash3, cudnn)
        key = "flash" if attention_flops == "full" else "flash_causal"
    return key


def micro_batches(batching: str, *, samples, tokens, seq_len, dp, micro_batch) -> float:
    """MICRO_BATCHES[batching] for numbers (exact for integers: a whole number stays whole),
    kept for the numbers last asked (a sweep's points and the plan's layouts ask the same)."""
    given = (batching, samples, tokens, seq_len, dp, micro_batch)
    try:
        return _micro_batches(*given)
    except TypeError:  # an array (a sweep's points at once) is no key: computed
        return _micro_batches.__wrapped__(*given)


@functools.lru_cache(maxsize=1024, typed=True)
def _micro_batches(batching, samples, tokens, seq_len, dp, micro_batch) -> float:
    v = {"B": samples, "D": tokens, "S": seq_len, "d_p": dp, "b_micro": micro_batch}
    return as_float(_numeric().MICRO_BATCHES[batching](v))


def bubble_over_compute(schedule: str, p: int, micro_batches: float, virtual: int = 1) -> float:
    """The bubble as a share of the stage's compute for numbers (0 without a pipeline)."""
    if p <= 1:
        return 0.0
    form = _numeric().BUBBLE[schedule]
    return maximum(0.0, as_float(form({"p_p": p, "n_mb": micro_batches, "v_pp": virtual})))


#: Bytes per element of each optimizer dtype (optimizer_dtype, main_params_dtype; none: no copy).
OPTIMIZER_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "none": 0}


def optimizer_state_bytes(moments: str = "fp32", master: str = "fp32") -> int:
    """K of the ZeRO paper, Adam's bytes per parameter: the master copy of the weights and the
    two moments (fp32 and fp32: 4 + 2 x 4 = 12, the paper's; DeepSeek-V3's BF16 moments with an
    fp32 master: 4 + 2 x 2 = 8)."""
    return OPTIMIZER_DTYPE_BYTES[master] + 2 * OPTIMIZER_DTYPE_BYTES[moments]


def optimizer_step_bytes(moments: str = "fp32", master: str = "fp32") -> int:
    """HBM bytes Adam's step moves per parameter: it reads the master copy, the fp32 gradient
    and the two moments, writes the master copy and the moments back and the BF16 weights
    (fp32 everywhere: 16 read + 14 written = 30). Without a master copy it reads and writes the
    BF16 weights (2 + 2)."""
    master_bytes = OPTIMIZER_DTYPE_BYTES[master]
    weights = 2 * master_bytes + 2 if master_bytes else 2 + 2
    return weights + 4 + 2 * 2 * OPTIMIZER_DTYPE_BYTES[moments]


def model_state_bytes(
    params,
    zero_stage: int = 0,
    dp=1,
    *,
    grad_bytes=4,
    weight_bytes=2,
    optimizer_bytes=12,
) -> dict[str, float]:
    """Bytes of weights, gradients and optimizer states on one GPU holding ``params`` parameters,
    ZeRO stage ``zero_stage`` over ``dp`` data-parallel ranks. grad_bytes: 4 (fp32 main grads,
    Megatron-LM) or 2 (the ZeRO paper); optimizer_bytes: 12 for mixed-precision Adam.
    ``params`` may be NumPy's array (the plan's layouts; ``dp`` one number): the same floats."""
    if zero_stage not in STAGES:
        raise ValueError(f"zero_stage: {zero_stage!r} is not one of 0, 1, 2, 3")
    v = {
        "bytes_per_element": as_float(weight_bytes),
        "beta_g": as_float(grad_bytes),
        "K_opt": as_float(optimizer_bytes),
        "Psi": params * 1.0,
        "N_d": as_float(dp),
    }
    forms = _numeric().MODEL_STATE_BYTES[zero_stage]
    return {
        "weights": forms["weights"](v),
        "gradients": forms["gradients"](v),
        "optimizer": forms["optimizer"](v),
    }


def recomputed_layers(layers_per_stage: int, num_layers=None, method: str = "uniform") -> float:
    """Share of a stage's layers full recompute redoes: every layer (uniform, or num_layers
    unset), or the first ``num_layers`` of the stage (block)."""
    if method != "block" or num_layers is None:
        return 1.0
    return min(num_layers, layers_per_stage) / layers_per_stage


def fractions(
    policy: str,
    modules=(),
    module_params: dict[str, float] | None = None,
    params=1.0,
    *,
    selective_fraction=None,
    layers_share: float = 1.0,
) -> dict[str, float | str]:
    """(weights, core) fractions of a recompute setting and where r comes from.

    ``module_params``: matmul parameters per token of each weight module (``WEIGHT_MODULES``),
    ``params`` the N they are a share of; ``selective_fraction`` a scenario's r (it overrides the
    modules' weights share, not the core's); ``layers_share`` the share of layers full recompute
    redoes (``recomputed_layers``)."""
    if policy == "none":
        return {"weights": 0.0, "core": 0.0, "from": "policy"}
    if policy == "full":
        return {"weights": layers_share, "core": layers_share, "from": "policy"}
    core = 1.0 if any(m in CORE_MODULES for m in modules) else 0.0
    if selective_fraction is not None:
        return {"weights": as_float(selective_fraction), "core": core, "from": "scenario"}
    module_params = module_params or {}
    recomputed = sum(module_params.get(m, 0.0) for m in modules if m in WEIGHT_MODULES)
    if "moe" in modules and "shared_experts" in modules:  # moe already redoes the shared experts
        recomputed -= module_params.get("shared_experts", 0.0)
    weights = (
        as_float(
            _numeric().MONOMIALS["modules_fraction"](
                {"N_m": _number(recomputed), "N": _number(params)}
            )
        )
        if recomputed
        else 0.0
    )
    return {
        "weights": min(weights, 1.0) if math.isfinite(weights) else 0.0,
        "core": core,
        "from": "modules",
    }


def _number(x):
    """x as SymPy would take it: an int stays exact, anything else a float (lanes as they
    are: costmodel.derive.lanes)."""
    if isinstance(x, int) and not isinstance(x, bool) or is_lanes(x):
        return x
    return as_float(x)


def sum_sq_of_mean(samples, mean) -> int | float:
    """B s_mean^2 for numbers: exact (an int) for integer inputs, else a float."""
    square = _numeric().MONOMIALS["sum_sq_of_mean"](
        {"B": _number(samples), "s_mean": _number(mean)}
    )
    return int(square) if isinstance(square, int) else as_float(square)


def expert_rows(ep, micro_batch, seq, top_k, experts) -> float:
    """Rows of one expert's GEMM per micro batch and layer (derive.moe.expert_rows)."""
    v = {"ep": ep, "b_micro": micro_batch, "S": seq, "k_top": top_k, "E": experts}
    return as_float(_numeric().MONOMIALS["expert_rows"]({k: _number(x) for k, x in v.items()}))


def zero3_gathered_bytes(layer_params, prefetch=1, *, grad_bytes=4, weight_bytes=2):
    """ZeRO 3's gathered working set on one GPU (derive.model_states.zero3_gathered): the
    weights of the largest layer (`layer_params` on the GPU before sharding) and of the
    `prefetch` layers gathered ahead, and its unsharded gradients. `layer_params` may be NumPy's
    array (the plan's layouts): the same floats."""
    v = {
        "Psi_l": layer_params * 1.0,
        "f_pre": as_float(prefetch),
        "beta_g": as_float(grad_bytes),
        "bytes_per_element": as_float(weight_bytes),
    }
    return _numeric().FORMS["zero3_gathered"](v)


def attention_actual(square, attention_dim, full_layers, sum_squared_lengths) -> float:
    """attention_actual (model FLOPs of the core at the real lengths) for numbers, exact for
    integer inputs; `square` a key of SQUARE_FRACTION."""
    v = {
        "a_sq": _numeric().SQUARE_FRACTION[square],
        "d_attn": _number(attention_dim),
        "L_full": _number(full_layers),
        "sum_sq": _number(sum_squared_lengths),
    }
    return as_float(_numeric().FORMS["attention_actual"](v))


def exact_integer(form, values: dict[str, int]) -> int:
    """A linear-attention form (numeric.LINEAR["core_training"]) as an exact integer for
    integer values."""
    result = form({k: _number(x) for k, x in values.items()})
    if result != int(result):
        raise ValueError(f"a linear-attention form is not an integer at {values}: {result}")
    return int(result)


def linear_core_training(values: dict[str, float]) -> float:
    """derive.linear_attention.core_training for numbers (the names of derive.symbols: n_v,
    n_k, d_k, d_v, C, L_linear, D), exact for integers. With a non-integer D (tokens_per_step) it
    rounds as xreplace would, not as the .subs it replaced (one symbol at a time): the last bit
    may differ from that (about one case in five; none among the presets and examples)."""
    form = _numeric().LINEAR["core_training"]
    return as_float(form({k: _number(x) for k, x in values.items()}))
