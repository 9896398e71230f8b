"""Uneven first and last pipeline stages (first_stage_layers, last_stage_layers: Megatron-LM's
--decoder-first/last-pipeline-num-layers) and the memory of the schedules (evaluate.memory.pipeline:
zero bubble's and DualPipe's micro batches in flight, DualPipe's second copy of the weights)."""

from pathlib import Path

import pytest

from costmodel.cli import main
from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.memory.pipeline import schedule_flights
from costmodel.evaluate.plan import plan
from costmodel.evaluate.plan.plan_batch import Batch
from costmodel.evaluate.plan.plan_eval import Evaluator
from costmodel.evaluate.plan.plan_space import recompute_options, schedule_options
from costmodel.evaluate.simulate import compute_time, run, stage
from costmodel.inputs import scenario, what_if
from costmodel.inputs.stages import stage_split

SCENARIOS = Path(__file__).parents[2] / "scenarios"
DEEPSEEK = SCENARIOS / "deepseek-v3-2048xH800.yaml"
LLAMA = SCENARIOS / "llama-3.1-70b-512xH100.yaml"
#: Llama-3.1-70B on 32 GPUs, 64 sequences: TP 8 x PP 4 (DP 1), 64 micro batches per pipeline.
SMALL = {"num_gpus": 32, "samples_per_step": 64}


@pytest.fixture(scope="module")
def deepseek():
    return scenario.resolve(DEEPSEEK)


def test_the_rest_splits_evenly_over_the_middle_stages():
    # DeepSeek-V3's 61 layers over PP 16, 4 on the first and 1 on the last: (61 - 5) / 14 = 4
    assert stage_split(61, 16, 4, 1) == (4, 4, 1)
    # one stated: the rest over the other 15 stages, (61 - 1) / 15 = 4 (Megatron-LM's rule)
    assert stage_split(61, 16, None, 1) == (4, 4, 1)
    assert stage_split(61, 16, 1, None) == (1, 4, 4)
    assert stage_split(61, 16, None, None) is None  # the even split: ceil(61 / 16) = 4


def test_the_last_stage_holds_the_mtp_layers_besides(deepseek):
    split = deepseek.replace(first_stage_layers=4, last_stage_layers=1)
    assert stage.stage_sizes(split) == {"first": 4, "middle": 4, "last": 1 + 1}
    two = deepseek.replace(pipeline_parallel=2, first_stage_layers=30, last_stage_layers=31)
    assert stage.stage_sizes(two) == {"first": 30, "last": 32}  # no middle stage
    assert stage.stage_sizes(deepseek) is None


@pytest.mark.parametrize(
    "sets, message",
    [
        (
            ["first_stage_layers=5", "last_stage_layers=1"],
            "last_stage_layers: 1 is not allowed; expected a count that leaves the other 14 "
            "stage(s) an equal whole share of the other layers: num_layers (61) minus the stated "
            "stages' (6) = 55 layers, at least one a stage and a multiple of 14",
        ),
        (
            ["pipeline_parallel=2", "first_stage_layers=30", "last_stage_layers=30"],
            "last_stage_layers: 30 is not allowed; expected a count that leaves no other stage an "
            "equal whole share of the other layers: num_layers (61) minus the stated stages' (60) "
            "= 1 layers, must be 0",
        ),
        (
            ["embedding_in_pipeline_split=true", "first_stage_layers=4"],
            "embedding_in_pipeline_split: True is not allowed; expected false with "
            "first_stage_layers or last_stage_layers set",
        ),
        (
            ["loss_in_pipeline_split=true"],  # 61 + 1 = 62 over PP 16
            "loss_in_pipeline_split: True is not allowed; expected false unless "
            "pipeline_parallel (16) divides num_layers (61) with the loss counted as a layer "
            "(62), at least one layer a stage",
        ),
    ],
)
def test_a_split_that_does_not_divide_is_one_line(capsys, sets, message):
    _refused(capsys, DEEPSEEK, sets, message)


def test_interleaved_chunks_split_every_stage(capsys):
    # Llama 3.1 405B's 126 layers, PP 8 x V 8: 6 | 19 x 6 | 6 does not split into 8 chunks
    sets = ["first_stage_layers=6", "last_stage_layers=6"]
    message = (
        "virtual_pipeline: 8 is not allowed; expected a divisor of every stage's layers (first 6, "
        "middle 19, last 6) with first_stage_layers or last_stage_layers set"
    )
    _refused(capsys, SCENARIOS / "llama-3.1-405b-512xH100.yaml", sets, message)


def _refused(capsys, path, sets, message):
    args = ["report", "--scenario", str(path)]
    for one in sets:
        args += ["--set", one]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"costmodel: error: {message}"


def test_no_split_on_one_stage(capsys):
    assert main(["report", "--set", "first_stage_layers=4"]) == 2
    assert "first_stage_layers: 4 is not allowed; expected null with pipeline_parallel 1" in (
        capsys.readouterr().err
    )


def test_the_slowest_stage_sets_the_pace(deepseek):
    even = compute_time.compute(deepseek)
    assert even["detail"]["stage_layers"] == 4  # ceil(62 / 16), with the lm_head: an upper bound
    # 4 | 4 x 14 | 1 + MTP: a 4-layer stage is the slowest, and it runs no lm_head and no loss
    split = compute_time.compute(deepseek.replace(first_stage_layers=4, last_stage_layers=1))
    assert split["detail"]["stage_layers"] == 4
    gemm = even["detail"]["gemm_forward_seconds_per_micro_batch"]
    head = 3 * 120 * sum(gemm[key] for key in compute_time.OUTSIDE_ROWS)  # 120 micro batches
    assert split["parts"]["gemms"] == pytest.approx(even["parts"]["gemms"] - head, rel=1e-12)
    assert split["parts"]["attention"] == even["parts"]["attention"]
    # 1 | 4 x 14 | 4 + MTP: the last stage's 5 layers and its lm_head set the pace
    last = compute_time.compute(deepseek.replace(first_stage_layers=1, last_stage_layers=4))
    assert last["detail"]["stage_layers"] == 5
    assert last["parts"]["gemms"] > even["parts"]["gemms"]


def test_the_most_loaded_stage_holds_its_own_parameters(deepseek):
    sc = deepseek.replace(first_stage_layers=4, last_stage_layers=1)
    got = run.memory(sc)
    params = gpu_memory.split_params(sc.shape, sc)
    # the first stage: 4 of the 62 layers' dense parameters, the experts of 4 of the 59 MoE
    # layers over EP 64, and the embedding (TP 1)
    first = params["layers"] * 4 / 62 + params["experts"] * 4 / 59 / 64 + params["embedding"]
    assert got["stage"] == "first"
    assert got["params_on_gpu"] == pytest.approx(first, rel=1e-12)
    assert got["params_on_gpu"] == pytest.approx(2_637_777_226.32, rel=1e-9)


def test_the_schedules_micro_batches_in_flight():
    # (first stage, second, last) with 100 micro batches over PP 4
    assert schedule_flights("1f1b", 4, 100) == (4, 3, 1)
    assert schedule_flights("interleaved", 4, 100, 2) == (5.5, 4.5, 1)  # 4 + 3/2, 2/V fewer
    assert schedule_flights("zero_bubble", 4, 100) == (7, 5, 1)  # ZB-H2: 2PP - 1
    assert schedule_flights("dualpipe", 4, 100) == (5, 5, 5)  # PP + 1 on every rank
    assert schedule_flights("dualpipe", 4, 3) == (3, 3, 3)  # no more than the step has
    assert schedule_flights("zero_bubble", 1, 100) == (1, 1, 1)


def test_dualpipe_keeps_the_mirrored_stages_weights():
    base = scenario.resolve(LLAMA, dict(SMALL))  # TP 8, PP 4, ZeRO 1: BF16 weights, 2 bytes
    one = run.memory(base.replace(pipeline_schedule="1f1b"))
    dual = run.memory(base.replace(pipeline_schedule="dualpipe"))
    params = gpu_memory.split_params(base.shape, base)
    first = params["layers"] / (8 * 4) + params["embedding"] / 8
    last = params["layers"] / (8 * 4) + params["lm_head"] / 8
    assert one["stage"] == "first" and one["in_flight"] == 4
    assert dual["stage"] == "last" and dual["in_flight"] == 4 + 1
    # the last stage's own weights, and the first stage's (its mirror) besides
    assert dual["weights"] == pytest.approx(2 * last + 2 * first, rel=1e-12)
    assert dual["gradients"] == pytest.approx(4 * last, rel=1e-12)  # not doubled
    assert "PP + 1 micro batches" in dual["convention"]


def test_the_deepseek_scenario_still_fits_with_dualpipe(deepseek):
    got = run.memory(deepseek)
    assert got["in_flight"] == 16 + 1 and got["stage"] == "last"
    assert got["total"] == pytest.approx(74.84e9, rel=1e-3) and got["fits"]  # BF16 moments


def test_another_pipeline_drops_the_split(deepseek):
    split = scenario.resolve(DEEPSEEK, {"first_stage_layers": 4, "last_stage_layers": 1})
    eight = what_if.changed(split, {"pipeline_parallel": 8})
    assert eight.first_stage_layers is None and eight.last_stage_layers is None
    kept = what_if.changed(split, {"micro_batch": 2})
    assert (kept.first_stage_layers, kept.last_stage_layers) == (4, 1)


@pytest.mark.parametrize("schedule", ["dualpipe", "zero_bubble"])
def test_the_plans_peaks_are_the_reports_for_these_schedules(schedule):
    """The plan's search and the report agree on the peak of every schedule searched, DualPipe's
    second copy and zero bubble's micro batches included (tests/evaluate/test_plan.py's
    agreement test, for the schedules of its own that a scenario adds)."""
    base = plan.rebase(scenario.resolve(LLAMA, {**SMALL, "pipeline_schedule": schedule}))
    ev, _, every = plan._space(base, False, {})
    ev.batch = Batch(ev, every)
    alone = Evaluator(base)
    seen = set()
    for core in every[::13]:
        schedules = schedule_options(base, core.pp)
        seen |= {s.name for s in schedules}
        for rc in recompute_options(base)[:2]:
            for zero in (0, 3):
                for i, one in enumerate(schedules):
                    want = run.memory(ev.scenario(core, rc, zero, one))["total"]
                    assert ev.peaks(core, rc, schedules)[zero, i] == want
                    assert alone.peaks(core, rc, schedules)[zero, i] == want
    assert schedule in seen


def test_the_embedding_and_the_loss_counted_as_layers():
    """Megatron-LM's account_for_embedding/loss_in_pipeline_split (get_num_layers_to_build adds
    one to num_layers for each, then splits evenly): Llama 3 405B's 126 layers + 2 over PP 16 are
    8 a stage, 7 on the first and the last; Qwen3-235B's 94 + 2 over PP 8 are 12, 11 at the ends;
    the embedding alone counted, 63 + 1 over PP 16 is 4, 3 on the first; on one stage, moot."""
    assert stage_split(126, 16, embedding=True, loss=True) == (7, 8, 7)
    assert stage_split(94, 8, embedding=True, loss=True) == (11, 12, 11)
    assert stage_split(63, 16, embedding=True) == (3, 4, 4)
    assert stage_split(40, 1, embedding=True, loss=True) is None


def test_a_counted_split_under_interleaving_divides_every_chunk(capsys):
    # Llama 3.1 405B, PP 8 x V 8: 126 + 1 = 127 does not split into 64 chunks; 126 + 2 does
    path = SCENARIOS / "llama-3.1-405b-512xH100.yaml"
    message = (
        "embedding_in_pipeline_split: True is not allowed; expected false unless pipeline_parallel "
        "(8) x virtual_pipeline (8) divides num_layers (126) with the embedding counted as a "
        "layer (127), at least one layer a stage"
    )
    _refused(capsys, path, ["embedding_in_pipeline_split=true"], message)
    both = ["embedding_in_pipeline_split=true", "loss_in_pipeline_split=true"]
    assert main(["report", "--scenario", str(path)] + [a for s in both for a in ("--set", s)]) == 0


def test_the_counted_split_holds_one_layer_fewer_at_each_end():
    """Llama 3.1 405B on PP 8 x V 8 with both counted: 15 layers on the first and the last stage,
    16 on the others; the first stage holds fewer layers' activations than the even split's
    ceil(126 / 8) = 16, so its peak is lower; the slowest stage is a middle one of 16 layers."""
    path = SCENARIOS / "llama-3.1-405b-512xH100.yaml"
    even = scenario.resolve(path)
    counted = scenario.resolve(
        path, overrides={"embedding_in_pipeline_split": True, "loss_in_pipeline_split": True}
    )
    assert stage.stage_sizes(counted) == {"first": 15, "middle": 16, "last": 15}
    assert run.memory(counted)["total"] < run.memory(even)["total"]
    assert compute_time.compute(counted)["detail"]["stage_layers"] == 16
