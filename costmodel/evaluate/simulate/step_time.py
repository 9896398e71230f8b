"""How long a step should take: the step-time model, part by part, on the most loaded GPU.

`predict(sc)` for a resolved Scenario returns

    {"seconds": the predicted step, the sum of the parts,
     "parts": {"gemms", "attention", "linear_attention", "memory_bound", "kernel_overhead",
               "recompute", "communication_exposed", "pipeline_bubble"} (seconds; 0.0 where
               one does not apply),
     "detail": per-GEMM and per-collective breakdown,
     "efficiencies": {name: {"value", "source"}} (costmodel.inputs.efficiency, or the scenario's),
     "generation": the GPU's generation}

- The compute parts (gemms, attention, linear_attention, memory_bound, kernel_overhead,
  recompute) are
  costmodel.evaluate.simulate.compute_time's: per GPU of the most loaded pipeline stage, every micro
  batch of the step.
- communication_exposed: what the overlap rules of costmodel.evaluate.communication.communication leave
  exposed, with the compute it hides behind taken from this model (not at the GPU's peak).
- pipeline_bubble: the schedule's idle time (derive.step_time.BUBBLE_OVER_COMPUTE, with
  `pipeline_schedule` and `virtual_pipeline`) as a share of the stage's compute (the optimizer
  step apart: it runs after the pipeline drains).

`account(prediction, measured)` compares it with a measured step: `unexplained` = measured -
predicted; negative when the model predicts a longer step than was measured (said by how much:
its parts are slower than the run was, or an input is not what the run had), and then every part
longer than the measured step is named with the inputs it rests on (a part can exceed the step
only when the scenario's inputs contradict the run, e.g. links at 1 MB/s).
"""

from __future__ import annotations

from typing import Any

from costmodel.derive import plain
from costmodel.derive.lanes import as_float
from costmodel.evaluate.simulate import attention_core, compute_time, run
from costmodel.inputs.scenario import Scenario, as_scenario
from costmodel.inputs.shape import ModelShape

#: The parts of a step, in the order the report shows them.
PARTS = (
    "gemms",
    "attention",
    "linear_attention",
    "memory_bound",
    "kernel_overhead",
    "recompute",
    "communication_exposed",
    "pipeline_bubble",
)


#: The parts that are compute (the rest: exposed communication and the bubble).
COMPUTE_PARTS = PARTS[:-2]

#: What each part rests on beyond the model's arithmetic: the scenario keys and conventions a
#: part larger than a measured step calls into question (`account`'s `exceeding`).
PART_INPUTS = {
    "gemms": "the GEMM efficiency of the GPU generation (gemm_efficiency) and the GPU's peak",
    "attention": "the attention kernel (attention_kernel), its efficiency (attention_efficiency), "
    "the sequence lengths and whether the kernel runs the pad slots (attention_on_padding)",
    "linear_attention": "the chunked linear-attention kernel at the flash kernel's efficiency",
    "memory_bound": "the HBM bandwidth and hbm_efficiency",
    "kernel_overhead": "the fixed seconds per kernel launch (kernel_launch_overhead) and the "
    "kernels counted per layer (evaluate.simulate.kernels)",
    "recompute": "the recompute policy (recompute, recompute_modules)",
    "communication_exposed": "the link bandwidths (intra_node_bandwidth, inter_node_bandwidth, "
    "gpus_per_node), ring collectives at those bandwidths, and the overlap rules (tp_comm_overlap, "
    "overlap_grad_reduce, overlap_param_gather, ep_overlap, ep_overlap_fraction, "
    "moe_shared_expert_overlap)",
    "pipeline_bubble": "the pipeline schedule (pipeline_schedule, virtual_pipeline) and the micro "
    "batches per step",
}


def bubble_share(sc: Scenario) -> float:
    """The schedule's bubble over the stage's compute (0 without a pipeline)."""
    sc = as_scenario(sc)
    return plain.bubble_over_compute(
        sc.pipeline_schedule or "1f1b",
        sc.pipeline_parallel,
        sc.micro_batches_per_step,
        sc.virtual_pipeline or 1,
    )


def step_parts(computed: dict, exposed: float, share: float) -> dict[str, float]:
    """The parts of a step from its compute (compute_time.compute's parts and optimizer
    seconds), the exposed communication and the schedule's bubble `share` of the stage's compute
    (the optimizer step apart: it runs after the pipeline drains). The report's prediction and
    each layout of the plan's search."""
    parts = dict(computed["parts"])
    parts["communication_exposed"] = exposed
    stage = sum(computed["parts"].values()) - computed["optimizer_seconds"]
    parts["pipeline_bubble"] = share * stage
    return parts


def predicted_comm(sc: Scenario, shape: ModelShape, computed: dict | None = None) -> dict:
    """The collectives of the prediction (run.comm) behind the compute it predicts
    (compute_time.compute's phases, `computed` where given): each with its exposed seconds."""
    computed = computed or compute_time.compute(sc, shape)
    hiding = run.hiding_compute(computed["phases"], computed["shared_expert_seconds"])
    # a step the scenario leaves to the prediction (step_time null): what a collective leaves
    # exposed does not depend on the share of the step it takes, so any step will do
    timed = sc if sc.step_time is not None else sc.replace(step_time=1.0)
    return run.comm(timed, shape, hiding)


def predict(
    sc: Scenario, shape: ModelShape | None = None, comm: dict | None = None
) -> dict[str, Any]:
    """The predicted step (module docstring). `comm`: the communication already evaluated with
    this model's compute (the account passes its own), else evaluated here."""
    sc = as_scenario(sc)
    shape = shape or sc.shape
    computed = compute_time.compute(sc, shape)
    if comm is None:
        comm = predicted_comm(sc, shape, computed)
    share = bubble_share(sc)
    parts = step_parts(computed, comm["exposed_seconds"], share)
    parts = {name: as_float(parts.get(name, 0.0)) for name in PARTS}
    return {
        "seconds": sum(parts.values()),
        "parts": parts,
        "detail": {
            **computed["detail"],
            "phases": computed["phases"],
            "pipeline_schedule": sc.pipeline_schedule or "1f1b",
            "virtual_pipeline": sc.virtual_pipeline,
            "bubble_over_compute": share,
            # the rows the attention kernel runs: each padded row whole, or the real lengths
            "attention_lengths": "padded" if attention_core.pads_computed(sc) else "real",
            "collectives": [
                {"name": c["name"], "exposed_seconds": c["exposed_seconds"]}
                for c in comm["collectives"]
            ],
        },
        "efficiencies": computed["efficiencies"],
        "generation": computed["generation"],
    }


def account(prediction: dict[str, Any], measured: float | None) -> dict[str, Any]:
    """The `time` section: each part's seconds and share (of the measured step when there is
    one, else of the prediction), the prediction, and with a measured step the unexplained
    remainder; `contradiction` names a negative remainder plainly, and `exceeding` lists each
    part longer than the measured step with the inputs it rests on (PART_INPUTS): one of them
    is not what the run had."""
    predicted = prediction["seconds"]
    base = measured if measured is not None else predicted
    out = {
        "predicted_seconds": predicted,
        "measured_seconds": measured,
        "basis": "measured" if measured is not None else "predicted",
        "parts": {
            name: {"seconds": seconds, "share": seconds / base if base else 0.0}
            for name, seconds in prediction["parts"].items()
        },
        "unexplained_seconds": None,
        "unexplained_share": None,
        "contradiction": None,
        "exceeding": [],
        "generation": prediction["generation"],
        "efficiencies": prediction["efficiencies"],
        "detail": prediction["detail"],
    }
    if measured is not None:
        unexplained = measured - predicted
        out["unexplained_seconds"] = unexplained
        out["unexplained_share"] = unexplained / measured
        out["exceeding"] = [
            {"part": name, "seconds": seconds, "rests_on": PART_INPUTS[name]}
            for name, seconds in prediction["parts"].items()
            if seconds > measured
        ]
        if unexplained < 0:
            over = predicted / measured
            more = f"{over - 1:.1%} more" if over < 2 else f"{over:,.1f} times the measured step"
            out["contradiction"] = (
                f"the model predicts a longer step than was measured: {predicted:.4g} s "
                f"against {measured:.4g} s ({-unexplained:.4g} s, {more}): its parts are slower "
                f"than this run was, or an input is not what the run had"
            )
            for part in out["exceeding"]:
                out["contradiction"] += (
                    f"; {part['part']} alone ({part['seconds']:.4g} s) is longer than the "
                    f"measured step: one of these is not what the run had: {part['rests_on']}"
                )
    return out
