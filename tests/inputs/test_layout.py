"""inputs.layout: the parallel layout and the course's assumptions as scenario keys."""

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate.account import account
from costmodel.inputs import scenario


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
