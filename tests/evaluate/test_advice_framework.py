"""Issue 36: the levers follow the run they are offered to. A Hugging Face Trainer run is not
offered what its framework lacks (per-module recompute, the interleaved pipeline, CP, TP overlap);
a memory lever that moves nothing (no logits on the most loaded stage, or a peak without them)
is not a lever; no lever's note states a before and an after that read alike."""

import re
from pathlib import Path

import pytest

from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario
from costmodel.present import advice as advice_en
from costmodel.present import advice_zh

ROOT = Path(__file__).resolve().parents[2]
HF_LAB = ROOT / "scenarios" / "qwen3-8b-hf-deepspeed-8xH100.yaml"
#: The course, every shipped scenario and the test scenarios unlike them (tests/data).
SCENARIOS = [
    None,
    *sorted((ROOT / "scenarios").glob("*.yaml")),
    *sorted((ROOT / "tests" / "data").glob("*.yaml")),
]


def _levers(path, **overrides):
    return {x.lever: x for x in account(scenario.resolve(path, overrides or None))["advice"]}


#: The levers the HF lab (at PP 2: a pipeline to interleave) is not offered, and the option of
#: inputs.frameworks each needs.
HF_LACKS = {
    "selective_recompute": "selective recompute",
    "recompute_modules": "selective recompute",
    "pipeline_bubble": "the interleaved schedule",
    "context_parallel": "CP",
    "tensor_parallel": "TP",
}


def test_a_hugging_face_run_gets_no_lever_its_framework_lacks():
    """The HF Trainer lab (framework: huggingface) is not offered selective recompute by modules,
    the interleaved pipeline, CP or TP (inputs.frameworks' table); each says why."""
    levers = _levers(HF_LAB, pipeline_parallel=2)  # a pipeline to interleave
    for name, option in HF_LACKS.items():
        lever = levers[name]
        assert not lever.feasible and lever.reason.code == "not_offered", (name, lever.reason)
        assert lever.reason.facts["option"] == option
        assert "huggingface" in advice_zh.note(lever) and "huggingface" in advice_en.note(lever)
    assert levers["recompute_off"].changes  # turning checkpointing off is the Trainer's too
    assert levers["pipeline_parallel"].changes == {"pipeline_parallel": 1}  # PP 2 -> 1: offered
    # a lever with nothing to change keeps its own reason: the lab as it is has no pipeline
    assert _levers(HF_LAB)["pipeline_bubble"].reason.code == "no_pipeline"
    assert _levers(HF_LAB)["pipeline_parallel"].reason.code == "not_offered"  # PP 1 -> 2


def test_the_same_run_under_megatron_keeps_those_levers():
    """The check is the framework's: the same lab as a Megatron-LM run is offered them again."""
    levers = _levers(HF_LAB, framework="megatron", pipeline_parallel=2)
    assert all(levers[name].reason.code != "not_offered" for name in HF_LACKS)
    assert levers["selective_recompute"].changes


def test_no_tp_overlap_for_a_hugging_face_run_with_tensor_parallelism():
    """TP's overlap with the GEMMs (Transformer Engine's userbuffers) is Megatron-LM's: the overlap
    lever of an HF run with TP 2 leaves tp_comm_overlap alone."""
    hf = _levers(HF_LAB, tensor_parallel=2)["communication_overlap"]
    megatron = _levers(HF_LAB, tensor_parallel=2, framework="megatron")["communication_overlap"]
    assert "tp_comm_overlap" not in hf.changes
    assert megatron.changes.get("tp_comm_overlap") is True


def test_chunked_cross_entropy_needs_logits_at_the_peak():
    """Llama-3.1-70B at PP 4: the most loaded stage (the first) has no lm_head, so chunking the loss
    is no lever (it was offered as feasible, "留 0.0 GB 的 logits，而不是 0.0 GB"); with the peak in
    the backward the chunked loss leaves the peak where it is."""
    lever = _levers(ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml")["chunked_cross_entropy"]
    assert not lever.feasible and lever.reason.code == "no_logits_on_stage"
    assert "0.0 GB" not in advice_zh.note(lever)
    course = _levers(None)["chunked_cross_entropy"]
    assert course.feasible and course.peak_after < account(scenario.resolve())["memory"]["total"]


#: A lever note's before and after: (pattern, groups to compare).
PAIRS = (
    re.compile(r"留 ([\d.,]+ GB) 的 logits，而不是 ([\d.,]+ GB)"),
    re.compile(r"峰值从 ([\d.,]+ GB)（[^）]*）降到 ?([\d.,]+ GB)"),
    re.compile(r"预测一步 ([\d.,]+) 秒 → ([\d.,]+) 秒"),
    re.compile(r"holds ([\d.,]+ GB) of logits instead of ([\d.,]+ GB)"),
)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: "course" if p is None else p.stem)
def test_no_lever_note_states_equal_before_and_after(path):
    """Every lever's note, in both languages, for the course, every scenario and the test ones:
    a before and an after that read alike are no lever."""
    for lever in account(scenario.resolve(path))["advice"]:
        for text in (advice_zh.note(lever), advice_en.note(lever)):
            for pattern in PAIRS:
                for before, after in pattern.findall(text):
                    assert before != after, (lever.lever, text)
