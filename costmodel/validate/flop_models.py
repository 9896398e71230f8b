"""The FLOP cross-check's tiny models and runs (``TINY_MODELS``, the packed row, the SDPA and MTP
runs), the notes of its CSV rows, costmodel's predictions and the ``Row`` record."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.inputs.assumptions import assumed

CSV_FIELDS = ("model", "term", "batch", "seq_len", "predicted", "counted", "difference", "note")

COMMON = {
    "hidden_size": 64,
    "vocab_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": False,
}

# name -> (config dict as in a config.json, batch size, sequence length)
TINY_MODELS: dict[str, tuple[dict, int, int]] = {
    "llama-gqa": (
        {"model_type": "llama", "num_hidden_layers": 2, "intermediate_size": 128, **COMMON},
        2,
        32,
    ),
    "qwen3-moe": (
        {
            "model_type": "qwen3_moe",
            "num_hidden_layers": 2,
            "head_dim": 32,  # attention_dim 128 = 2 x hidden_size
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "mlp_only_layers": [0],
            **COMMON,
        },
        2,
        32,
    ),
    "deepseek-v3-mla": (
        {
            "model_type": "deepseek_v3",
            "num_hidden_layers": 2,
            "intermediate_size": 96,
            "moe_intermediate_size": 32,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "n_group": 1,
            "topk_group": 1,
            "q_lora_rank": 32,
            "kv_lora_rank": 16,
            "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8,
            "v_head_dim": 16,
            **{**COMMON, "num_key_value_heads": 4},
        },
        2,
        32,
    ),
    "qwen3.5-moe-hybrid": (
        {
            "model_type": "qwen3_5_moe",
            "tie_word_embeddings": False,
            "text_config": {
                "model_type": "qwen3_5_moe_text",
                "num_hidden_layers": 4,
                "layer_types": ["linear_attention"] * 3 + ["full_attention"],
                "head_dim": 32,
                "attn_output_gate": True,
                "moe_intermediate_size": 32,
                "shared_expert_intermediate_size": 32,
                "num_experts": 8,
                "num_experts_per_tok": 2,
                "linear_num_key_heads": 2,
                "linear_num_value_heads": 4,
                "linear_key_head_dim": 16,
                "linear_value_head_dim": 16,
                "linear_conv_kernel_dim": 4,
                **COMMON,
            },
        },
        2,
        128,  # two chunks of 64
    ),
}

#: The chunk size of transformers' torch_chunk_gated_delta_rule: the assumption's.
CHUNK_SIZE = assumed("linear_attention_chunk")

#: The packed batch: one row of unequal documents, run on this tiny model's config.
PACKED_MODEL = "llama-gqa"
PACKED_DOCUMENTS = (40, 16, 8)  # T = 64 tokens in one row

#: The name under which the per-document attention is registered in transformers'
#: AttentionInterface (the mask interface does not know it: the model passes no mask to it).
VARLEN_ATTENTION = "costmodel_varlen_eager"

#: The SDPA run: this tiny model's config and batch, ``attn_implementation="sdpa"``.
SDPA_MODEL = "llama-gqa"

#: name -> (config dict with one MTP layer, batch size, sequence length)
MTP_MODELS: dict[str, tuple[dict, int, int]] = {
    "deepseek-v3-mla-mtp": (
        {**TINY_MODELS["deepseek-v3-mla"][0], "num_nextn_predict_layers": 1},
        2,
        32,
    ),
}
MTP_LOSS_WEIGHT = 0.3  # DeepSeek-V3's lambda; a scalar on the loss: no FLOPs

NOTE_MATMUL = (
    "aten.mm/addmm over the whole step = 6*N*T; N excludes the input embedding (a gather: "
    "0 FLOPs forward and backward)"
)
NOTE_ATTENTION = (
    "aten.bmm in full-attention layers (QK^T and AV, full s*s square) = 3*4*s^2*attention_dim*"
    "L_full*B; softmax, causal mask, scaling, RoPE are elementwise: not counted"
)
NOTE_LINEAR_FWD = (
    "forward only; counter has no formula for linalg.solve_triangular, so the difference is "
    "exactly costmodel's two unit-triangular solves H*(C-1)*(dk+dv)*T*L_linear"
)
NOTE_LINEAR_TRAIN = (
    "fwd+bwd; costmodel takes 3x forward; the counter's backward is not 2x forward: each "
    "solve_triangular backward adds a bmm (grad of the CxC system); the zero initial state "
    "needs no grad (1 bmm instead of 2 for the first chunk's state reads); the last chunk's "
    "state update is unused (no backward)"
)
NOTE_CONV = (
    "depthwise causal conv1d (its weights are not in N); the counter runs it on s+K-1 padded "
    "positions and its convolution_backward formula ignores groups (grad input counted x channels)"
)
NOTE_TOTAL = (
    "everything counted vs the sum of the terms above; norms, softmax, RoPE, SiLU/gates, "
    "residual adds, top-k routing and the loss are elementwise/reductions: no FLOP formula"
)
NOTE_PACKED_MATMUL = (
    "one packed row of documents 40+16+8, T = sum of the lengths = 64; aten.mm/addmm = 6*N*T "
    "(run with the per-document attention)"
)
NOTE_VARLEN = (
    "aten.bmm in full-attention layers, attention split per document: a custom attn_implementation "
    "(transformers AttentionInterface) finds the document starts in position_ids as transformers' "
    "flash varlen path does (cu_seqlens) and runs the model's eager attention per document with a "
    "causal mask = sum_of_squares_flops: 3*4*sum(s_i^2)*attention_dim*L_full (course, full square "
    "per document)"
)
NOTE_BLOCK_DIAGONAL = (
    "the same packed row under plain eager: transformers builds a block-diagonal causal mask from "
    "position_ids but QK^T and AV multiply the whole (sum s_i)^2 square = 3*4*(sum s_i)^2*"
    "attention_dim*L_full*1, 64^2/(40^2+16^2+8^2) = 2.13x the varlen term; a kernel that is not "
    "varlen pays this"
)
NOTE_PACKED_TOTAL = (
    "everything counted in the per-document run vs matmul_6ND + attention_core_varlen"
)
NOTE_SDPA_MATMUL = "attn_implementation=sdpa on CPU; aten.mm/addmm = 6*N*T as with eager"
NOTE_SDPA_STOCK = (
    "stock FlopCounterMode: CPU SDPA runs aten._scaled_dot_product_flash_attention_for_cpu and "
    "its _backward, absent from torch's flop_registry and not decomposable: 0 counted; the ops "
    "with a formula (_scaled_dot_product_flash/efficient/cudnn_attention, _flash/"
    "_efficient_attention_forward) have no CPU kernel; predicted = costmodel's flash convention"
)
NOTE_FLASH = (
    "counter with torch's own SDPA formulas bound (custom_mapping) to the CPU flash ops the model "
    "runs: forward 2 GEMMs, backward 5 (QK^T recomputed) = 3.5*4*s^2*attention_dim*L_full*B = "
    "costmodel flash convention, full square: torch ignores is_causal (transformers passes "
    "is_causal=True), so not flash_causal"
)
NOTE_SDPA_MATH = (
    "sdpa_kernel(SDPBackend.MATH): the composite math path decomposes into aten.bmm, full square, "
    "backward 2x forward = course convention (3x), 6/7 of the flash count"
)
NOTE_SDPA_TOTAL = "everything counted in the flash-formula run vs matmul_6ND + attention_core_flash"
NOTE_MTP_MATMUL = (
    "main model + 1 MTP depth (transformers.modeling_layers.MtpModel.forward_layer): aten.mm/addmm "
    "= 6*(N + N_mtp)*T; N_mtp = mtp_activated_params (scenario key count_mtp): eh_proj 2h->h, the "
    "MTP layer's attention and MoE (router, k experts, shared expert), the shared head again"
)
NOTE_MTP_ATTENTION = (
    "aten.bmm of the step: the main model's full-attention layers and the MTP layer's (one each) "
    "= 3*4*s^2*attention_dim*(L_full + L_mtp)*B"
)


def attention_training_flops(
    seq_len: int,
    attention_dim: int,
    num_full_layers: int,
    num_sequences: int,
    convention: str = "course",
) -> int:
    """Forward+backward FLOPs of the full-attention core (QKᵀ and AV), from costmodel.derive.
    attention's derivation; the course convention (default) is the full square, no causal
    halving: ``3 · 4 · s² · attention_dim · L_full · B``; ``flash`` is 3.5x instead of 3x."""
    from costmodel.derive import attention

    return int(
        attention.attention_training_flops(
            seq_len, attention_dim, num_full_layers, num_sequences, convention=convention
        )
    )


def varlen_attention_training_flops(
    lengths, attention_dim: int, num_full_layers: int, convention: str = "course"
) -> int:
    """Attention-core FLOPs of documents of the given lengths, each attending only to itself
    (varlen): proportional to Σ sᵢ², ``costmodel.derive.attention.sum_of_squares_flops``."""
    from costmodel.derive import attention

    return int(attention.sum_of_squares_flops(lengths, attention_dim, num_full_layers, convention))


def matmul_training_flops(n_params: int, tokens: int) -> int:
    """6·N·D from costmodel.derive.flops (the derived forward 2ND + backward 4ND)."""
    from costmodel.derive import flops

    return int(flops.training_matmul_flops(n_params, tokens))


@dataclass(frozen=True)
class Row:
    model: str
    term: str
    batch: int
    seq_len: int
    predicted: int
    counted: int
    note: str

    @property
    def difference(self) -> int:
        return self.counted - self.predicted

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "term": self.term,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "predicted": self.predicted,
            "counted": self.counted,
            "difference": self.difference,
            "note": self.note,
        }
