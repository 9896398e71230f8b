"""evaluate.simulate.run: the memory of the most loaded GPU, the communication of a step and the levers
ranked for the run, checked by hand on the course's run and small layouts."""

import pytest

from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import run
from costmodel.inputs import models, scenario
from costmodel.present.advice import note


def resolve(**overrides):
    return scenario.resolve(overrides=overrides)


@pytest.fixture(scope="module")
def flash():
    return account(resolve(attention_kernel="flash"))


def test_model_states_follow_zero_1(flash):
    mem = flash["memory"]
    shape = models.load_shape("qwen3.6-35b-a3b")
    experts = shape.breakdown["routed_experts_total"] / 8  # EP 8
    on_gpu = mem["params_on_gpu"]
    assert mem["weights"] == pytest.approx(2 * on_gpu)  # BF16 weights, replicated
    assert mem["gradients"] == pytest.approx(4 * on_gpu)  # fp32 main gradients (grad_bytes 4)
    # ZeRO 1: the optimizer's 12 bytes per parameter sharded over DP = 40 (dense) and over
    # DP / EP = 5 (an expert's data-parallel group)
    assert mem["optimizer"] == pytest.approx(12 * (on_gpu - experts) / 40 + 12 * experts / 5)


def test_logits_and_the_fit_of_the_course_run(flash):
    mem = flash["memory"]
    assert mem["logits"] == 49152 * 248320 * 2  # BF16 logits of one micro batch
    # full recompute with a flash kernel fits the H20: its CUDA total, 97,871 MiB, minus the
    # 2 GiB memory_reserve; the peak is the loss (the logits with the saved layer inputs)
    assert mem["fits"] and mem["capacity"] == 97871 * 2**20 - 2**31
    assert mem["peak_phase"] == "loss" and 0 < mem["headroom"] < 20e9
    selective = run.memory(resolve(attention_kernel="flash"), recompute="selective")
    assert not selective["fits"]  # the course's "selective recompute if memory allows": no
    doubled = run.memory(resolve(attention_kernel="flash"), micro_batch=2)
    assert not doubled["fits"] and doubled["logits"] == 2 * mem["logits"]


def test_eager_scores_do_not_fit_at_49k():
    eager = account(resolve(attention_kernel="eager"))["memory"]
    # the layer rebuilt under full recompute keeps 16 heads x 49,152^2 scores, BF16 softmax
    # output (Megatron-Core's fused softmax: no fp32 copy), in the backward
    assert eager["peak_phase"] == "backward"
    assert eager["phases"]["backward"]["contents"]["recompute_working_set"] > 16 * 49152**2 * 2
    assert not eager["fits"]


def test_measured_communication_share_is_used():
    measured = account(resolve(communication_share=0.2))["communication"]
    assert measured["basis"] == "measured" and measured["share_used"] == 0.2
    assert 0 < measured["estimated_share"] < 0.2  # the estimate shown beside it
    overlap = next(
        x
        for x in account(resolve(communication_share=0.2))["advice"]
        if x["lever"] == "communication_overlap"
    )
    assert overlap["speedup"] == pytest.approx(1 / 0.8)


def test_levers_ranked_and_combined(flash):
    ranked = flash["advice"]
    assert {x["lever"] for x in ranked} == set(run.LEVERS)
    # the feasible levers first, each group by gain
    key = [(not x["feasible"], -x["speedup"]) for x in ranked]
    assert key == sorted(key)
    by = {x["lever"]: x for x in ranked}
    # packing removes the pad slots from the GEMMs and, where the kernel attends the padded rows
    # whole (attention_on_padding: computed, the course's), the padded squares from the attention
    # core: the model's gain is above the slot ratio; with a varlen kernel (skipped) the core is
    # at the real lengths already, and the gain is below it
    assert by["packing"]["speedup"] > flash["padding"]["packing_speedup"]
    skipped = account(resolve(attention_kernel="flash", attention_on_padding="skipped"))
    packing = next(x for x in skipped["advice"] if x["lever"] == "packing")
    assert 1 < packing["speedup"] < skipped["padding"]["packing_speedup"]
    assert not by["selective_recompute"]["feasible"] and not by["recompute_off"]["feasible"]
    assert not by["micro_batch"]["feasible"]  # 117 GB at micro batch 2
    combined = flash["advice_combined"]
    assert combined["product"] == pytest.approx(combined["step_before"] / combined["step_after"])
    assert "selective_recompute" not in combined["levers"]


def test_pipeline_bubble_lever():
    sc = resolve(
        model="llama-3.1-8b",
        num_gpus=64,
        pipeline_parallel=4,
        samples_per_step=64,
        micro_batch=1,
        seq_len=8192,
        mean_tokens_per_sample=8192,
        attention_kernel="flash",
    )
    a = account(sc)
    # DP = 16, so 64 / 16 = 4 micro batches per pipeline: bubble (4 - 1) / (4 + 4 - 1) = 3/7
    assert a["parallel"]["dp"] == 16 and a["parallel"]["micro_batches"] == 4
    assert a["parallel"]["pipeline_bubble"] == pytest.approx(3 / 7)
    lever = next(x for x in a["advice"] if x["lever"] == "pipeline_bubble")
    # interleaving 2 chunks: the model's bubble over the stage's compute from 3/4 to 3/8
    assert lever["changes"] == {"pipeline_schedule": "interleaved", "virtual_pipeline": 2}
    bubble = a["time"]["parts"]["pipeline_bubble"]["seconds"]
    assert lever["step_before"] - lever["step_after"] == pytest.approx(bubble / 2, rel=0.05)
    assert lever["feasible"]  # 32 layers divide into 2 x 4 chunks
    # interleaving holds p + (p - 1) / v = 5.5 micro batches in flight instead of 4
    interleaved = run.memory(sc, virtual_stages=2)
    assert interleaved["in_flight"] == pytest.approx(5.5)
    assert interleaved["activations"] > a["memory"]["activations"]
    assert f"memory peak {interleaved['total'] / 1e9:,.1f} GB" in note(lever)


def test_pipeline_bubble_lever_needs_the_layers_to_split_and_the_memory():
    uneven = account(
        resolve(model="llama-3.1-8b", num_gpus=48, pipeline_parallel=3, samples_per_step=48)
    )
    lever = next(x for x in uneven["advice"] if x["lever"] == "pipeline_bubble")
    # PP 3 leaves 11 layers on a stage, which 2 chunks do not split: the validator refuses it
    assert not lever["feasible"] and "refused when resolved again" in note(lever)
    # 32 layers split into 2 x 4 chunks and 4 micro batches in flight fit the H20's 96 GB,
    # but 5.5 do not
    tight = resolve(
        model="llama-3.1-8b",
        num_gpus=64,
        pipeline_parallel=4,
        samples_per_step=64,
        recompute="none",
        seq_len=16384,
        mean_tokens_per_sample=16384,
        attention_kernel="flash",
    )
    now, interleaved = run.memory(tight), run.memory(tight, virtual_stages=2)
    assert now["fits"] and not interleaved["fits"]
    lever = next(x for x in account(tight)["advice"] if x["lever"] == "pipeline_bubble")
    assert lever["speedup"] > 1 and not lever["feasible"]


def test_dense_model_has_no_load_balance_lever():
    a = account(resolve(num_experts=0, experts_per_token=0))
    lever = next(x for x in a["advice"] if x["lever"] == "load_balance")
    assert (
        lever["speedup"] == 1 and not lever["feasible"] and "no expert parallelism" in note(lever)
    )


def test_a_changed_micro_batch_changes_the_micro_batches_per_step():
    """run.comm and run.memory on values with another micro batch agree with the scenario
    resolved at that micro batch (micro batches per step follow samples / (DP x b))."""
    base = resolve(num_gpus=64, pipeline_parallel=4, samples_per_step=32)
    doubled = resolve(num_gpus=64, pipeline_parallel=4, samples_per_step=32, micro_batch=2)
    assert run.micro_batches(base, 2) == doubled["micro_batches_per_step"] == 1
    by_hand = run.comm(base.replace(micro_batch=2))
    assert by_hand["seconds"] == pytest.approx(run.comm(doubled)["seconds"])
    # 1F1B holds min(m, p) micro batches on the first stage: m = 1 at b = 2, m = 2 at b = 1
    lever = run.memory(base, micro_batch=2)
    assert lever["total"] == pytest.approx(run.memory(doubled)["total"])
