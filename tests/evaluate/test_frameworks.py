"""Issue 35: the plan searches only what the team's framework offers (inputs.frameworks, the one
table the levers read too), `costmodel plan --framework` overrides the scenario's, and the
interleaved schedule is refused where Megatron-LM refuses it (fewer micro batches than stages),
in the report, the levers and the plan alike."""

import json
from pathlib import Path

import pytest

from costmodel.cli import main
from costmodel.derive import plain
from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account
from costmodel.evaluate.plan import plan
from costmodel.inputs import frameworks, scenario

ROOT = Path(__file__).resolve().parents[2]
LLAMA_70B = str(ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml")
LLAMA_405B = ROOT / "scenarios" / "llama-3.1-405b-512xH100.yaml"
HF_LAB = str(ROOT / "scenarios" / "qwen3-8b-hf-deepspeed-8xH100.yaml")
#: Llama-3.1-70B on 32 GPUs, 64 sequences (a search well under a second).
SMALL = ["--set", "num_gpus=32", "--set", "samples_per_step=64"]


def _plan(capsys, *args) -> dict:
    assert main(["plan", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_every_framework_entry_names_its_source():
    """Each framework of the scenario key has an entry, and every option it offers beyond data
    parallelism (and every one it lacks that the plan constrains) cites where it was read."""
    from costmodel.derive import activations as act

    assert set(frameworks.OFFERS) == set(act.FRAMEWORKS)
    for name, offer in frameworks.OFFERS.items():
        assert "zero_stages" in offer.sources and "recompute" in offer.sources, name
    assert frameworks.OFFERS["megatron"].zero_stages == (0, 1)  # the distributed optimizer
    assert frameworks.OFFERS["torchtitan"].zero_stages == (0, 2, 3)  # FSDP2 or DDP
    assert frameworks.not_offered("huggingface") == (
        "framework huggingface: TP, SP, CP, PP, EP, selective recompute not offered"
    )


def test_a_megatron_plan_has_no_zero_2_or_3(capsys):
    """Megatron-LM shards with its distributed optimizer (ZeRO-1) in the project's table: no
    layout of a Megatron run's plan uses ZeRO-2 or 3, and the output says what was left out."""
    got = _plan(capsys, "--scenario", LLAMA_70B, *SMALL, "--top", "20")
    assert got["framework"] == "megatron"
    assert got["not_offered"] == (
        "framework megatron: ZeRO-2, ZeRO-3, the zero_bubble schedule, the dualpipe schedule "
        "not offered"
    )
    assert len(got["layouts"]) == 20
    assert {item["layout"]["zero_stage"] for item in got["layouts"]} <= {0, 1}


def test_a_hugging_face_lab_plan_has_no_tp_cp_or_pp(capsys):
    """The HF Trainer + DeepSpeed lab (8 GPUs, 128 sequences): only DP 8 is searched, with the
    micro batches that divide its 16 sequences per GPU (1, 2, 4, 8): 4 layouts; no selective
    recompute."""
    got = _plan(capsys, "--scenario", HF_LAB, "--top", "10")
    assert got["searched"] == 4
    for item in got["layouts"]:
        keys = item["layout"]
        assert (keys["tensor_parallel"], keys["context_parallel"]) == (1, 1)
        assert keys["pipeline_parallel"] == 1 and keys["recompute"] in ("none", "full")
    assert main(["plan", "--scenario", HF_LAB, "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "Not searched: framework huggingface: TP, SP, CP, PP, EP" in text


def test_framework_flag_overrides_the_scenarios(capsys):
    """--framework megatron on the HF lab searches TP again (more than its 4 layouts, a
    layout with TP > 1 among them); --framework huggingface on the Megatron run leaves DP 32
    alone: its 2 sequences per GPU at micro batch 1 or 2."""
    megatron = _plan(capsys, "--scenario", HF_LAB, "--framework", "megatron", "--top", "30")
    assert megatron["framework"] == "megatron" and megatron["searched"] > 4
    assert any(item["layout"]["tensor_parallel"] > 1 for item in megatron["layouts"])
    hf = _plan(capsys, "--scenario", LLAMA_70B, *SMALL, "--framework", "huggingface")
    assert hf["framework"] == "huggingface" and hf["searched"] == 2


def test_a_bad_framework_is_one_line(capsys):
    assert main(["plan", "--scenario", HF_LAB, "--framework", "deepspeed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "framework: 'deepspeed' is not allowed; expected one of megatron" in err
    assert "torchtitan" in err and "huggingface_fsdp" in err


def test_interleaving_needs_a_micro_batch_per_stage(capsys):
    """Megatron-LM refuses the interleaved schedule with fewer micro batches than stages: the
    Llama-3.1-405B file (PP 8, DP 4) at 16 sequences has 4 micro batches per pipeline; at 32,
    8 (= PP) it runs; at 48, 12 (not a multiple of 8, Megatron-LM's micro-batch groups of 12)
    its bubble is (p - 1) / (v m) = 7 / (8 x 12) of the compute."""
    with pytest.raises(CostModelError, match="pipeline_schedule: 'interleaved' is not allowed"):
        scenario.resolve(LLAMA_405B, {"samples_per_step": 16})
    assert scenario.resolve(LLAMA_405B, {"samples_per_step": 32})["micro_batches_per_step"] == 8
    assert plain.bubble_over_compute("interleaved", 8, 12, 8) == pytest.approx(7 / 96)
    assert main(["report", "--scenario", str(LLAMA_405B), "--set", "samples_per_step=16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(this layout has 4)" in err


def test_no_plan_row_interleaves_fewer_micro_batches_than_stages():
    """Llama-3.1-405B on 128 GPUs, 16 sequences: the search ranked PP 2, v 63 at one micro
    batch (1.6% bubble, where Megatron-LM refuses it); now every interleaved row has m >= p."""
    sc = scenario.resolve(
        LLAMA_405B,
        {"num_gpus": 128, "samples_per_step": 16, "pipeline_parallel": 8},
    )
    found = plan.search(sc, top=20, count_own=False)
    assert found.rows
    for row in found.rows:
        if row.schedule.name == "interleaved":
            assert row.core.micro_batches >= row.core.pp, row


def test_the_interleaving_lever_is_refused_at_m_under_p():
    """Llama-3.1-70B (PP 4, 1F1B, DP 16) at 32 sequences: 2 micro batches per pipeline, under
    its 4 stages; the lever that would interleave is refused, not ranked."""
    sc = scenario.resolve(Path(LLAMA_70B), {"samples_per_step": 32})
    assert sc["micro_batches_per_step"] == 2
    lever = {x.lever: x for x in account(sc)["advice"]}["pipeline_bubble"]
    assert not lever.feasible and lever.reason.code == "refused"


def test_a_held_value_the_framework_lacks_is_one_line():
    """Constraints that ask for what the framework does not offer (a ZeRO 3 run held under
    Megatron-LM's distributed optimizer) leave nothing to search: one line, not a crash."""
    with pytest.raises(CostModelError) as error:
        plan.search(scenario.resolve(), constraints={"zero_stage": (3,)})
    assert str(error.value) == (
        "framework: 'megatron' is not allowed; expected a framework that offers zero_stage 3 "
        "(it offers 0, 1)"
    )


def test_a_composer_plan_searches_fsdp_alone(capsys):
    """llm-foundry on Composer shards with FSDP alone: Llama-3.1-70B on 32 GPUs (64 sequences)
    searches DP 32 only, at ZeRO 0, 2 or 3 (NO_SHARD, SHARD_GRAD_OP, FULL_SHARD), no selective
    recompute; under megatron the same search ranks TP, PP and CP splits."""
    got = _plan(capsys, "--scenario", LLAMA_70B, *SMALL, "--framework", "composer", "--top", "10")
    assert got["not_offered"] == (
        "framework composer: ZeRO-1, TP, SP, CP, PP, selective recompute not offered"
    )
    assert got["searched"] == 2  # DP 32 at micro batch 1 or 2
    for item in got["layouts"]:
        keys = item["layout"]
        assert (keys["tensor_parallel"], keys["pipeline_parallel"]) == (1, 1)
        assert keys["context_parallel"] == 1 and keys["data_parallel"] == 32
        assert keys["zero_stage"] in (0, 2, 3) and keys["recompute"] in ("none", "full")


def test_a_sequence_parallel_lab_plan_searches_cp_without_tp(capsys):
    """XTuner / EasyContext (DeepSpeed ZeRO with sequence parallelism, the project's CP): the HF
    lab's 8 GPUs are searched as CP x DP (CP 2 to 8 among the layouts), never TP or PP, and
    without FP8; plain Trainer + DeepSpeed searches DP 8 alone (4 layouts)."""
    got = _plan(capsys, "--scenario", HF_LAB, "--framework", "huggingface_sp", "--top", "30")
    assert got["searched"] > 4
    layouts = [item["layout"] for item in got["layouts"]]
    assert {keys["context_parallel"] for keys in layouts} == {1, 2, 4, 8}
    for keys in layouts:
        assert (keys["tensor_parallel"], keys["pipeline_parallel"]) == (1, 1)
        assert keys["fp8"] == "none" and keys["recompute"] in ("none", "full")


def test_options_gained_at_a_date():
    """`offer(name, as_of)` is the framework of that month: Megatron-LM of April 2021 has no CP,
    SP, distributed optimizer, selective recompute or FP8; of May 2022 SP and selective
    recompute (the month they came); torchtitan CP from October 2024; undated, all of today."""
    assert frameworks.plan_constraints("megatron", "2021-04") == {
        "zero_stage": (0,),
        "context_parallel": (1,),
        "expert_parallel": (1,),
        "sequence_parallel": (False,),
        "recompute": ("none", "full"),
        "fp8": ("none",),
    }
    may_2022 = frameworks.offer("megatron", "2022-05")
    assert may_2022.sequence_parallel and "selective" in may_2022.recompute
    assert may_2022.zero_stages == (0,) and not may_2022.context_parallel
    assert frameworks.offer("megatron", "2023-10-30").context_parallel
    assert not frameworks.offer("torchtitan", "2024-09").context_parallel
    assert frameworks.offer("torchtitan", "2024-10").context_parallel
    assert frameworks.offer("torchtitan", "2024-04").zero_stages == (2, 3)  # FSDP only then
    assert frameworks.plan_constraints("megatron") == {"zero_stage": (0, 1)}
    with pytest.raises(ValueError, match="as_of: 'spring' is not a date"):
        frameworks.offer("megatron", "spring")


def test_every_dated_option_is_an_option_with_a_source():
    """Each `since` names an option in `lacks`' words, a month and where it was read."""
    words = {"TP", "SP", "CP", "PP", "EP", "FP8", "selective recompute"}
    words |= {f"ZeRO-{z}" for z in plain.STAGES}
    for name, offer in frameworks.OFFERS.items():
        for option, (came, source) in offer.since.items():
            assert option in words, (name, option)
            assert frameworks.month(came) == came and source, (name, option)


def test_the_framework_help_names_every_choice():
    from costmodel.inputs.fields import FIELDS

    field = FIELDS["framework"]
    assert set(field.choices) == set(frameworks.OFFERS)
    for name in field.choices:
        assert f"{name} (" in field.help or f"| {name} |" in field.help, name
