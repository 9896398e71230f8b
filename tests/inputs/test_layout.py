"""inputs.layout: the parallel layout and the course's assumptions as scenario keys."""

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account
from costmodel.inputs import layout, scenario


def resolve(**overrides):
    return scenario.resolve(overrides=overrides)


def test_course_layout(course):
    assert (course["tensor_parallel"], course["pipeline_parallel"], course["context_parallel"]) == (
        1,
        1,
        1,
    )
    assert course["data_parallel"] == 40 and course["expert_parallel"] == 8
    # 80 samples over DP 40 at micro batch 1: two micro batches per rank and step
    assert course["micro_batches_per_step"] == 2


def test_data_parallel_is_derived():
    sc = resolve(num_gpus=64, tensor_parallel=4, pipeline_parallel=2, context_parallel=2)
    assert sc["data_parallel"] == 64 // (4 * 2 * 2) == 4


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"tensor_parallel": 3},
            "num_gpus: 40 is not allowed; expected a multiple of tensor_parallel x "
            "pipeline_parallel x context_parallel (3 x 1 x 1 = 3)",
        ),
        (
            {"num_gpus": 48, "tensor_parallel": 3},
            "tensor_parallel: 3 is not allowed; expected a divisor of num_heads (16)",
        ),
        (
            {"pipeline_parallel": 48, "num_gpus": 48},
            "pipeline_parallel: 48 is not allowed; expected at most num_layers (40)",
        ),
        (
            {"expert_parallel": 5},
            "expert_parallel: 5 is not allowed; expected a divisor of num_experts (256) and of "
            "data_parallel (40)",
        ),
        (
            {"num_experts": 0, "experts_per_token": 0, "expert_parallel": 4},
            "expert_parallel: 4 is not allowed; expected 1 for a dense model (num_experts = 0)",
        ),
        ({"grad_bytes": 3}, "grad_bytes: 3 is not allowed; expected 2 or 4"),
        (
            {"zero_stage": 4},
            "zero_stage: 4 is not allowed; expected a non-negative integer up to 3",
        ),
        (
            {"sequence_parallel": True},
            "sequence_parallel: True is not allowed; expected false when tensor_parallel is 1",
        ),
    ],
)
def test_a_layout_that_does_not_divide_is_one_line(overrides, message):
    with pytest.raises(CostModelError) as error:
        resolve(**overrides)
    assert str(error.value) == message


def test_course_ep_is_fitted_when_the_team_did_not_set_it():
    sc = resolve(num_experts=60)  # the course's 8 does not divide 60 experts: 5 does (and 40)
    assert sc["expert_parallel"] == 5 and sc.sources["expert_parallel"] == "derived"
    dense = resolve(num_experts=0, experts_per_token=0)
    assert dense["expert_parallel"] == 1


def test_assumptions_name_their_source():
    a = account(resolve(communication_share=0.12, training_hours=30))
    assumptions = a["assumptions"]
    assert assumptions["communication_share"] == {"value": 0.12, "source": "scenario"}
    assert assumptions["training_hours"] == {"value": 30, "source": "scenario"}
    assert assumptions["ce_chunks"] == {"value": 8, "source": "course"}
    course = account(scenario.resolve())["assumptions"]
    # no measured share: the layout's estimate (an upper bound), not the course's 3%
    assert course["communication_share"]["source"] == "derived"
    assert 0 < course["communication_share"]["value"] < 0.03
    assert course["expert_parallel"]["source"] == "course"


def test_a_node_larger_than_the_nvlink_domain_needs_a_bandwidth():
    """72 H20 in a node: the GPU table knows NVLink for 8 only; one line, unless the scenario
    gives the bandwidth between them (it said "intra_node_bandwidth: None" before)."""
    with pytest.raises(CostModelError) as error:
        resolve(gpus_per_node=72, num_gpus=72)
    assert str(error.value) == (
        "gpus_per_node: 72 is not allowed; expected at most 8 for H20 (its NVLink domain; the GPU "
        "table has no bandwidth for more GPUs in a node), or intra_node_bandwidth set"
    )
    given = account(resolve(gpus_per_node=72, num_gpus=72, intra_node_bandwidth=4e11))
    assert given["communication"]["seconds"] > 0
    assert resolve(gpus_per_node=8, gpu="H100-PCIe", num_gpus=8)["gpus_per_node"] == 8


# ------------------------------------------------------------------ issue 32 (2): micro batches
def test_fewer_samples_than_pipelines_is_one_line():
    """Issue 32 (2): 80 samples on 160 GPUs printed 0.5 micro batches per pipeline and half the
    predicted step (12.16 s against 23.57 s at 80 GPUs): half the pipelines have no sample."""
    with pytest.raises(CostModelError) as error:
        resolve(num_gpus=160)
    assert str(error.value) == (
        "num_gpus: 160 is not allowed; expected at least one micro batch per pipeline and step: "
        "data_parallel x micro_batch (160 x 1 = 160; data_parallel = num_gpus / (TP 1 x PP 1 x "
        "CP 1)) at most samples_per_step (80)"
    )
    # a micro batch larger than a pipeline's samples is named (one of 1 sample would do)
    with pytest.raises(CostModelError) as error:
        resolve(micro_batch=4)
    assert str(error.value) == (
        "micro_batch: 4 is not allowed; expected at most samples_per_step (80) / data_parallel "
        "(40): at least one micro batch per pipeline and step"
    )
    assert resolve(num_gpus=80)["micro_batches_per_step"] == 1


def test_packed_needs_a_sample_per_pipeline_not_a_full_row():
    """Packed batching: a pipeline's rows may end part-filled (47 rows of 49,152 slots for 80
    pipelines, one document each), but not hold no document at all."""
    packed = resolve(batching="packed", num_gpus=80)
    assert packed["micro_batches_per_step"] == pytest.approx(2_310_000 / 49_152 / 80)
    with pytest.raises(CostModelError) as error:
        resolve(batching="packed", num_gpus=160)
    assert str(error.value) == (
        "num_gpus: 160 is not allowed; expected at least one sample per pipeline and step "
        "(packed batching): data_parallel (160; data_parallel = num_gpus / (TP 1 x PP 1 x CP 1)) "
        "at most samples_per_step (80)"
    )


def test_the_rule_is_the_plans():
    """One rule: each split and micro batch of 160 GPUs the plan's search keeps resolves as a
    scenario, and each it leaves out for its micro batches is refused (padded batching: the
    search also keeps only whole numbers of micro batches, which the report does not need)."""
    from costmodel.evaluate.plan import plan, plan_space

    base = plan.rebase(resolve(), 160)
    for tp, pp, cp, dp in plan_space.gpu_splits(base, 160):
        for micro_batch in (1, 2, 3):
            m = plan_space.micro_batches_of(base, dp, micro_batch)
            keys = dict(tensor_parallel=tp, pipeline_parallel=pp, context_parallel=cp)
            keys.update(num_gpus=160, micro_batch=micro_batch, expert_parallel=1)
            try:
                resolve(**keys)
            except CostModelError as error:
                assert not layout.enough_micro_batches(m), (keys, error)
                assert "micro batch per pipeline" in str(error) or "micro_batch" in str(error)
            else:
                assert layout.enough_micro_batches(m), keys
            kept = plan_space._micro_batch_allowed(base, m, micro_batch, cp, dp)
            assert kept == (m >= 1 and float(m).is_integer()), keys


# ------------------------------------------------------------------ issue 32 (4): contradictions
@pytest.mark.parametrize(
    "overrides, message",
    [
        (  # Ulysses: CP splits each TP rank's heads (16 query, 2 K/V heads: CP 4 does not)
            {"cp_comm_type": "a2a", "context_parallel": 4, "num_gpus": 160},
            "context_parallel: 4 is not allowed; expected a divisor of the query heads (16) and "
            "the K/V heads (2) of a TP rank with cp_comm_type a2a (Ulysses splits each rank's "
            "heads over CP; shape from config of qwen3.6-35b-a3b, tensor_parallel 1)",
        ),
        (  # 3 chunks do not split a stage of 20 layers
            {"pipeline_parallel": 2, "pipeline_schedule": "interleaved", "virtual_pipeline": 3},
            "virtual_pipeline: 3 is not allowed; expected a divisor of the layers of a pipeline "
            "stage (20: num_layers / pipeline_parallel, rounded up): chunks of equal size",
        ),
        (
            {"pipeline_parallel": 5, "pipeline_schedule": "dualpipe"},
            "pipeline_parallel: 5 is not allowed; expected an even number (or 1) with "
            "pipeline_schedule dualpipe (DualPipe feeds the pipeline from both ends, pairing its "
            "ranks)",
        ),
        (  # a micro batch of one 49,152-token sample has 49,152 tokens' logits
            {"ce_chunks": 49_153},
            "ce_chunks: 49153 is not allowed; expected at most the tokens of a micro batch on one "
            "GPU (micro_batch x seq_len / context_parallel = 49,152): a piece of the logits holds "
            "at least one token's",
        ),
        (
            {"fp8": "hybrid", "fp8_activations": "moe_inputs", "num_experts": 0,
             "experts_per_token": 0},
            "fp8_activations: 'moe_inputs' is not allowed; expected none or linear_inputs for a "
            "dense model (num_experts = 0: no MoE inputs to store)",
        ),
    ],
)  # fmt: skip
def test_contradictions_are_one_line(overrides, message):
    """Issue 32 (4): each was accepted and evaluated."""
    with pytest.raises(CostModelError) as error:
        resolve(**overrides)
    assert str(error.value) == message


def test_what_the_contradictions_leave_allowed():
    # Ulysses CP 2 splits 2 K/V heads; with TP 2 each rank has 8 query heads and one K/V head
    assert resolve(cp_comm_type="a2a", context_parallel=2, num_gpus=80)["context_parallel"] == 2
    with pytest.raises(CostModelError, match="K/V heads \\(1\\) of a TP rank"):
        resolve(cp_comm_type="a2a", context_parallel=2, tensor_parallel=2, num_gpus=160)
    # chunks that split the most loaded stage: 126 layers on PP 8 (16 on a stage), V 8, as
    # Megatron-LM runs Llama 3.1 405B (its first and last stage one layer short)
    assert (
        resolve(
            num_layers=126,
            num_gpus=64,
            samples_per_step=64,
            pipeline_parallel=8,
            pipeline_schedule="interleaved",
            virtual_pipeline=8,
            full_attention_every=1,
        )["virtual_pipeline"]
        == 8
    )
    # DualPipe on an even pipeline, or none (the schedule is moot)
    assert resolve(pipeline_parallel=2, pipeline_schedule="dualpipe")["pipeline_parallel"] == 2
    assert resolve(pipeline_schedule="dualpipe")["pipeline_parallel"] == 1
    # the course's 8 pieces are brought down to a tiny micro batch's tokens, a team's refused
    tiny = resolve(seq_len=4, mean_tokens_per_sample=4)
    assert (tiny["ce_chunks"], tiny.sources["ce_chunks"]) == (4, "derived")
    assert resolve(ce_chunks=49_152)["ce_chunks"] == 49_152
    # FP8 storage of the linear layers' inputs on a dense model
    dense = dict(num_experts=0, experts_per_token=0, fp8="hybrid")
    assert resolve(**dense, fp8_activations="linear_inputs")["fp8_activations"] == "linear_inputs"
