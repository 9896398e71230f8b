"""What each training framework offers (the scenario key `framework`): the one table the plan's
search (`plan_constraints`: it searches only these; `not_offered` says what it left out) and
the levers (`refusal`: a lever that changes a key to what the framework lacks is not feasible)
both read. What its layers save for backward is derive.activations' FRAMEWORKS, keyed by the
same names. The zero-bubble and DualPipe schedules are searched only as a scenario's own
(plan_space.schedule_options); `cross_entropy` is stated, not enforced (the levers' chunked
loss is a memory lever of the model's, not a framework's flag); torchtitan's selective
recompute is per op (its SelectiveAC), taken as the per-module sets a scenario states.

Each entry says where it was read (`Offer.sources`): a flag or a config field at a commit or
a version. Where a framework has an option the project does not take as the team's, the entry
says so (`Offer.notes`):

- `megatron` (Megatron-LM / Megatron-Core, and NeMo and Megatron-Bridge on it) is its data
  parallelism with the distributed optimizer (the project's ZeRO-1), as the published Megatron
  runs are set. Megatron-LM does have weight-sharding data parallelism too: `--use-torch-fsdp2`
  (core_v0.10.0; refused with PP and EP, megatron/training/arguments.py) and Megatron-FSDP
  (`--use-custom-fsdp`, core_v0.12.0, renamed `--use-megatron-fsdp` in core_v0.15.0, with
  `--data-parallel-sharding-strategy optim_grads_params`, ZeRO-3's). The project does not
  offer them under `megatron`: none of the runs it models uses them, and its ZeRO-3 model
  (a gather per layer with NCCL's latency, two gathered layers in memory) is PyTorch FSDP2's,
  not Megatron-FSDP's buckets and buffers.
- `torchtitan`: FSDP2 (`fully_shard`) shards the weights: ZeRO-3 by default
  (`fsdp_reshard_after_forward` "default"), ZeRO-2's by "never"; replication alone
  (`data_parallel_replicate_degree`) is DDP. No optimizer-only sharding (ZeRO-1).
- `huggingface`: transformers' Trainer with DeepSpeed ZeRO, as a lab runs it: data
  parallelism only. `huggingface_fsdp`: Trainer with FSDP, whose Accelerate
  `ParallelismConfig` (Accelerate 1.10) adds TP and CP on FSDP2.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from costmodel.derive.numeric import RECOMPUTE_POLICIES
from costmodel.derive.plain import STAGES

#: The options a framework may lack, as the plan and the levers name them.
SCHEDULES = ("1f1b", "interleaved", "zero_bubble", "dualpipe")


@dataclass(frozen=True)
class Offer:
    """What a framework offers; `sources` names where each entry was read."""

    label: str
    zero_stages: tuple[int, ...]
    tensor_parallel: bool
    sequence_parallel: bool
    context_parallel: bool
    pipeline_parallel: bool
    schedules: tuple[str, ...]  # of SCHEDULES
    recompute: tuple[str, ...]  # none | selective (per module or per op) | full
    expert_parallel: bool
    fp8: bool
    tp_comm_overlap: bool
    cross_entropy: tuple[str, ...]
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""


MEGATRON_AT = "Megatron-LM d98e8a64 (2026-08-22)"
TITAN_AT = "torchtitan b5bcd76c (2026-08-21)"

#: Where the two Hugging Face Trainer entries read their recompute and FP8 (the same for both).
TRAINER_RECOMPUTE = "TrainingArguments.gradient_checkpointing: whole layers"
TRAINER_FP8 = (
    "Accelerate's mixed_precision fp8 (Transformer Engine, MS-AMP or torchao backends; "
    "Accelerate docs, usage_guides/low_precision_training), under Trainer"
)

OFFERS: dict[str, Offer] = {
    "megatron": Offer(
        "Megatron-LM / Megatron-Core (NeMo)",
        zero_stages=(0, 1),
        tensor_parallel=True,
        sequence_parallel=True,
        context_parallel=True,
        pipeline_parallel=True,
        schedules=("1f1b", "interleaved"),
        recompute=tuple(RECOMPUTE_POLICIES),
        expert_parallel=True,
        fp8=True,
        tp_comm_overlap=True,
        cross_entropy=("fp32", "fused"),
        sources={
            "zero_stages": f"--use-distributed-optimizer ({MEGATRON_AT}, "
            "megatron/training/arguments.py); Megatron-FSDP not taken (module docstring)",
            "tensor_parallel": "--tensor-model-parallel-size",
            "sequence_parallel": "--sequence-parallel (ModelParallelConfig.sequence_parallel)",
            "context_parallel": "--context-parallel-size (core_v0.4.0)",
            "pipeline_parallel": "--pipeline-model-parallel-size",
            "schedules": "1F1B and interleaved (--num-layers-per-virtual-pipeline-stage; "
            "megatron/core/pipeline_parallel/schedules.py); no zero-bubble or DualPipe schedule",
            "recompute": "--recompute-granularity full|selective, --recompute-modules "
            "(core_v0.13.0)",
            "expert_parallel": "--expert-model-parallel-size",
            "fp8": "--fp8-format (Transformer Engine)",
            "tp_comm_overlap": "--tp-comm-overlap",
            "cross_entropy": "--cross-entropy-loss-fusion, --cross-entropy-fusion-impl",
        },
        notes="ZeRO-2/3: Megatron-FSDP (--use-megatron-fsdp, core_v0.15.0) exists, not modelled",
    ),
    "torchtitan": Offer(
        "torchtitan (FSDP2)",
        zero_stages=(0, 2, 3),
        tensor_parallel=True,
        sequence_parallel=True,
        context_parallel=True,
        pipeline_parallel=True,
        schedules=("1f1b", "interleaved", "zero_bubble", "dualpipe"),
        recompute=tuple(RECOMPUTE_POLICIES),
        expert_parallel=True,
        fp8=True,
        tp_comm_overlap=True,
        cross_entropy=("fp32",),
        sources={
            "zero_stages": f"parallelism.data_parallel_shard_degree, fsdp_reshard_after_forward "
            f"default|always|never, data_parallel_replicate_degree ({TITAN_AT}, "
            "torchtitan/config/configs.py)",
            "tensor_parallel": "parallelism.tensor_parallel_degree",
            "sequence_parallel": "parallelism.enable_sequence_parallel",
            "context_parallel": "parallelism.context_parallel_degree",
            "pipeline_parallel": "parallelism.pipeline_parallel_degree",
            "schedules": "parallelism.pipeline_parallel_schedule: PyTorch's schedules (1F1B, "
            "Interleaved1F1B, ZBVZeroBubble, DualPipeV: torchtitan/distributed/pipeline_parallel.py)",
            "recompute": "activation checkpointing FullAC, SelectiveAC (per op: "
            "torchtitan/distributed/activation_checkpoint.py)",
            "expert_parallel": "parallelism.expert_parallel_degree",
            "fp8": "float8 converters (torchao; torchtitan/components/quantization/float8.py)",
            "tp_comm_overlap": "compile.enable_async_tensor_parallel",
            "cross_entropy": "the logits cast to fp32 (torchtitan/components/loss.py)",
        },
    ),
    "huggingface": Offer(
        "Hugging Face Trainer + DeepSpeed ZeRO",
        zero_stages=STAGES,
        tensor_parallel=False,
        sequence_parallel=False,
        context_parallel=False,
        pipeline_parallel=False,
        schedules=("1f1b",),
        recompute=("none", "full"),
        expert_parallel=False,
        fp8=True,
        tp_comm_overlap=False,
        cross_entropy=("fp32", "fused_linear"),
        sources={
            "zero_stages": "DeepSpeed config zero_optimization.stage 0-3 (transformers' "
            "DeepSpeed integration, docs/source/en/deepspeed.md)",
            "tensor_parallel": "Trainer shards by ZeRO only: no TP, CP or PP with DeepSpeed",
            "pipeline_parallel": "DeepSpeed's pipeline engine needs a PipelineModule, which "
            "Trainer does not build",
            "recompute": TRAINER_RECOMPUTE,
            "fp8": TRAINER_FP8,
            "cross_entropy": "the loss on an fp32 copy of the logits (transformers' "
            "ForCausalLMLoss); TrainingArguments.use_liger_kernel: Liger-Kernel's fused linear "
            "cross-entropy",
        },
    ),
    "huggingface_fsdp": Offer(
        "Hugging Face Trainer + FSDP",
        zero_stages=(0, 2, 3),
        tensor_parallel=True,
        sequence_parallel=False,
        context_parallel=True,
        pipeline_parallel=False,
        schedules=("1f1b",),
        recompute=("none", "full"),
        expert_parallel=False,
        fp8=True,
        tp_comm_overlap=False,
        cross_entropy=("fp32", "fused_linear"),
        sources={
            "zero_stages": "TrainingArguments.fsdp full_shard | shard_grad_op, FSDP2's "
            "reshard_after_forward (transformers docs/source/en/fsdp.md)",
            "tensor_parallel": "Accelerate ParallelismConfig tp_size (Accelerate 1.10)",
            "context_parallel": "Accelerate ParallelismConfig cp_size with FSDP2 (Accelerate "
            "docs, concept_guides/context_parallelism)",
            "recompute": TRAINER_RECOMPUTE,
            "fp8": TRAINER_FP8,
        },
    ),
}


def offer(framework: str) -> Offer:
    return OFFERS[framework]


def lacks(framework: str) -> list[str]:
    """What the framework does not offer of what the search and the levers can propose, in
    words ("ZeRO-3", "CP", "the interleaved schedule"), in a fixed order."""
    o = OFFERS[framework]
    out = [f"ZeRO-{z}" for z in STAGES if z not in o.zero_stages]
    named = (
        ("tensor_parallel", "TP"),
        ("sequence_parallel", "SP"),
        ("context_parallel", "CP"),
        ("pipeline_parallel", "PP"),
        ("expert_parallel", "EP"),
    )
    out += [name for key, name in named if not getattr(o, key)]
    if o.pipeline_parallel:
        out += [f"the {s} schedule" for s in SCHEDULES if s not in o.schedules]
    if "selective" not in o.recompute:
        out.append("selective recompute")
    if not o.fp8:
        out.append("FP8")
    return out


def not_offered(framework: str, own_schedule: str | None = None) -> str:
    """One line: "framework megatron: ZeRO-2, ZeRO-3 not offered" ("" when it lacks nothing).
    The scenario's own schedule is searched whatever the framework (`own_schedule`): it is
    said so instead."""
    own = f"the {own_schedule} schedule"
    missing = [name for name in lacks(framework) if name != own]
    line = f"framework {framework}: {', '.join(missing)} not offered" if missing else ""
    if len(missing) < len(lacks(framework)):
        line += f"; {own}, the scenario's own, searched all the same"
    return line


def plan_constraints(framework: str) -> dict[str, tuple]:
    """The values of the plan's constrained keys the framework allows (evaluate.plan.plan's
    CONSTRAINED; the schedules: `schedule_allowed`)."""
    o = OFFERS[framework]
    out: dict[str, tuple] = {"zero_stage": o.zero_stages}
    for key in ("tensor_parallel", "context_parallel", "pipeline_parallel", "expert_parallel"):
        if not getattr(o, key):
            out[key] = (1,)
    if not o.sequence_parallel:
        out["sequence_parallel"] = (False,)
    if "selective" not in o.recompute:
        out["recompute"] = tuple(o.recompute)
    if not o.fp8:
        out["fp8"] = ("none",)
    return out


def schedule_allowed(framework: str, schedule: str) -> bool:
    return schedule in OFFERS[framework].schedules


#: The sizes a framework may lack (a size above 1 needs the option).
SIZES = {"tensor_parallel": "TP", "context_parallel": "CP", "pipeline_parallel": "PP",
         "expert_parallel": "EP"}  # fmt: skip
#: Settings that need an option: (key, value) -> the option.
SETTINGS = {
    ("sequence_parallel", True): "SP",
    ("fp8", "hybrid"): "FP8",
    ("recompute", "selective"): "selective recompute",
    ("tp_comm_overlap", True): "TP communication overlap",
}


def _needs(key: str, value) -> str | None:
    """The option a scenario key's value needs (`lacks`' words), or None."""
    if key in SIZES:
        return SIZES[key] if value and value > 1 else None
    if key == "recompute_modules":
        return "selective recompute" if value else None
    if key == "pipeline_schedule":
        return f"the {value} schedule" if value in SCHEDULES else None
    if key == "zero_stage":
        return f"ZeRO-{value}"
    return SETTINGS.get((key, value)) if isinstance(value, (bool, str)) else None


def _offered(o: Offer, key: str, value) -> bool:
    if key == "zero_stage":
        return value in o.zero_stages
    if key == "pipeline_schedule":
        return value in o.schedules
    if key in ("recompute", "recompute_modules"):
        return "selective" in o.recompute
    return bool(getattr(o, key))


def refusal(framework: str, changes: dict) -> tuple[str, str] | None:
    """(key, option) of the first of a lever's `changes` that needs an option the framework
    lacks ("context_parallel", "CP"), or None where it offers them all."""
    o = OFFERS[framework]
    for key, value in changes.items():
        needed = _needs(key, value)
        if needed and not _offered(o, key, value):
            return key, needed
    return None
