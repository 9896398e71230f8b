"""Every number the course states for its scenario, to the precision it gives."""

import pytest
import sympy as sp

from costmodel import course
from costmodel.derive import attention, recompute
from costmodel.derive.memory import logits_bytes
from costmodel.derive.symbols import S, V, b_micro, bytes_per_element, r
from costmodel.evaluate.account.account import account
from costmodel.inputs import hardware, scenario


def pct(x, digits=2):
    return round(100 * x, digits)


def test_six_nd_and_achieved(course_account):
    a = course_account
    assert a["model_flops_per_step"] == pytest.approx(4.158e16, rel=1e-12)
    assert round(a["achieved_flops_per_s"] / 1e12, 1) == 346.5
    assert round(a["achieved_flops_per_s_per_gpu"] / 1e12, 2) == 8.66


def test_mfu_hfu(course_account):
    assert pct(course_account["mfu"]) == 5.85
    assert pct(course_account["hfu"]) == 7.80
    assert course_account["recompute_factor"] == pytest.approx(4 / 3)


def test_throughput_cross_check(course_account):
    a = course_account
    assert a["tokens_per_s"] == 19250
    assert round(a["tokens_per_s_per_gpu"]) == 481
    assert a["measured_tokens_per_s"] == 19300
    assert round(a["measured_tokens_per_s_per_gpu"]) == 482  # 482.5, the course says 482
    # per-GPU route: 8.66 TFLOP/s over 148 TFLOP/s is the same MFU as the cluster route
    assert a["achieved_flops_per_s_per_gpu"] / 148e12 == pytest.approx(a["mfu"])


def test_total_params_mistake(course_account):
    assert round(100 * course_account["mfu_if_total_params"]) == 68


def test_padding(course_account):
    p = course_account["padding"]
    assert p["slots"] == 3_932_160
    assert pct(p["useful_fraction"], 1) == 58.7
    quoted = course.figures()
    assert pct(p["waste_fraction"], 1) == pct(course.number(quoted["padding_waste"]["text"]), 1)
    assert round(p["packing_speedup"], 2) == course.number(quoted["packing_speedup"]["text"])
    assert pct(p["mfu_after_packing"]) == 9.96
    assert round(p["step_time_after_packing"]) == 70


# The course's six-row attention table (figures.yaml): layers, width, sequence reading ->
# FLOPs (3 significant digits), share (whole %), MFU with attention (0.1 %).
SIX_ROWS = course.figures()["attention_table"]["rows"]


def test_the_course_gives_six_attention_rows():
    assert len(SIX_ROWS) == 6


@pytest.mark.parametrize(
    "row", SIX_ROWS, ids=lambda r: f"{r['num_layers']}-{r['hidden_size']}-{r['sequence']}"
)
def test_attention_table(row):
    layers, hidden = row["num_layers"], row["hidden_size"]
    # The course's hypotheses give only hidden_size: attention width = hidden_size.
    sc = scenario.resolve(overrides={"num_layers": layers, "hidden_size": hidden})
    assert sc["attention_dim"] == hidden and sc["num_full_attention_layers"] == layers // 4
    got = account(sc)["attention"][row["sequence"]]
    assert float(f"{got['flops_per_step']:.3g}") == course.number(row["flops"])
    assert round(100 * got["share"]) == round(100 * course.number(row["share"]))
    assert round(100 * got["mfu_with_attention"], 1) == pct(
        course.number(row["mfu_with_attention"]), 1
    )


def test_real_shape_equals_third_hypothesis(course_account):
    # Qwen3.6-35B-A3B: 10 full layers x width 4096 = 64 layers/4 x 2560 in FLOPs.
    assert float(f"{course_account['attention']['padded']['flops_per_step']:.3g}") == 9.50e16


def test_machine_balance():
    h20, h100 = hardware.GPUS["H20"], hardware.GPUS["H100-SXM"]
    assert round(h20.balance) == 37
    assert round(h100.balance) == 295
    assert h20.balance / h100.balance == pytest.approx(1 / 8, abs=0.002)


def test_logits_memory():
    value = logits_bytes.subs({b_micro: 1, S: 49152, bytes_per_element: 2})
    assert round(float(value.subs(V, 151_936)) / 1e9) == 15
    assert round(float(value.subs(V, 248_320)) / 1e9, 1) == 24.4


def test_selective_recompute_speedup():
    full, selective = recompute.factor("full"), recompute.factor("selective")
    assert selective == sp.Rational(11, 10)
    assert round(float(full / selective), 2) == 1.21
    assert recompute.fraction_for_factor(sp.Rational(11, 10)) == sp.Rational(3, 10)


def test_packing_times_selective_is_a_product(course_account):
    proj = course_account["projections"]
    both = proj["packing_and_selective_recompute"]["speedup"]
    # the course's own arithmetic: packing 1.70x, full -> selective recompute 1.333 / 1.1 =
    # 1.21x (its assumed factor 1.1), 2.06x together
    assert round(proj["packing"]["speedup"], 2) == 1.70
    course_selective = float(recompute.factor("full") / recompute.factor("selective"))
    assert round(proj["packing"]["speedup"] * course_selective, 2) == 2.06
    # the derived figure: selective recompute is the attention core (Megatron-LM's default set),
    # which redoes no weight GEMM but does redo the core: 1.15x on the course's run
    assert round(proj["selective_recompute"]["speedup"], 2) == 1.15
    assert both == pytest.approx(
        proj["packing"]["speedup"] * proj["selective_recompute"]["speedup"]
    )


def test_attention_conventions_named():
    assert set(attention.CONVENTIONS) >= {"course", "causal", "flash"}
    c = attention.CONVENTIONS
    assert c["course"].training_multiplier == 3
    assert c["flash"].training_multiplier == sp.Rational(7, 2)
    assert c["causal"].square_fraction == sp.Rational(1, 2)


def test_every_quoted_figure_names_its_section():
    for name, figure in course.figures().items():
        assert str(figure["section"]).startswith("06."), name


def test_quoted_text_as_numbers():
    assert course.number("41.3%") == pytest.approx(0.413)
    assert course.number("1.70×") == 1.7
    assert course.number("5.70e16") == 5.7e16


def test_course_mfu_in_the_courses_own_row(course_account):
    # The course puts MoE + 49K + mb 1 on a weak GPU (H20) at 5-12%; its own scenario is there.
    low, high = map(course.number, course.figures()["typical_mfu"]["rows"][-1]["range"])
    assert low <= course_account["mfu"] <= high


def test_policy_fraction_is_defined_once(course):
    assert [recompute.fraction(p) for p in ("none", "selective", "full")] == [
        0,
        sp.Rational(3, 10),
        1,
    ]
    assert recompute.fraction("selective", 0.25) == 0.25 and recompute.fraction("full", 0.25) == 1
    assert scenario.RECOMPUTE_POLICIES == tuple(recompute.POLICIES)
    assert course.substitutions()[r] == float(recompute.fraction("full"))


def test_a_claim_is_quoted_with_its_section():
    assert course.claim("padding_waste") == "41.3%（课程 06.4）"
    assert course.claim("micro_batch_gain") == "1.1×–1.3×（课程 06.8 ③）"
    assert course.claim("headline_understated") == "8%–10%（课程 06.0）"
    with pytest.raises(KeyError):
        course.claim("attention_table")  # rows: quote one row's field instead


def test_claims_table_and_verdicts():
    from costmodel.present import display as d

    assert d.verdict(True) == "成立"
    assert d.verdict(False, "课程的表里最低一行是 8.6%") == "有出入：课程的表里最低一行是 8.6%"
    assert d.verdict(None, "场景没有实测吞吐") == "无从判断：场景没有实测吞吐"
    assert d.CLAIMS_HEADERS == ("课程怎么说", "本页算出", "出入")


def test_a_value_agrees_at_the_precision_the_course_writes():
    # "41.3%": one decimal of a percentage; "1.70×": two decimals; "15 GB": whole gigabytes
    assert course.agrees(0.41251, "padding_waste") and course.agrees(0.41349, "padding_waste")
    assert not course.agrees(0.4124, "padding_waste") and not course.agrees(0.4136, "padding_waste")
    assert course.agrees(1.704, "packing_speedup") and not course.agrees(1.706, "packing_speedup")
    assert course.agrees(14.9e9, "logits_peak") and not course.agrees(15.6e9, "logits_peak")


def test_a_verdict_on_a_course_figure_names_whose_run_it_is():
    from costmodel.present import display as d

    assert d.judge("padding_waste", 0.4131, "41.31%", "why", own=False) == (
        "成立：本页算出 41.31%，按课程的精度就是 41.3%"
    )
    assert (
        d.judge("padding_waste", 0.2, "20.00%", "更短", own=False)
        == "有出入：本页算出 20.00%：更短"
    )
    assert d.judge("padding_waste", 0.2, "20.00%", "更短", own=True) == (
        "有出入：课程的 41.3% 说的是课程那次训练；你的场景是 20.00%：更短"
    )
    assert d.judge("padding_waste", 0, "0.00%", "没有 pad", own=True, quiet=True) == (
        "有出入：课程的 41.3% 说的是课程那次训练；你的场景里没有 pad"
    )
    assert d.judge("padding_waste", 0.4131, "41.31%", "", "（注）", own=True).endswith("相同（注）")
