"""Each published run is run as its own framework (benchmarks/published.py's FRAMEWORKS): every
row of the CSV maps to a scenario `framework`, the row's scenario and memory model see it, and
the benchmark of the plan (benchmarks/plan_published.py) searches what that framework offered
at the row's date (costmodel/inputs/frameworks.py, the one table)."""

from collections import Counter

from benchmarks_loader import load

from costmodel.evaluate.plan import plan
from costmodel.inputs import frameworks, scenario

pub = load("published", "published_runs_frameworks")
ROWS = {row["id"]: row for row in pub.rows()}


def test_every_row_maps_to_a_framework():
    """All 259 rows: llm-foundry's 66 on composer, XTuner's 9 and EasyContext's 5 on
    huggingface_sp, the torchtitan rows and Meta's Llama 3 on torchtitan, the rest (Megatron-LM,
    NeMo, Megatron-Bridge, Megatron-DeepSpeed, HAI-LLM) on megatron."""
    counts = Counter()
    for row in ROWS.values():
        name = pub.stated(row).framework
        assert name in frameworks.OFFERS, row["id"]
        assert pub.overrides(row)["framework"] == name
        counts[name] += 1
    assert counts == {"megatron": 133, "composer": 66, "torchtitan": 46, "huggingface_sp": 14}


def test_the_scenario_and_its_memory_rules_are_the_frameworks():
    """A torchtitan run resolves as torchtitan, an llm-foundry run as composer (Megatron-Core's
    saved tensors both), an XTuner run as huggingface_sp: transformers' modules, whose eager
    RMSNorm keeps an fp32 copy of its input and SwiGLU its SiLU output, so its activations are
    more than the megatron rules it had before counted: 33.1 GB, not 30.8 (the loss the
    course's in every row)."""
    from costmodel.evaluate.simulate.run import memory

    titan = scenario.resolve(overrides=pub.overrides(ROWS["torchtitan-2412-8b-8gpu-fsdp"]))
    assert (titan.framework, titan.cross_entropy) == ("torchtitan", "fused")
    mosaic = ROWS["mosaic-h100-mpt7b-2048-8gpu"]
    assert scenario.resolve(overrides=pub.overrides(mosaic)).framework == "composer"
    keys = pub.overrides(ROWS["xtuner-llama2-7b-32k-8gpu-sp1"])
    xtuner = scenario.resolve(overrides=keys)
    as_megatron = scenario.resolve(overrides={**keys, "framework": "megatron"})
    assert xtuner.framework == "huggingface_sp"
    assert memory(xtuner, fit=False)["total"] > memory(as_megatron, fit=False)["total"] + 2e9


def test_the_benchmark_searches_what_the_framework_had_at_the_date():
    """Megatron-LM of April 2021 (Narayanan et al.): no CP, SP or distributed optimizer, whole
    layers recomputed only; Korthikanti et al. (May 2022) have SP. Megatron-DeepSpeed keeps
    DeepSpeed's ZeRO-1; Llama 3 (Meta's stack, undated) keeps its CP 16 though torchtitan
    had none in 2024-07; llm-foundry: FSDP alone."""
    old = pub.plan_constraints(ROWS["narayanan-18b"])
    assert old["context_parallel"] == (1,) and old["sequence_parallel"] == (False,)
    assert old["zero_stage"] == (0,) and old["recompute"] == ("none", "full")
    assert "sequence_parallel" not in pub.plan_constraints(ROWS["korthikanti-22b-selective"])
    assert pub.plan_constraints(ROWS["bloom-176b-384xa100"])["zero_stage"] == (0, 1)
    assert "context_parallel" not in pub.plan_constraints(ROWS["llama3-405b-131k-16384gpu"])
    assert pub.plan_constraints(ROWS["mosaic-h100-mpt7b-2048-8gpu"]) == {
        "zero_stage": (0, 2, 3),
        "tensor_parallel": (1,),
        "context_parallel": (1,),
        "pipeline_parallel": (1,),
        "sequence_parallel": (False,),
        "recompute": ("none", "full"),
    }


def test_a_2021_megatron_run_is_planned_without_cp():
    """The 1.7B run of Narayanan et al. on 32 GPUs: under Megatron-LM of 2021 no layout of the
    plan uses CP, SP or a ZeRO stage (the same search with today's Megatron-LM has CP rows)."""
    row = ROWS["narayanan-1.7b"]
    sc = scenario.resolve(overrides=pub.overrides(row))
    found = plan.search(sc, top=40, count_own=False, constraints=pub.plan_constraints(row))
    keys = [plan.layout_keys(found, x) for x in found.rows]
    assert keys and all(k["context_parallel"] == 1 and k["zero_stage"] == 0 for k in keys)
    assert not any(k["sequence_parallel"] for k in keys)
    today = plan.search(sc, top=40, count_own=False)
    assert any(plan.layout_keys(today, x)["context_parallel"] > 1 for x in today.rows)


def test_an_own_layout_slower_than_every_fitting_one_is_ranked_in_words_that_hold():
    """EasyContext's 64K ring run holds full recompute, and the search drops it on each of the
    13 layouts that fit (each at its fastest settings): all 13 are predicted faster, so the own
    layout ranks 14th. The text used to print "ranks 14 of 13"; it now says how many of the
    fitting layouts are faster, which holds whether or not the own layout is one of them."""
    from costmodel.present import plan as plan_text

    row = ROWS["easycontext-llama2-7b-64k-ring-8gpu"]
    sc = scenario.resolve(overrides=pub.overrides(row))
    found = plan.search(sc, constraints=pub.plan_constraints(row))
    assert (found.own_rank, found.fitting) == (14, 13)
    text = plan_text.as_text(found, 5)
    assert "ranks 14: 13 of the 13 layouts that fit (each at its fastest settings)" in text
    assert "ranks 14 of 13" not in text
