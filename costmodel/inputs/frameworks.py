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
  `ParallelismConfig` (Accelerate 1.10) adds TP and CP on FSDP2. `huggingface_sp`:
  transformers' models on DeepSpeed ZeRO with sequence parallelism across the sequence (the
  project's CP), as XTuner (DeepSpeed-Ulysses' all-to-all) and EasyContext (ring attention or
  Ulysses) run it; the two offer the same options.
- `composer`: MosaicML's Composer with llm-foundry's models: FSDP alone (its
  `sharding_strategy`); no TP, PP or CP the project can take (Composer's experimental TP shards
  llm-foundry's MLP only).

An option a framework gained at a date has it in `Offer.since` (the month it reached the main
branch, and where): `offer(name, as_of)` is the framework as it was that month, what a published
run of that date could use (Megatron-LM had no CP before Megatron-Core's, no sequence
parallelism before May 2022). Without a date (the plan, the levers) a framework offers all it
has now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

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
    #: option (`lacks`' words: "CP", "ZeRO-1", "selective recompute") -> (the month it came,
    #: "YYYY-MM", and where it was read); an option not named was there from the start.
    since: dict[str, tuple[str, str]] = field(default_factory=dict)


MEGATRON_AT = "Megatron-LM d98e8a64 (2026-08-22)"
TITAN_AT = "torchtitan b5bcd76c (2026-08-21)"
COMPOSER_AT = "Composer 64051888 (2026-04-29)"
FOUNDRY_AT = "llm-foundry 8c8dd48f (2025-07-21)"
XTUNER_AT = "XTuner b934f462 (2026-08-21)"
EASYCONTEXT_AT = "EasyContext 6b0d310 (2024-09-27)"

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
        since={
            "SP": (
                "2022-05",
                "--sequence-parallel: Megatron-LM 9aad9203 (2022-05-20), with "
                "Korthikanti et al., arXiv:2205.05198",
            ),
            "selective recompute": (
                "2022-05",
                "--recompute-activations (selective): Megatron-LM "
                "9aad9203 (2022-05-20); before, whole layers only",
            ),
            "ZeRO-1": ("2022-06", "--use-distributed-optimizer: Megatron-LM d07d29df (2022-06-08)"),
            "FP8": (
                "2022-12",
                "--fp8-hybrid with Transformer Engine: Megatron-LM e1c334b0 (2022-12-21)",
            ),
            "EP": ("2023-10", "--expert-model-parallel-size: Megatron-LM 370f3c1f (2023-10-10)"),
            "CP": (
                "2023-10",
                "--context-parallel-size: Megatron-LM 4a6255a7 (2023-10-30), "
                "released in core_v0.4.0",
            ),
        },
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
        since={
            "PP": ("2024-05", "pipeline_parallel_degree: torchtitan aafe0e87 (2024-05-21)"),
            "ZeRO-0": (
                "2024-07",
                "training.data_parallel_type ddp: torchtitan 2f989b9f "
                "(2024-07-18); before, FSDP only",
            ),
            "CP": (
                "2024-10",
                "context_parallel_degree: torchtitan b19456a9 (#592, 2024-10-22), "
                "on PyTorch 2.5's context_parallel",
            ),
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
    "huggingface_sp": Offer(
        "transformers' models on DeepSpeed ZeRO + sequence parallelism (XTuner, EasyContext)",
        zero_stages=STAGES,
        tensor_parallel=False,
        sequence_parallel=False,
        context_parallel=True,
        pipeline_parallel=False,
        schedules=("1f1b",),
        recompute=("none", "full"),
        expert_parallel=False,
        fp8=False,
        tp_comm_overlap=False,
        cross_entropy=("fp32",),
        sources={
            "zero_stages": f"{XTUNER_AT}: xtuner/configs/deepspeed/deepspeed_zero1|2|3.json; "
            f"{EASYCONTEXT_AT}: accelerate_configs/zero3_offload.json (stage 3, the optimizer "
            "offloaded to the CPU: not modelled)",
            "tensor_parallel": "neither splits a layer's weights: no TP, PP or EP",
            "context_parallel": "XTuner sequence_parallel_size (xtuner/parallel/sequence: "
            "all-to-all); EasyContext --parallel_mode zigzag_ring_attn|dist_flash_attn|"
            "ulysses_attn|usp_attn (train.py)",
            "recompute": "transformers' gradient_checkpointing_enable: whole layers "
            "(xtuner/model/sft.py; EasyContext's train.py)",
            "fp8": "neither has an FP8 option",
            "cross_entropy": "XTuner: transformers' loss on fp32 logits; EasyContext: "
            "flash-attn's CrossEntropyLoss(inplace_backward=True) on them",
        },
        since={
            "CP": (
                "2024-03",
                "XTuner v0.1.16 (2024-03-29), xtuner/parallel/sequence; "
                "EasyContext from its first commit 9b1e58e (2024-04-05)",
            ),
        },
    ),
    "composer": Offer(
        "llm-foundry on Composer (FSDP)",
        zero_stages=(0, 2, 3),
        tensor_parallel=False,
        sequence_parallel=False,
        context_parallel=False,
        pipeline_parallel=False,
        schedules=("1f1b",),
        recompute=("none", "full"),
        expert_parallel=True,
        fp8=True,
        tp_comm_overlap=False,
        cross_entropy=("fused", "fp32"),
        sources={
            "zero_stages": f"fsdp_config.sharding_strategy NO_SHARD|SHARD_GRAD_OP|FULL_SHARD "
            f"({COMPOSER_AT}, composer/distributed/mosaic_parallelism.py)",
            "tensor_parallel": "Composer's TPConfig (v0.23.0, experimental) takes a layer plan, "
            "and llm-foundry's (llmfoundry/tp/ffn_tp_strategy.py) shards the MLP only: not "
            "the project's TP; no CP or PP in Composer's ParallelismConfig "
            "(composer/utils/parallelism.py)",
            "recompute": "fsdp_config.activation_checkpointing: whole blocks (llm-foundry's "
            "activation_checkpointing_target may name other modules: not taken)",
            "expert_parallel": f"MegaBlocks dMoE, ffn_config.moe_world_size ({FOUNDRY_AT}, "
            "llmfoundry/models/layers/ffn.py)",
            "fp8": "precision amp_fp8 (Transformer Engine; composer/core/precision.py)",
            "cross_entropy": "loss_fn fused_crossentropy (flash-attn's, the default) | "
            "torch_crossentropy (llmfoundry/models/mpt/modeling_mpt.py)",
        },
    ),
}


#: The options of `Offer.since` that are a flag of the Offer (the rest: a ZeRO stage, selective
#: recompute).
DATED_FLAGS = {"TP": "tensor_parallel", "SP": "sequence_parallel", "CP": "context_parallel",
               "PP": "pipeline_parallel", "EP": "expert_parallel", "FP8": "fp8"}  # fmt: skip


def month(date: str) -> str:
    """ "YYYY-MM" of a date that starts so ("2022-05", "2024-12-11"); ValueError otherwise."""
    if not re.match(r"\d{4}-\d{2}", date or ""):
        raise ValueError(f"as_of: {date!r} is not a date (expected YYYY-MM)")
    return date[:7]


def offer(framework: str, as_of: str | None = None) -> Offer:
    """The framework's entry; with `as_of` (a date, "YYYY-MM..."), as it was that month: the
    options of `since` that came later taken out (an option counts from the month it came)."""
    o = OFFERS[framework]
    if as_of is None:
        return o
    later = {name for name, (came, _) in o.since.items() if came > month(as_of)}
    if not later:
        return o
    return replace(
        o,
        zero_stages=tuple(z for z in o.zero_stages if f"ZeRO-{z}" not in later),
        recompute=tuple(
            r for r in o.recompute if r != "selective" or "selective recompute" not in later
        ),
        **{flag: False for name, flag in DATED_FLAGS.items() if name in later},
    )


def lacks(framework: str, as_of: str | None = None) -> list[str]:
    """What the framework does not offer (as of `as_of`, where given) of what the search and the
    levers can propose, in words ("ZeRO-3", "CP", "the interleaved schedule"), in a fixed order."""
    o = offer(framework, as_of)
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


def plan_constraints(framework: str, as_of: str | None = None) -> dict[str, tuple]:
    """The values of the plan's constrained keys the framework allows (evaluate.plan.plan's
    CONSTRAINED; the schedules: `schedule_allowed`), as of `as_of` where given (`offer`): what a
    published run of that date could have used."""
    o = offer(framework, as_of)
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
