"""The optimizer step's memory traffic: Adam's bytes on one GPU per step (the `memory_bound`
part's optimizer share, evaluate.simulate.compute_time), the same on numbers and on the plan's
arrays of layouts."""

from __future__ import annotations

from costmodel.derive import plain
from costmodel.derive.lanes import as_float, maximum
from costmodel.evaluate.simulate import stage
from costmodel.inputs.scenario import Scenario
from costmodel.inputs.shape import ModelShape


def optimizer_bytes(sc: Scenario, shape: ModelShape) -> float:
    """Adam's bytes on one GPU per step: its shard of the stage's parameters (elementwise: the
    plan's sizes may be arrays over its layouts)."""
    tp, pp, ep = sc.tensor_parallel, sc.pipeline_parallel, sc.expert_parallel
    dp, cp = sc.data_parallel, sc.context_parallel
    etp = getattr(sc, "expert_tensor_parallel", None)  # the plan's layouts: None, ETP = TP
    experts = stage.routed_experts(shape, sc.num_mtp_layers)
    dense = maximum(as_float(sc.total_params) - experts, 0.0)
    dense_gpu, experts_gpu = dense / (tp * pp), experts / ((tp if etp is None else etp) * pp * ep)
    if sc.zero_stage >= 1:
        dense_gpu /= dp * cp
        # EDP: TP x CP x DP / (ETP x EP), DP x CP / EP without ETP (inputs.layout.expert_split)
        edp = dp * cp // ep if etp is None else tp * cp * dp // (etp * ep)
        experts_gpu /= stage.maximum(edp, 1)
    per_param = plain.optimizer_step_bytes(sc.optimizer_dtype, sc.main_params_dtype)
    return per_param * (dense_gpu + experts_gpu)
