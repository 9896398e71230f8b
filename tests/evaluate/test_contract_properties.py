"""The report's contract over drawn scenarios (issue 32): a scenario the validator accepts gives
an account and a report (text, Markdown, JSON) with no utilization above the peak, no negative
time or memory, and no predicted step below its compute lower bound; anything else is one
CostModelError line from `resolve`.

The scenarios are consistent ones: a model config (a preset) or a shape given by its keys, whose
N is the shape's (derived), on any GPU, with TP, PP, CP and EP layouts that divide, every
recompute policy, padded or packed batching, BF16 or FP8, and a step that is either predicted
(step_time null) or measured at or above the hardware FLOPs at the peak."""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costmodel.derive import plain
from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account, gemm_peak
from costmodel.inputs import hardware, scenario
from costmodel.inputs.model_shape import tensor_parallel_widths
from costmodel.present.report import render

#: A fixed budget: the same examples on every run (CI); about 4 s idle on one core.
SETTINGS = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PRESETS = ("qwen3.6-35b-a3b", "qwen3-30b-a3b", "llama-3.1-8b", "qwen3-8b", "qwen3-next-80b-a3b")
#: Utilization figures that may pass 100% by what they are: the MoE mistake (N = all
#: parameters), shown as the mistake it is.
NOT_BOUNDED = {"mfu_if_total_params"}
#: Figures that are signed by what they are: measured - predicted, capacity - peak.
SIGNED = {"unexplained_seconds", "unexplained_share", "headroom"}


@st.composite
def key_shapes(draw) -> dict:
    """A model given by its keys (mlp_activation set: N and the total are the shape's)."""
    heads = draw(st.sampled_from([4, 8, 16, 32]))
    layers = draw(st.integers(1, 48))
    keys = {
        "hidden_size": draw(st.sampled_from([256, 1024, 2048, 4096])),
        "num_layers": layers,
        "full_attention_every": draw(st.sampled_from([1, 4])) if layers >= 4 else 1,
        "num_heads": heads,
        "head_dim": draw(st.sampled_from([64, 128])),
        "num_kv_heads": draw(st.sampled_from([k for k in (1, 2, 4, 8, heads) if heads % k == 0])),
        "mlp_activation": draw(st.sampled_from(["swiglu", "gelu"])),
        "vocab_size": draw(st.sampled_from([32_000, 128_256, 248_320])),
    }
    experts = draw(st.sampled_from([0, 8, 64]))
    keys["num_experts"] = experts
    keys["experts_per_token"] = draw(st.sampled_from([1, 2, 8])) if experts else 0
    if experts:
        keys["moe_ffn_hidden_size"] = draw(st.sampled_from([256, 1024]))
        keys["shared_experts"] = draw(st.sampled_from([0, 1]))
        keys["first_dense_layers"] = draw(st.integers(0, layers - 1))
        if keys["first_dense_layers"]:
            keys["ffn_hidden_size"] = draw(st.sampled_from([1024, 8192]))
    else:
        keys["ffn_hidden_size"] = draw(st.sampled_from([1024, 8192, 14336]))
    return keys


def divisor(draw, n: int, most: int) -> int:
    return draw(st.sampled_from([d for d in plain.divisors(n) if d <= most]))


@st.composite
def scenarios(draw) -> dict:
    """Overrides of the course: a consistent scenario (module docstring), step_time left out
    (the test sets it: null, or measured above the work at peak)."""
    data = dict(draw(st.one_of(st.sampled_from(PRESETS).map(lambda m: {"model": m}), key_shapes())))
    data["gpu"] = draw(st.sampled_from(sorted(hardware.GPUS)))
    data["gpus_per_node"] = 8
    if hardware.GPUS[data["gpu"]].intra_node_bandwidth(8) is None:
        data["intra_node_bandwidth"] = 100e9
    seq = data["seq_len"] = draw(st.sampled_from([1024, 4096, 16384, 65536]))
    mean = data["mean_tokens_per_sample"] = draw(st.floats(1, seq).map(math.floor).map(int))
    data["batching"] = draw(st.sampled_from(["padded", "packed"]))
    data["recompute"] = draw(st.sampled_from(["none", "selective", "full"]))
    data["fp8"] = draw(st.sampled_from(["none", "hybrid"]))
    data["attention_flops"] = draw(st.sampled_from(["full", "causal"]))
    data["attention_kernel"] = draw(st.sampled_from(["flash", "eager"]))
    data["measured_tokens_per_s"] = None
    for key in ("gemm_efficiency", "attention_efficiency"):  # null: the GPU generation's
        data[key] = draw(st.one_of(st.none(), st.sampled_from([0.3, 0.8, 1.0])))
    single = {"tensor_parallel": 1, "pipeline_parallel": 1, "context_parallel": 1, "num_gpus": 1}
    try:
        alone = scenario.resolve(overrides={**data, **single, "samples_per_step": 10**6})
    except CostModelError:
        return {**data, "unresolved": True}
    widths = math.gcd(*(w for _, w in tensor_parallel_widths(alone.shape, alone.num_mtp_layers)))
    tp = data["tensor_parallel"] = divisor(draw, widths, 8)
    pp = data["pipeline_parallel"] = draw(st.integers(1, min(4, alone.num_layers)))
    # load-balanced CP: 1, or 2 x CP divides seq_len (inputs.layout.cp_divides)
    cp = data["context_parallel"] = divisor(draw, seq // 2, 4) if seq % 2 == 0 else 1
    dp = draw(st.sampled_from([1, 2, 4, 8, 32]))
    data["num_gpus"] = tp * pp * cp * dp
    data["sequence_parallel"] = tp > 1 and (seq // cp) % tp == 0 and draw(st.booleans())
    if alone.num_experts:
        data["expert_parallel"] = divisor(draw, math.gcd(alone.num_experts, dp), 64)
    batch = data["micro_batch"] = draw(st.sampled_from([1, 2]))
    rows = dp * batch * draw(st.integers(1, 8))  # at least one micro batch per pipeline
    per_sample = seq if data["batching"] == "packed" else 1
    data["samples_per_step"] = rows if per_sample == 1 else math.ceil(rows * seq / mean)
    data["measured"] = draw(st.one_of(st.none(), st.floats(0.2, 100)))
    return data


def numbers(tree, path=""):
    """(path, key, value) of every number in a nested account."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if isinstance(value, (dict, list)):
                yield from numbers(value, f"{path}{key}.")
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                yield f"{path}{key}", key, value
    elif isinstance(tree, list):
        for index, item in enumerate(tree):
            yield from numbers(item, f"{path}{index}.")


def resolved(data: dict):
    """The scenario of the drawn overrides with its step (null, or `measured` times the
    predicted one: longer, or shorter than the model's work), or None where the validator
    refuses it (one line)."""
    data = dict(data)
    if data.pop("unresolved", False):
        return None
    ratio = data.pop("measured")
    try:
        sc = scenario.resolve(overrides={**data, "step_time": None})
        if ratio is None:
            return sc
        step = account(sc, kept=False)["scenario"]["step_time"]  # the prediction
        return scenario.resolve(overrides={**data, "step_time": min(1e9, step * ratio)})
    except CostModelError as error:
        assert "\n" not in str(error)
        return None


def printed_json(a: dict) -> dict:
    data = json.loads(render(a, "json"))  # strict JSON: no inf or nan
    render(a, "markdown")
    return data


@SETTINGS
@given(scenarios())
def test_no_impossible_figure_for_a_consistent_scenario(data):
    sc = resolved(data)
    if sc is None:
        return
    predicted = sc.step_time_from == "predicted"
    try:
        a = account(sc, kept=False)
    except CostModelError as error:  # a measured step shorter than the work at the peak
        assert not predicted and str(error).startswith("impossible result: "), str(error)
        return
    peak = gemm_peak(sc)  # the FP8 peak under fp8: hybrid, else peak_flops
    bound = peak / sc.peak_flops if predicted else 1.0
    # a predicted step is at least the model FLOPs at the peak its GEMMs run at
    lower = a["model_flops_per_step"] / (sc.num_gpus * peak)
    assert not predicted or a["scenario"]["step_time"] >= lower * (1 - 1e-9)
    text, printed = render(a, "text"), printed_json(a)
    what_if = "attention.padded." if sc.batching == "packed" else None  # no work of the run
    for path, key, value in numbers(printed):
        if key.startswith(("mfu", "hfu")) and key not in NOT_BOUNDED:
            if what_if and path.startswith(what_if):
                continue
            assert value <= bound * (1 + 1e-9), (path, value)
            if value > 1 + 1e-9:  # an FP8 run against the BF16 peak: named where it happens
                assert "the GEMMs run at the FP8 peak" in text, path
        if key.endswith("share") and path.startswith(("time.", "communication.")):
            assert -1 <= value <= 1, (path, value)
    for path, key, value in numbers(a):
        assert math.isfinite(value), path
        if key in SIGNED:
            continue
        if "seconds" in key or "step_time" in key or "bytes" in key or path.startswith("memory."):
            assert value >= 0, (path, value)
