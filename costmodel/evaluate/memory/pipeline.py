"""The pipeline stages whose bytes the memory model compares (gpu_memory.most_loaded), and what
the schedule adds to them: the micro batches each stage holds in flight, and DualPipe's second
copy of the weights.

- Stages: the first (the embedding) and the last (the lm_head, the logits), each with ceil(L / PP)
  layers; under a stated uneven split (first_stage_layers, last_stage_layers:
  evaluate.simulate.stage.stage_sizes) each with its own layers, and a middle stage (PP > 2)
  besides, the second one (the most micro batches of the middle stages). A stage's share of the
  layers' parameters follows its layers: the dense part in proportion, the routed experts of as
  many MoE layers as it holds (its layers taken MoE first, as its activations are: an upper
  bound whatever the placement).
- In flight, in micro batches of one stage (the unit of DeepSeek-V3's Table 2): 1F1B holds
  min(m, PP) on the first stage, PP - 1 on the second, 1 on the last (Narayanan et al.,
  arXiv:2104.04473); interleaved 1F1B PP + (PP - 1)/V on the first, 2/V fewer on the second
  (Megatron-LM's warm-up of (PP - i - 1) x 2 + (V - 1) x PP + 1 chunks on rank i); zero bubble,
  the schedule whose bubble the step-time model takes as 0, is ZB-H2 (Qi et al., Zero Bubble
  Pipeline Parallelism, arXiv:2401.10241, section 2.2: up to 2PP - 1 micro batches; ZB-H1 keeps
  1F1B's PP and is not a pipeline_schedule value here); DualPipe PP + 1 on every rank (DeepSeek-V3
  Technical Report, arXiv:2412.19437, Table 2; deepseek-ai/DualPipe's README): its ranks are
  symmetric, each the first stage of one direction and the last of the other.
- DualPipe keeps two copies of the model parameters (the report, section 3.2.1: "DualPipe requires
  keeping two copies of the model parameters"; Table 2: Parameter 2x): rank i holds stage i and
  stage PP - 1 - i, so an end rank holds the first and the last stage's weights. Counted: the
  second copy's weights only (the table's parameters); its gradients and optimizer states are not
  doubled (the source states none).
"""

from __future__ import annotations

from costmodel.derive import activations as act
from costmodel.evaluate.simulate import stage

#: What the memory convention adds for a schedule other than 1F1B (memory.convention).
SCHEDULE_CONVENTION = {
    "zero_bubble": "; zero_bubble: ZB-H2's 2PP - 1 micro batches in flight (arXiv:2401.10241)",
    "dualpipe": (
        "; dualpipe: PP + 1 micro batches in flight on every rank and a second copy of the "
        "weights, the mirrored stage's (DeepSeek-V3 report, Table 2)"
    ),
}
#: The stage DualPipe's rank mirrors (rank i holds stage i and stage PP - 1 - i).
MIRROR = {"first": "last", "middle": "middle", "last": "first"}


def schedule_flights(schedule: str, pp: int, per_step, chunks: int = 1) -> tuple:
    """The micro batches in flight on (the first stage, the second, the last) under `schedule`
    with `per_step` micro batches per pipeline and `chunks` model chunks (module docstring)."""
    m = max(1, int(per_step))
    if pp == 1:
        return 1, 1, 1
    if chunks > 1 or schedule in ("1f1b", "interleaved"):
        first = act.in_flight_micro_batches(pp, m, chunks)
        second = first - 2 / chunks if chunks > 1 else min(m, pp - 1)
        return first, max(second, 1), 1
    if schedule == "zero_bubble":
        return min(m, 2 * pp - 1), max(min(m, 2 * pp - 3), 1), 1
    every = min(m, pp + 1)  # dualpipe
    return every, every, every


def pipeline_stages(sc, shape, params: dict, even: tuple, flights: tuple) -> dict[str, tuple]:
    """The stages the memory model compares: name -> (parameters on the GPU, routed experts' on
    it, its layers or None for ceil(L / PP), micro batches in flight, whether it holds the
    lm_head and the logits). `params`: gpu_memory.split_params of the model `shape`; `even`:
    gpu_memory.stage_params' first, last and routed experts per GPU."""
    pp = sc.pipeline_parallel
    sizes = stage.stage_sizes(sc)
    first, last, experts = even
    if sizes is None:
        return {
            "first": (first, experts, None, flights[0], pp == 1),
            "last": (last, experts, None, flights[2], True),
        }
    tp, ep = sc.tensor_parallel, sc.expert_parallel
    counts = stage.layer_kinds(shape, sc.num_mtp_layers)
    layers = sum(n for _, _, n in counts)
    moe = sum(n for _, mlp, n in counts if mlp == "moe")
    flight = {"first": flights[0], "middle": flights[1], "last": flights[2]}
    out = {}
    for name, n in sizes.items():
        etp = sc.expert_tensor_parallel or tp  # experts split by ETP (null: TP), as stage_params
        routed = params["experts"] * min(n, moe) / moe / (etp * ep) if moe else 0.0
        on_gpu = params["layers"] * n / layers / tp + routed
        if name == "first":
            on_gpu += params["embedding"] / tp
        if name == "last":
            on_gpu += params["lm_head"] / tp
        out[name] = (on_gpu, routed, n, flight[name], name == "last")
    return out


def second_copies(sc, stages: dict[str, tuple], weights) -> dict[str, float]:
    """DualPipe's second copy on each stage's GPU: the weights' bytes (`weights(parameters,
    routed experts)`, the model states' weights) of the stage it mirrors (`MIRROR`); none for
    another schedule or one stage."""
    if sc.pipeline_schedule != "dualpipe" or sc.pipeline_parallel == 1:
        return {}
    return {
        name: weights(stages[MIRROR[name]][0], stages[MIRROR[name]][1])
        for name in stages
        if MIRROR[name] in stages
    }
