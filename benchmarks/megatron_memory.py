"""Megatron-LM's theoretical memory beside costmodel's, for three published layouts.

Megatron-LM prints "Theoretical memory footprints: weight and optimizer=... MB, activation=...
MB" at start-up (``report_theoretical_memory``). This module re-derives those two numbers (our
own code, written from the formulas) for three published runs and prints them beside
``costmodel.evaluate.simulate.run.memory`` of the same layout, weights + gradients + optimizer and
activations apart, and names every difference between the two counts.

Source read
-----------
NVIDIA/Megatron-LM, branch ``main`` at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553
(2026-08-22), ``megatron/training/theoretical_memory_usage.py`` (last change to the file:
1bcb3b9e0b029c6109d8d32872645bd540052963, 2026-06-15):
https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64ddf34856e74b24714e3bedb2f5a39553/megatron/training/theoretical_memory_usage.py
Functions: ``compute_weight_and_optimizer_memory``, ``compute_activation_memory`` (with sequence
parallelism), ``compute_activation_memory_without_sp``, ``report_theoretical_memory``.

What those formulas count (and what this module reproduces)
-----------------------------------------------------------
(w) Weights and optimizer. Parameters per layer: attention ``2 h q (1 + g/n)`` (q = heads x
    kv_channels, g query groups, n heads: Q, K, V and the output projection) or MLA's (q lora
    with its norm, kv lora with its norm, the k RoPE projection, the output projection); MLP
    ``2 h ffn`` (x 3/2 with SwiGLU); MoE: the routed experts ``2 h moe_ffn E`` (x 3/2), the
    shared expert, the router ``h E`` and the shared-expert gate; two norms ``2 h`` (x 2 for
    LayerNorm's bias); a final norm; the embedding ``h V_padded`` (twice when untied). MTP
    layers are dense or MoE as the last layer. The most loaded GPU holds 1/PP of the layers'
    TP-split part plus ONE embedding-sized matrix, all divided by TP (plus the output layer when
    untied and PP = 1), 1/PP of the replicated norms and routers (not divided by TP), the whole
    MTP block, and the routed experts / (PP x ETP x EP). Bytes per parameter: 18 (BF16 weight,
    fp32 main gradient, fp32 master weight, two fp32 Adam moments), or 6 + 12/DP with the
    distributed optimizer (DP = ``args.data_parallel_size``, world / (TP x PP x CP)); the
    experts use the expert-data-parallel size world / (ETP x EP x PP).
(a) Activations of the first pipeline stage, from Korthikanti et al. 2022 (arXiv:2205.05198)
    Table 2. With sequence parallelism and ``--recompute-granularity selective``:
    ``s b h (18 + 4 ffn/h)`` per layer (the GPT layer's 34 s b h with ffn = 4h: LayerNorm
    inputs, QKV/out-projection inputs, Q, K, V, fc1 input, the GELU's input and output, the
    dropout masks; selective recompute drops the 5 a s/h attention-score term), times
    ``num_layers`` (L/PP layers times PP micro batches in flight), plus the embedding's input
    (8 s b PP: int64 ids) and its dropout mask (s b h PP), times the interleaved-schedule
    penalty 1 + (PP - 1)/(PP v) or min(1, m/PP) for fewer micro batches than stages, plus, with
    PP = 1 only, ``4 s b h (1 + V/h)`` for the output layer and the loss (fp32 logits); all
    divided by TP. In every other case (no sequence parallelism, or full recompute):
    ``s b h (10 + 24/TP)`` per layer (without SP the norms and dropouts stay whole), the same
    embedding terms and penalties, with PP = 1 ``2 (s b V / TP + s b h)`` for BF16 logits and the
    final norm's output, and a 5% margin on the whole ("optimizer and temporaries").

The three layouts
-----------------
- GPT-3 175B as Korthikanti et al. 2022 ran it (Table 3: 96 layers, h 12,288, 96 heads, s 2,048,
  micro batch 1, TP 8, PP 8, 64 A100 80GB, global batch 64, vocabulary 51,200; Table 5's
  "sequence parallelism + selective recompute" row). costmodel reads no GPT config: the model is
  given as a Llama config of the same parameter count (SwiGLU width 8h/3 = 32,768 in place of
  the 4h GELU MLP, RMSNorm, tied embeddings). Published beside it: Korthikanti et al.'s Figure 1,
  as the calculon-ai/calculon repository transcribes it (``calculon/llm/validation.py``,
  ``seqsel_fig1``): 45.56 GiB of parameters and optimizer state and 12.35 GiB of activations per
  GPU with sequence parallelism and selective recompute.
- Llama 3 405B, Table 4 of "The Llama 3 Herd of Models" (arXiv:2407.21783), the 8K row on 16,384
  H100: TP 8, CP 1, PP 16, DP 128, sequence 8,192, 16 sequences per DP rank per step (16M
  tokens). Model: Table 3 there (126 layers, h 16,384, FFN 53,248, 128 heads, 8 KV heads,
  vocabulary 128,256, untied). Not stated there, assumed here: micro batch 1 (16 micro batches),
  no interleaving, sequence parallelism with selective recompute (so Megatron's SP formula
  applies), flash attention, the distributed optimizer with fp32 main gradients (the paper's
  FSDP shards gradients too: ZeRO-2).
- DeepSeek-V3 (arXiv:2412.19437, section 3.2: 2,048 H800, PP 16, EP 64, ZeRO-1 data
  parallelism, no TP; sequence 4,096, batch 15,360 sequences; one MTP module), model from its
  config.json. Not stated there, assumed here: micro batch 1, no recompute in costmodel (its
  recompute of RMSNorm and the MLA up-projections and its FP8 caching have no costmodel key
  yet), fp32 main gradients.

Every difference, named (``differences`` prints them under each layout, with the numbers)
-------------------------------------------------------------------------------------------
Activations counted by Megatron, not by costmodel: the dropout masks (1 byte per element: two
per layer, 2 s b h, and the embedding's, s b h per micro batch in flight); K and V at the full
hidden width (no GQA); the 5% margin of the formula without SP; without SP or under full
recompute, every tensor of every layer (costmodel under full recompute: each layer's input,
2 s b h / TP, plus one layer rebuilt). Counted by costmodel, not by Megatron: the flash
log-sum-exp and the RMSNorms' fp32 rstd; a SwiGLU MLP's three ffn-wide tensors (gate, up,
product: 6 ffn/h s b h, where the formula's GELU term is 4 ffn/h: its own TODO on shapes); MoE
(router buffers, routed token copies, expert intermediates: the formula reads the dense
``ffn_hidden_size`` for every layer) and MLA's latents; the heaviest stage's ceil(L/PP)
layers (Megatron: L/PP on average); the logits on the last stage when PP > 1 (Megatron counts
the output layer only with PP = 1, in fp32 with SP, where costmodel keeps BF16 logits: a fused
cross-entropy); one full-recompute working set. Weights and optimizer: Megatron pads the
vocabulary to a multiple of 128 x TP; keeps norms and routers whole on every TP rank (costmodel
divides every non-expert parameter by TP); puts the whole MTP block on the most loaded stage
(costmodel spreads the MTP parameters over the stages, as non-expert parameters); shards the
distributed optimizer over ``data_parallel_size``, which leaves CP out (costmodel: DP x CP);
has fixed fp32 gradients and ZeRO-1 or none (costmodel: the scenario's ``zero_stage`` and
``grad_bytes``).

Run: ``python benchmarks/megatron_memory.py`` (``make benchmark``).
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
SOURCE = (
    "https://github.com/NVIDIA/Megatron-LM/blob/"
    f"{MEGATRON_COMMIT}/megatron/training/theoretical_memory_usage.py"
)
GIB = 1024**3
INT64 = 8  # bytes of a token id
MASK = 1  # bytes of a dropout-mask element
OPTIMIZER_BYTES = 12  # fp32 master weight and two Adam moments
WEIGHT_GRAD_BYTES = 6  # BF16 weight and fp32 main gradient
MARGIN = 1.05  # the formula without SP: "buffer for optimizer and miscellaneous temporaries"


@dataclass(frozen=True)
class MegatronArgs:
    """The Megatron-LM arguments the two formulas read."""

    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_query_groups: int
    kv_channels: int
    ffn_hidden_size: int
    swiglu: bool
    layernorm: bool  # LayerNorm (weight and bias) rather than RMSNorm
    vocab_size: int  # the tokenizer's; padded as Megatron pads it
    untie_embeddings_and_output_weights: bool
    seq_length: int
    micro_batch_size: int
    tensor_parallel: int
    pipeline_parallel: int
    data_parallel: int
    context_parallel: int = 1
    virtual_pipeline_parallel: int | None = None
    num_microbatches: int | None = None
    sequence_parallel: bool = True
    recompute_granularity: str | None = "selective"
    use_distributed_optimizer: bool = True
    num_experts: int | None = None
    moe_layer_freq: tuple[int, ...] = ()
    moe_ffn_hidden_size: int = 0
    moe_shared_expert_intermediate_size: int = 0
    moe_router_topk: int = 0
    expert_parallel: int = 1
    expert_tensor_parallel: int = 1
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int = 0
    qk_head_dim: int = 0  # MLA: the part without RoPE
    qk_pos_emb_head_dim: int = 0
    v_head_dim: int = 0
    mtp_num_layers: int | None = None
    make_vocab_size_divisible_by: int = 128

    @property
    def world_size(self) -> int:
        return (
            self.tensor_parallel
            * self.pipeline_parallel
            * self.context_parallel
            * self.data_parallel
        )

    @property
    def padded_vocab_size(self) -> int:
        """The vocabulary rounded up to a multiple of make_vocab_size_divisible_by x TP."""
        multiple = self.make_vocab_size_divisible_by * self.tensor_parallel
        return math.ceil(self.vocab_size / multiple) * multiple


# ---------------------------------------------------------------------------------------------
# Megatron-LM's formulas, re-derived


def _attention_params(a: MegatronArgs) -> float:
    h, n = a.hidden_size, a.num_attention_heads
    norm = 2 if a.layernorm else 1
    if not a.multi_latent_attention:
        q = a.kv_channels * n
        return 2 * h * q * (1 + a.num_query_groups / n)  # Q and output, K and V
    qk = a.qk_head_dim + a.qk_pos_emb_head_dim
    if a.q_lora_rank is None:
        q_part = h * n * qk
    else:
        q_part = a.q_lora_rank * (h + n * qk + norm)
    kv_part = a.kv_lora_rank * (h + n * (a.qk_head_dim + a.v_head_dim) + norm)
    return q_part + kv_part + h * a.qk_pos_emb_head_dim + n * a.v_head_dim * h


def megatron_parameters(a: MegatronArgs) -> dict[str, float]:
    """Parameters on the most loaded GPU, by how they are held: split by TP, replicated, or
    routed experts split by EP x ETP (``compute_weight_and_optimizer_memory``)."""
    h = a.hidden_size
    glu = 1.5 if a.swiglu else 1.0
    norm = 2 if a.layernorm else 1
    moe_pattern = list(a.moe_layer_freq) if a.num_experts else [0] * a.num_layers
    moe_layers = sum(moe_pattern)
    dense_layers = a.num_layers - moe_layers
    mtp = a.mtp_num_layers or 0
    mtp_moe = mtp * moe_pattern[-1]
    mtp_dense = mtp - mtp_moe
    experts = a.num_experts or 0
    attention = _attention_params(a)
    dense_mlp = 2 * h * a.ffn_hidden_size * glu
    shared = 2 * h * a.moe_shared_expert_intermediate_size * glu
    routed = 2 * h * a.moe_ffn_hidden_size * experts * glu
    norms = 2 * h * norm
    router = h * experts
    embedding = h * a.padded_vocab_size

    def split(dense: int, moe: int) -> float:
        return (attention + dense_mlp) * dense + (attention + shared) * moe

    def whole(dense: int, moe: int) -> float:
        return norms * dense + (norms + router) * moe

    pp, tp = a.pipeline_parallel, a.tensor_parallel
    tp_split = (split(dense_layers, moe_layers) / pp + split(mtp_dense, mtp_moe) + embedding) / tp
    if a.untie_embeddings_and_output_weights and pp == 1:
        tp_split += embedding / tp
    replicated = (whole(dense_layers, moe_layers) + norm * h) / pp + whole(mtp_dense, mtp_moe)
    expert_split = (routed * moe_layers / pp + routed * mtp_moe) / (
        a.expert_tensor_parallel * a.expert_parallel
    )
    return {"tp_split": tp_split, "replicated": replicated, "experts": expert_split}


def megatron_bytes_per_parameter(a: MegatronArgs, data_parallel: int) -> float:
    """18, or 6 + 12/DP with the distributed optimizer."""
    if not a.use_distributed_optimizer:
        return WEIGHT_GRAD_BYTES + OPTIMIZER_BYTES
    return WEIGHT_GRAD_BYTES + OPTIMIZER_BYTES / data_parallel


def megatron_weight_and_optimizer_bytes(a: MegatronArgs) -> float:
    params = megatron_parameters(a)
    expert_dp = a.world_size // (a.expert_tensor_parallel * a.expert_parallel * a.pipeline_parallel)
    dense = (params["tp_split"] + params["replicated"]) * megatron_bytes_per_parameter(
        a, a.data_parallel
    )
    return dense + params["experts"] * megatron_bytes_per_parameter(a, expert_dp)


def _in_flight_scale(a: MegatronArgs) -> float:
    """The interleaved schedule's penalty, or fewer micro batches than stages."""
    pp = a.pipeline_parallel
    if a.virtual_pipeline_parallel is not None:
        return 1 + (pp - 1) / (pp * a.virtual_pipeline_parallel)
    if pp > 1 and a.num_microbatches is not None:
        return min(1, a.num_microbatches / pp)
    return 1.0


def megatron_uses_sp_formula(a: MegatronArgs) -> bool:
    return a.sequence_parallel and a.recompute_granularity == "selective"


def megatron_activation_bytes(a: MegatronArgs) -> dict[str, float]:
    """Activation bytes of the first stage per GPU, by term, as ``report_theoretical_memory``
    chooses its formula; ``total`` is what Megatron prints."""
    sbh = a.seq_length * a.micro_batch_size * a.hidden_size
    sb = a.seq_length * a.micro_batch_size
    tp, pp = a.tensor_parallel, a.pipeline_parallel
    sp_formula = megatron_uses_sp_formula(a)
    if sp_formula:
        per_layer = sbh * (18 + 4 * a.ffn_hidden_size / a.hidden_size) / tp
    else:
        per_layer = sbh * (10 + 24 / tp)
    divide = tp if sp_formula else 1
    terms = {
        "layers": per_layer * a.num_layers,
        "embedding_input": INT64 * sb * pp / divide,
        "embedding_dropout": MASK * sbh * pp / divide,
    }
    scale = _in_flight_scale(a)
    terms = {key: value * scale for key, value in terms.items()}
    if pp == 1:
        if sp_formula:
            terms["output_and_loss"] = 4 * sbh * (1 + a.padded_vocab_size / a.hidden_size) / tp
        else:
            terms["output_and_loss"] = 2 * (sb * a.padded_vocab_size / tp + sbh)
    if not sp_formula:
        terms = {key: value * MARGIN for key, value in terms.items()}
    terms["total"] = sum(terms.values())
    terms["per_layer"] = per_layer * (MARGIN if not sp_formula else 1)
    return terms


# ---------------------------------------------------------------------------------------------
# The three layouts


@dataclass(frozen=True)
class Layout:
    name: str
    source: str
    config: dict  # a config.json costmodel reads
    megatron: MegatronArgs
    scenario: dict  # costmodel scenario keys (the model comes from `config`)
    published: str = ""


GPT3_CONFIG = {
    "model_type": "llama",
    "hidden_size": 12288,
    "num_hidden_layers": 96,
    "num_attention_heads": 96,
    "num_key_value_heads": 96,
    "intermediate_size": 32768,  # SwiGLU 3 x h x 8h/3 = GPT-3's GELU 2 x h x 4h parameters
    "vocab_size": 51200,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}
LLAMA3_405B_CONFIG = {
    "model_type": "llama",
    "hidden_size": 16384,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
    "intermediate_size": 53248,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
}
DEEPSEEK_V3_CONFIG = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "n_group": 8,
    "topk_group": 4,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "tie_word_embeddings": False,
}

LAYOUTS = (
    Layout(
        name="GPT-3 175B",
        source="Korthikanti et al. 2022 (arXiv:2205.05198), Table 3 layout, Table 5 SP + selective",
        config=GPT3_CONFIG,
        megatron=MegatronArgs(
            hidden_size=12288,
            num_layers=96,
            num_attention_heads=96,
            num_query_groups=96,
            kv_channels=128,
            ffn_hidden_size=4 * 12288,
            swiglu=False,
            layernorm=True,
            vocab_size=51200,
            untie_embeddings_and_output_weights=False,
            seq_length=2048,
            micro_batch_size=1,
            tensor_parallel=8,
            pipeline_parallel=8,
            data_parallel=1,
            num_microbatches=64,
            use_distributed_optimizer=False,
        ),
        scenario={
            "gpu": "A100-80GB",
            "num_gpus": 64,
            "tensor_parallel": 8,
            "pipeline_parallel": 8,
            "sequence_parallel": True,
            "seq_len": 2048,
            "mean_tokens_per_sample": 2048,
            "samples_per_step": 64,
            "micro_batch": 1,
            "recompute": "selective",
            "zero_stage": 0,
            "grad_bytes": 4,
        },
        published=(
            "Korthikanti et al. Figure 1 (SP + selective; as calculon-ai/calculon "
            "calculon/llm/validation.py transcribes it): parameters and optimizer 45.56 GiB, "
            "activations 12.35 GiB"
        ),
    ),
    Layout(
        name="Llama 3 405B, 8K",
        source="Llama 3 Herd of Models (arXiv:2407.21783), Table 4, 16,384 GPUs, 8K row",
        config=LLAMA3_405B_CONFIG,
        megatron=MegatronArgs(
            hidden_size=16384,
            num_layers=126,
            num_attention_heads=128,
            num_query_groups=8,
            kv_channels=128,
            ffn_hidden_size=53248,
            swiglu=True,
            layernorm=False,
            vocab_size=128256,
            untie_embeddings_and_output_weights=True,
            seq_length=8192,
            micro_batch_size=1,
            tensor_parallel=8,
            pipeline_parallel=16,
            data_parallel=128,
            num_microbatches=16,
        ),
        scenario={
            "gpu": "H100-SXM",
            "num_gpus": 16384,
            "tensor_parallel": 8,
            "pipeline_parallel": 16,
            "sequence_parallel": True,
            "seq_len": 8192,
            "mean_tokens_per_sample": 8192,
            "samples_per_step": 2048,
            "micro_batch": 1,
            "recompute": "selective",
            "zero_stage": 1,
            "grad_bytes": 4,
        },
        published="Llama 3 paper: layout and throughput only, no memory figure",
    ),
    Layout(
        name="DeepSeek-V3",
        source="DeepSeek-V3 technical report (arXiv:2412.19437), section 3.2; its config.json",
        config=DEEPSEEK_V3_CONFIG,
        megatron=MegatronArgs(
            hidden_size=7168,
            num_layers=61,
            num_attention_heads=128,
            num_query_groups=128,
            kv_channels=128,
            ffn_hidden_size=18432,
            swiglu=True,
            layernorm=False,
            vocab_size=129280,
            untie_embeddings_and_output_weights=True,
            seq_length=4096,
            micro_batch_size=1,
            tensor_parallel=1,
            pipeline_parallel=16,
            data_parallel=128,
            num_microbatches=120,
            sequence_parallel=False,
            recompute_granularity=None,
            num_experts=256,
            moe_layer_freq=(0,) * 3 + (1,) * 58,
            moe_ffn_hidden_size=2048,
            moe_shared_expert_intermediate_size=2048,
            moe_router_topk=8,
            expert_parallel=64,
            multi_latent_attention=True,
            q_lora_rank=1536,
            kv_lora_rank=512,
            qk_head_dim=128,
            qk_pos_emb_head_dim=64,
            v_head_dim=128,
            mtp_num_layers=1,
        ),
        scenario={
            "gpu": "H800",
            "num_gpus": 2048,
            "tensor_parallel": 1,
            "pipeline_parallel": 16,
            "expert_parallel": 64,
            "sequence_parallel": False,
            "seq_len": 4096,
            "mean_tokens_per_sample": 4096,
            "samples_per_step": 15360,
            "micro_batch": 1,
            "recompute": "none",
            "zero_stage": 1,
            "grad_bytes": 4,
            "count_mtp": True,
        },
        published="DeepSeek-V3 report: layout only, no memory figure",
    ),
)


# ---------------------------------------------------------------------------------------------
# costmodel's memory of the same layout


def costmodel_memory(layout: Layout) -> dict:
    """``costmodel.evaluate.simulate.run.memory`` of the layout: a scenario resolved from the layout's
    keys, with the model read from its config (written to a temporary config.json)."""
    from costmodel.evaluate.simulate import run
    from costmodel.inputs import scenario

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(layout.config), encoding="utf-8")
        data = {
            "name": layout.name,
            "model": str(path),
            "attention_kernel": "flash",
            "measured_tokens_per_s": None,
            "gpus_per_node": 8,
            **layout.scenario,
        }
        return run.memory(scenario.resolve(data=data))


def _states(memory: dict) -> float:
    return memory["weights"] + memory["gradients"] + memory["optimizer"]


def _activations(memory: dict) -> float:
    return memory["activations"] + memory.get("logits", 0.0)


def differences(layout: Layout, megatron: dict, ours: dict) -> list[str]:
    """Every difference between the two counts for this layout, with its size where the two
    sides can be set apart term by term."""
    a = layout.megatron
    params = megatron_parameters(a)
    mparams = sum(params.values())
    sbh = a.seq_length * a.micro_batch_size * a.hidden_size
    out = [
        f"parameters on the most loaded GPU: Megatron {mparams / 1e9:.3f} B, costmodel "
        f"{ours.get('params_on_gpu', float('nan')) / 1e9:.3f} B ({ours.get('stage', '?')} stage)",
        f"norms{' and routers' if a.num_experts else ''}: Megatron keeps "
        f"{params['replicated'] / 1e6:.2f} M replicated on every TP rank; costmodel divides "
        "every non-expert parameter by TP",
    ]
    if a.padded_vocab_size != a.vocab_size:
        out.append(
            f"vocabulary: Megatron pads {a.vocab_size:,} to {a.padded_vocab_size:,} (a multiple "
            f"of {a.make_vocab_size_divisible_by} x TP); costmodel's memory counts the config's"
        )
    if a.use_distributed_optimizer:
        out.append(
            f"bytes per parameter: Megatron 6 + 12/DP = "
            f"{megatron_bytes_per_parameter(a, a.data_parallel):.3f} (DP = {a.data_parallel}, "
            "CP left out); costmodel's zero_stage 1 with fp32 gradients: the same over DP x CP"
        )
    else:
        out.append("bytes per parameter: 18 on both sides (no distributed optimizer, ZeRO 0)")
    if a.mtp_num_layers:
        from costmodel.inputs.models import shape_from_config

        shape = shape_from_config(layout.config)
        mtp = shape.mtp_params
        pp = a.pipeline_parallel
        out.append(
            f"MTP ({mtp / 1e9:.2f} B parameters): Megatron puts the whole MTP block on the most "
            "loaded stage, its routed experts divided by EP; costmodel (count_mtp) adds them to "
            f"total_params and spreads them over the {pp} stages as non-expert parameters, not "
            f"divided by EP ({mtp / pp / 1e9:.3f} B per GPU), and counts the MTP layer in the "
            "heaviest stage's activations"
        )
    if megatron_uses_sp_formula(a):
        mlp_mega = 4 * a.ffn_hidden_size / a.hidden_size
        glu_note = (
            f"{mlp_mega:.2f} s b h (GELU: fc1 output and GELU output), where costmodel's fused "
            f"SwiGLU keeps 6 ffn/h = {6 * a.ffn_hidden_size / a.hidden_size:.2f} s b h (gate, "
            "up, product)"
            if a.swiglu
            else f"{mlp_mega:.2f} s b h (GELU), costmodel's SwiGLU of equal parameters "
            f"{6 * (8 * a.hidden_size / 3) / a.hidden_size:.2f} s b h"
        )
        out += [
            f"layer activations: Megatron s b h (18 + 4 ffn/h) / TP = "
            f"{megatron['per_layer'] / 2**20:.1f} MiB per layer: the MLP as {glu_note}",
            f"Megatron counts K and V at the hidden width ({a.num_query_groups} of "
            f"{a.num_attention_heads} heads here), two dropout masks per layer (2 s b h bytes) "
            "and the embedding's dropout mask; costmodel counts K, V at their heads, no dropout "
            "(none in Llama-style models), the flash log-sum-exp and the norms' fp32 rstd",
        ]
    else:
        out.append(
            f"layer activations: without SP (TP {a.tensor_parallel}) Megatron uses s b h "
            f"(10 + 24/TP) x 1.05 = {megatron['per_layer'] / 2**20:.1f} MiB per layer for every "
            "layer: no MoE (routed token copies, expert intermediates, router buffers), no MLA "
            "latents, the dense ffn_hidden_size read for the MoE layers too; costmodel counts "
            "each layer kind's tensors"
        )
    layers_mega = a.num_layers * _in_flight_scale(a)
    out.append(
        f"layers held: Megatron {a.num_layers} layers x {_in_flight_scale(a):.3g} = "
        f"{layers_mega:g} layer-micro-batches (L/PP per stage x PP in flight); costmodel the "
        f"heaviest stage's ceil(L/PP) = {math.ceil(a.num_layers / a.pipeline_parallel)} layers "
        f"x {ours.get('in_flight', '?')} in flight"
    )
    if a.pipeline_parallel > 1:
        out.append(
            "logits: Megatron counts the output layer only with PP = 1; costmodel compares the "
            "first stage (PP micro batches of layers) with the last (one micro batch, the BF16 "
            f"logits s b V / TP = {a.seq_length * a.micro_batch_size * a.vocab_size * 2 / a.tensor_parallel / GIB:.2f} "
            f"GiB) and keeps the larger: the {ours.get('stage', '?')} stage"
        )
    out.append(
        f"embedding input (int64 ids, PP in flight): both count it "
        f"({INT64 * a.seq_length * a.micro_batch_size * a.pipeline_parallel / 2**20:.2f} MiB "
        f"before TP); the embedding dropout mask ({sbh * a.pipeline_parallel / 2**20:.0f} MiB "
        "before TP) only Megatron"
    )
    return out


def report(layout: Layout) -> None:
    megatron = megatron_activation_bytes(layout.megatron)
    mega_states = megatron_weight_and_optimizer_bytes(layout.megatron)
    ours = costmodel_memory(layout)
    formula = "with SP" if megatron_uses_sp_formula(layout.megatron) else "without SP"
    print(f"== {layout.name}: {layout.source}")
    print(f"   {'GiB per GPU':38s} {'Megatron formula':>16s} {'costmodel':>10s}")
    rows = (
        ("weights + gradients + optimizer", mega_states, _states(ours)),
        (f"activations (Megatron: {formula})", megatron["total"], _activations(ours)),
        ("total", mega_states + megatron["total"], ours["total"]),
    )
    for label, mega, mine in rows:
        print(f"   {label:38s} {mega / GIB:16.2f} {mine / GIB:10.2f}")
    print(
        f"   costmodel: weights {ours['weights'] / GIB:.2f}, gradients "
        f"{ours['gradients'] / GIB:.2f}, optimizer {ours['optimizer'] / GIB:.2f}, activations "
        f"{ours['activations'] / GIB:.2f} + logits {ours.get('logits', 0.0) / GIB:.2f}"
    )
    if layout.published:
        print(f"   published: {layout.published}")
    print("   differences:")
    for line in differences(layout, megatron, ours):
        print(f"   - {line}")
    print()


def main() -> None:
    print(f"Megatron-LM theoretical memory, re-implemented; source: {SOURCE}")
    print()
    for layout in LAYOUTS:
        report(layout)


if __name__ == "__main__":
    main()
    __import__("bench_headlines").record("megatron_memory")  # docs/benchmarks.md
