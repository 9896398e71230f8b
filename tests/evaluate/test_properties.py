"""Property tests: relations that hold for any valid scenario."""

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from costmodel.evaluate.account.account import account as evaluate_account
from costmodel.inputs import hardware, scenario

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def scenarios(draw):
    seq_len = draw(st.integers(1024, 262_144))
    total = draw(st.integers(10**8, 10**12))
    experts = draw(st.sampled_from([0, 8, 64, 256]))
    mean, samples = draw(st.floats(1, seq_len, allow_nan=False)), draw(st.integers(1, 4096))
    # at least a sample for each GPU's pipeline (micro batch 1, TP = PP = CP = 1)
    activated, gpus = draw(st.integers(10**7, total)), draw(st.integers(1, samples))
    gpu = draw(st.sampled_from(["H20", "H100-SXM", "B200", "MI300X"]))
    batching = draw(st.sampled_from(["padded", "packed"]))
    # a possible scenario: HFU (at most 4/3 x MFU) between 1% and 100%, over every slot the
    # step computes (padded: samples x seq_len; packed: the real tokens)
    per_sample = seq_len if batching == "padded" else mean
    hfu_at_1_s = (
        6 * activated * samples * per_sample * 4 / 3 / (gpus * hardware.GPUS[gpu].bf16_flops)
    )
    step_time = max(0.01, hfu_at_1_s * draw(st.floats(1.001, 100)))
    assume(step_time <= 1e7)  # x 100 in test_mfu_scales_as_inverse_step_time stays <= 1e9
    return {
        "seq_len": seq_len,
        "mean_tokens_per_sample": mean,
        "samples_per_step": samples,
        "total_params": total,
        "activated_params": activated,
        "step_time": step_time,
        "num_gpus": gpus,
        "gpu": gpu,
        "measured_tokens_per_s": None,
        "recompute": draw(st.sampled_from(["none", "selective", "full"])),
        "num_experts": experts,
        "experts_per_token": 0 if experts == 0 else draw(st.integers(1, experts)),
        "hidden_size": draw(st.integers(256, 16384)),
        "num_layers": draw(st.integers(4, 128)),
        "batching": batching,
    }


def account(data):
    return evaluate_account(scenario.resolve(data=data))


@SETTINGS
@given(scenarios(), st.floats(1.01, 100))
def test_mfu_scales_as_inverse_step_time(data, stretch):
    base = account(data)
    slower = account({**data, "step_time": data["step_time"] * stretch})
    assert slower["mfu"] == pytest.approx(base["mfu"] / stretch, rel=1e-9)


@SETTINGS
@given(scenarios())
def test_hfu_over_mfu_is_the_recompute_factor(data):
    a = account(data)
    # selective: Megatron-LM's default set (the attention core) redoes no weight GEMM
    expected = {"none": 1.0, "selective": 1.0, "full": 4 / 3}[data["recompute"]]
    assert a["hfu"] / a["mfu"] == pytest.approx(expected, rel=1e-12)
    assert a["hfu"] >= a["mfu"]


@SETTINGS
@given(scenarios())
def test_padding_waste_in_unit_interval(data):
    p = account(data)["padding"]
    assert 0 <= p["waste_fraction"] < 1
    assert p["packing_speedup"] >= 1
    # from the scenario's own inputs: real tokens per sample over the padded length
    mean, seq_len = data["mean_tokens_per_sample"], data["seq_len"]
    if data["batching"] == "packed":  # no padding slots: nothing wasted, nothing to gain
        assert (p["useful_fraction"], p["waste_fraction"], p["packing_speedup"]) == (1, 0, 1)
        return
    assert p["useful_fraction"] == pytest.approx(mean / seq_len, rel=1e-12)
    assert p["waste_fraction"] == pytest.approx((seq_len - mean) / seq_len, rel=1e-9, abs=1e-12)
    assert p["packing_speedup"] == pytest.approx(seq_len / mean, rel=1e-12)


@SETTINGS
@given(scenarios(), st.floats(1.01, 4))
def test_attention_share_grows_with_seq_len(data, factor):
    # packed, so that the longer padded length adds no slots the step must have computed
    data = {**data, "batching": "packed"}
    longer_len = int(data["seq_len"] * factor) + 1
    base = account(data)["attention"]["padded"]["share"]
    longer = account({**data, "seq_len": longer_len})["attention"]["padded"]["share"]
    assert longer > base


@SETTINGS
@given(scenarios())
def test_total_params_mfu_never_below_activated(data):
    a = account(data)
    assert a["mfu_if_total_params"] >= a["mfu"]
    assert a["mfu_if_total_params"] / a["mfu"] == pytest.approx(
        data["total_params"] / data["activated_params"]
    )
