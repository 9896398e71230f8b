"""Memory per GPU: the activation bytes of each layer kind (derive.activations), worked by hand on
small numbers, the policies and the parallel divisions, the model states by ZeRO stage
(derive.model_states), and the measured saved tensors of tiny models against the prediction
(costmodel.validate_memory; the measurement needs torch and transformers, which CI installs)."""

import csv
from pathlib import Path

import pytest
import sympy as sp
from conftest import missing, tiny_torch_runs

from costmodel.derive import activations as act
from costmodel.derive import model_states as ms
from costmodel.derive.symbols import (
    K_opt,
    N_d,
    Psi,
    b_micro,
    beta_g,
    bytes_per_element,
    c_p,
    n_heads,
    s,
    t_p,
)

REPO = Path(__file__).resolve().parents[2]
CSV_PATH = REPO / "costmodel" / "course" / "saved_tensors.csv"

#: b = 1 sequence of s = 4 tokens (T = 4 rows), h = 8, 2 query heads and 1 KV head of width 4,
#: SwiGLU width 16, BF16 (beta = 2).
SMALL = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=16)

#: The dense GQA layer by hand, flash kernel, fused RMSNorm and SwiGLU, no recompute, one GPU.
DENSE_FLASH_BY_HAND = {
    "attn_norm.input": 2 * 4 * 8,  # beta T h
    "attn_norm.rstd": 4 * 4,  # fp32 per row
    "attn.qkv_input": 2 * 4 * 8,
    "attn.q": 2 * 4 * 2 * 4,  # beta T n_h d_h
    "attn.k": 2 * 4 * 1 * 4,  # beta T n_kv d_h
    "attn.v": 2 * 4 * 1 * 4,
    "attn.lse": 4 * 4 * 2,  # fp32 T n_h
    "attn.output": 2 * 4 * 2 * 4,
    "mlp_norm.input": 2 * 4 * 8,
    "mlp_norm.rstd": 4 * 4,
    "mlp.input": 2 * 4 * 8,
    "mlp.gate": 2 * 4 * 16,
    "mlp.up": 2 * 4 * 16,
    "mlp.down_input": 2 * 4 * 16,
}

#: Not split by tensor parallelism without sequence parallelism (full hidden width per token).
REPLICATED_WITHOUT_SP = {
    "attn_norm.input",
    "attn_norm.rstd",
    "attn.qkv_input",
    "mlp_norm.input",
    "mlp_norm.rstd",
    "mlp.input",
}


def dense(**overrides):
    return act.layer_activation_bytes("attention", "dense", **{**SMALL, **overrides})


def test_dense_flash_layer_by_hand():
    got = dense()
    assert got == DENSE_FLASH_BY_HAND
    assert sum(got.values()) == 896


def test_eager_attention_keeps_expanded_kv_and_the_fp32_softmax():
    got = dense(attention_kernel="eager")
    # K and V expanded to the 2 query heads (repeat_kv); no log-sum-exp
    assert got["attn.k"] == got["attn.v"] == 2 * 4 * 2 * 4
    assert "attn.lse" not in got
    # fp32 softmax output and the probabilities cast back to BF16: (4 + 2) per score
    assert got["attn.softmax_fp32"] == 4 * 2 * 1 * 4 * 4  # fp32 n_h b s s
    assert got["attn.probs"] == 2 * 2 * 1 * 4 * 4
    mlp = {k: v for k, v in got.items() if k.startswith("mlp")}
    assert mlp == {k: v for k, v in DENSE_FLASH_BY_HAND.items() if k.startswith("mlp")}


def test_math_kernel_is_fp32_with_one_square():
    got = dense(attention_kernel="math")
    assert got["attn.q_fp32"] == got["attn.k_fp32"] == got["attn.v_fp32"] == 4 * 4 * 2 * 4
    assert got["attn.scores_fp32"] == 4 * 2 * 4 * 4
    assert "attn.probs" not in got


def test_eager_elementwise_is_hugging_faces_composite():
    got = dense(elementwise="eager")
    assert got["attn_norm.input_fp32"] == 4 * 4 * 8  # the fp32 upcast of the input
    assert got["attn_norm.normalized"] == 2 * 4 * 8  # x * rstd cast back, for the weight grad
    assert got["attn_norm.rstd"] == 4 * 4
    assert "attn_norm.input" not in got
    assert got["mlp.silu"] == 2 * 4 * 16  # the product saves both operands
    fused = dense()
    assert sum(got.values()) - sum(fused.values()) == 2 * (4 * 4 * 8) + 2 * 4 * 16


def test_qk_norm_adds_per_head_norms():
    got = dense(qk_norm=True, elementwise="fused")
    assert got["attn.q_norm.input"] == 2 * 4 * 2 * 4
    assert got["attn.q_norm.rstd"] == 4 * 4 * 2  # one per row and head
    assert got["attn.k_norm.input"] == 2 * 4 * 1 * 4


def test_tensor_parallel_with_and_without_sequence_parallelism():
    base = dense(attention_kernel="eager")
    with_sp = dense(attention_kernel="eager", tp=2, sp=True)
    assert with_sp == {k: v / 2 for k, v in base.items()}
    without = dense(attention_kernel="eager", tp=2, sp=False)
    for name, value in base.items():
        expected = value if name in REPLICATED_WITHOUT_SP else value / 2
        assert without[name] == expected, name


def test_context_parallel_divides_tokens_and_the_square_rows():
    base = dense(attention_kernel="eager")
    split = dense(attention_kernel="eager", cp=2)
    # per-token terms halve; the square becomes (s/c_p) x s: halves too
    assert split == {k: v / 2 for k, v in base.items()}
    assert split["attn.softmax_fp32"] == 4 * 2 * 1 * (4 / 2) * 4


def test_selective_recompute_drops_the_core():
    flash = dense()
    for kernel in act.KERNELS:
        got = dense(attention_kernel=kernel, recompute="selective")
        # only the core's inputs (Q, K and V at KV-head width) stay, with its output
        assert got == {k: v for k, v in flash.items() if k != "attn.lse"}, kernel


def test_full_recompute_keeps_the_layer_input():
    assert dense(recompute="full") == {"layer.input": 2 * 4 * 8}
    assert dense(recompute="full", tp=2, sp=False) == {"layer.input": 64}
    assert dense(recompute="full", tp=2, sp=True) == {"layer.input": 32}


def test_stage_adds_one_working_set_and_multiplies_by_in_flight():
    layers = [dense(recompute="full")] * 3
    stage = act.stage_activation_bytes(
        layers,
        in_flight=4,
        recompute_working_set=dense(),
        extra={"x": 10},
    )
    assert stage == {
        "layers": 3 * 64 * 4,
        "recompute_working_set": 896,
        "outside_layers": 40,
        "total": 768 + 896 + 40,
    }


def test_in_flight_micro_batches():
    assert act.in_flight_micro_batches(1) == 1
    assert act.in_flight_micro_batches(4) == 4
    assert act.in_flight_micro_batches(4, num_micro_batches=2) == 2
    # Megatron-LM: penalty 1 + (p - 1)/(p v) on p micro batches
    assert act.in_flight_micro_batches(4, virtual_stages=2) == pytest.approx(4 * (1 + 3 / 8))


MOE = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, experts=4, top_k=2, moe_ffn=4)


def moe_part(**overrides):
    got = act.layer_activation_bytes("attention", "moe", **{**MOE, **overrides})
    return {k: v for k, v in got.items() if k.startswith("moe.")}


def test_moe_layer_by_hand():
    # T = 4 tokens, k = 2: 8 routed rows
    assert moe_part() == {
        "moe.input": 2 * 4 * 8,
        "moe.router_probs": 4 * 4 * 4,  # fp32 T E
        "moe.topk_indices": 8 * 4 * 2,  # int64 T k
        "moe.dispatch_indices": 16 * 8,  # (slot, token) int64 pairs per routed row
        "moe.routed_input": 2 * 8 * 8,  # k copies of each token's hidden state
        "moe.expert.gate": 2 * 8 * 4,
        "moe.expert.up": 2 * 8 * 4,
        "moe.expert.down_input": 2 * 8 * 4,
        "moe.routing_weights": 2 * 8,
        "moe.expert_output": 2 * 8 * 8,
        "moe.combine_input": 2 * 8 * 8,
    }


def test_moe_scales_with_k_not_with_the_expert_count():
    base = moe_part()
    more_experts = moe_part(experts=8)
    changed = {k for k in base if base[k] != more_experts[k]}
    assert changed == {"moe.router_probs"}
    busier = moe_part(expert_load=1.5)
    per_row = {k for k in base if busier[k] == 1.5 * base[k] and k not in ("moe.input",)}
    assert "moe.routed_input" in per_row and "moe.expert.gate" in per_row
    assert busier["moe.router_probs"] == base["moe.router_probs"]


def test_deepseek_router_and_shared_expert():
    got = moe_part(router_fp32=True, norm_topk=True, shared_ffn=4)
    assert got["moe.router_input_fp32"] == 4 * 4 * 8
    assert got["moe.topk_weights"] == 4 * 4 * 2 and got["moe.topk_sum"] == 4 * 4
    assert got["moe.routing_weights"] == 4 * 8  # fp32 weights
    assert got["moe.shared.gate"] == 2 * 4 * 4


def test_mla_layer_by_hand():
    got = act.layer_activation_bytes(
        "mla",
        "dense",
        b=1,
        s=4,
        hidden=8,
        heads=2,
        head_dim=6,  # nope 4 + rope 2
        v_head_dim=4,
        q_lora_rank=4,
        kv_lora_rank=2,
        ffn=16,
    )
    attn = {k: v for k, v in got.items() if k.startswith("attn.")}
    assert attn == {
        "attn.qkv_input": 2 * 4 * 8,
        "attn.q_a_norm.input": 2 * 4 * 4,
        "attn.q_a_norm.rstd": 4 * 4,
        "attn.q_b_input": 2 * 4 * 4,
        "attn.kv_a_norm.input": 2 * 4 * 2,
        "attn.kv_a_norm.rstd": 4 * 4,
        "attn.kv_b_input": 2 * 4 * 2,
        "attn.q": 2 * 4 * 2 * 6,
        "attn.k": 2 * 4 * 2 * 6,  # decompressed: one key head per query head
        "attn.v": 2 * 4 * 2 * 4,
        "attn.lse": 4 * 4 * 2,
        "attn.output": 2 * 4 * 2 * 4,
    }


#: A tiny gated-DeltaNet layer (one key head, two value heads of width 4) with a dense MLP.
GDN_LAYER = {
    "b": 1,
    "hidden": 8,
    "ffn": 16,
    "linear_key_heads": 1,
    "linear_value_heads": 2,
    "linear_key_head_dim": 4,
    "linear_value_head_dim": 4,
}


def test_gated_deltanet_is_linear_in_s():
    def gdn(s_len):
        return act.layer_activation_bytes("gated_deltanet", "dense", s=s_len, chunk=64, **GDN_LAYER)

    short, long = gdn(64), gdn(128)
    assert all(long[k] == 2 * short[k] for k in short)
    assert short["gdn.A"] == 2 * 64 * 2 * 64  # beta T n_v C
    assert short["gdn.conv_input"] == 2 * 64 * (2 * 1 * 4 + 2 * 4)


def test_offset_rmsnorm_keeps_the_fp32_product_and_the_scale():
    # Qwen3-Next / Gemma: x.float() normalised, times (1 + weight.float()), then cast back
    got = dense(elementwise="eager", norm_offset=True)
    assert got["attn_norm.input_fp32"] == 4 * 4 * 8
    assert got["attn_norm.normalized_fp32"] == 4 * 4 * 8  # fp32, not the working dtype
    assert got["attn_norm.scale_fp32"] == 4 * 8  # the 1 + weight vector, once
    assert "attn_norm.normalized" not in got
    plain = dense(elementwise="eager")
    assert sum(got.values()) - sum(plain.values()) == 2 * (2 * 4 * 8 + 4 * 8)  # two norms
    # a fused kernel saves its input and rstd whatever the scale
    assert dense(norm_offset=True) == dense()


def test_gates_keep_both_factors():
    got = dense(output_gate=True)
    assert got["attn.gate"] == got["attn.gated_output"] == 2 * 4 * 2 * 4  # beta T n_h d_h
    assert sum(got.values()) - sum(dense().values()) == 2 * 64
    shared = moe_part(shared_ffn=4, shared_gate=True)
    assert shared["moe.shared_gate"] == 2 * 4  # the sigmoid, one per token
    assert shared["moe.shared_output"] == 2 * 4 * 8
    assert "moe.shared_gate" not in moe_part(shared_ffn=4)


def test_mixtral_keeps_fp32_routing_weights_without_an_fp32_router():
    got = moe_part(norm_topk=True, routing_weights_fp32=True)
    assert got["moe.routing_weights"] == 4 * 8  # fp32 per routed row
    assert "moe.router_input_fp32" not in got
    assert got["moe.topk_weights"] == 4 * 4 * 2 and got["moe.topk_sum"] == 4 * 4
    assert moe_part()["moe.routing_weights"] == 2 * 8  # Qwen3-MoE casts them back


def test_model_types_name_their_router_and_norm():
    from costmodel.inputs.models import load_shape, shape_from_config
    from costmodel.validate_memory import CONFIGS

    assert shape_from_config(CONFIGS["mixtral"]).routing_weights_fp32
    assert shape_from_config(CONFIGS["deepseek-v3-mla"]).routing_weights_fp32
    assert not load_shape("qwen3-30b-a3b").routing_weights_fp32
    assert load_shape("qwen3-next-80b-a3b").rmsnorm_offset
    assert not load_shape("llama-3.1-8b").rmsnorm_offset


def test_cpu_sdpa_layouts():
    # Phi-3's fused qkv_proj: the value view keeps the q and k parts of the projection's output
    fused = dense(fused_qkv=True)
    assert fused["attn.qkv_fused"] == 2 * 4 * (2 + 1) * 4
    assert "attn.qkv_fused" not in dense(fused_qkv=True, attention_kernel="eager")  # K, V expanded
    # a heads-major query (RoPE built with torch.cat): the kernel's output and its copy
    copied = dense(attention_output_copy=True)
    assert copied["attn.kernel_output"] == copied["attn.output"] == 2 * 4 * 2 * 4
    selective = dense(attention_output_copy=True, fused_qkv=True, recompute="selective")
    assert "attn.kernel_output" not in selective and "attn.qkv_fused" in selective


def gdn_torch(s_len, chunk):
    got = act.layer_activation_bytes(
        "gated_deltanet",
        "dense",
        s=s_len,
        chunk=chunk,
        conv_kernel=3,
        linear_attention_kernel="torch",
        elementwise="eager",
        **GDN_LAYER,
    )
    return {k: v for k, v in got.items() if k.startswith("gdn.")}


#: transformers' torch_chunk_gated_delta_rule by hand: T = 4 tokens, 2 value heads (R = 8 rows),
#: d_k = d_v = 4, chunks of C = 2 (two per sequence, P = 8 padded rows), conv width 2*4 + 8 = 16,
#: kernel K = 3, BF16 (2 bytes) and fp32 (4 bytes).
GDN_TORCH_BY_HAND = {
    "gdn.in_proj_input": 2 * 4 * 8,
    "gdn.conv_input": 2 * 4 * 16,
    "gdn.conv_output": 2 * (4 + 3 - 1) * 16,  # the padded convolution, SiLU's input
    "gdn.beta": 2 * 8,
    "gdn.decay_input": 4 * 8,
    "gdn.decay": 4 * 8,
    "gdn.a_exp": 4 * 2 * 2,
    "gdn.q_l2_input": 4 * 8 * 4,
    "gdn.k_l2_input": 4 * 8 * 4,
    "gdn.q_rstd": 4 * 8,
    "gdn.k_rstd": 4 * 8,
    "gdn.q": 4 * 8 * 4,
    "gdn.k": 4 * 8 * 4,
    "gdn.v": 4 * 8 * 4,
    "gdn.beta_fp32": 4 * 8,
    "gdn.k_beta": 4 * 8 * 4,
    "gdn.decay_mask": 2 * 2,
    "gdn.pairwise_decay": 4 * 8 * 2,
    "gdn.kk": 4 * 8 * 2,
    "gdn.qk": 4 * 8 * 2,
    "gdn.A": 4 * 8 * 2,
    "gdn.intra": 4 * 8 * 2,
    "gdn.new_values": 4 * 8 * 4,
    "gdn.k_cumdecay": 4 * 8 * 4,
    "gdn.decay_exp": 4 * 3 * 8,
    "gdn.chunk_decay": 4 * 8 / 2,
    "gdn.q_decayed": 4 * 8 * 4,
    "gdn.k_decayed": 4 * 8 * 4,
    "gdn.v_new": 4 * 8 * 4,
    "gdn.states": 4 * 2 * 2 * 4 * 4,  # one 4 x 4 state per chunk and value head
    "gdn.norm_input_fp32": 4 * 8 * 4,
    "gdn.norm_rstd": 4 * 8,
    "gdn.norm_normalized": 2 * 8 * 4,
    "gdn.norm_weighted": 2 * 8 * 4,
    "gdn.norm_gate_fp32": 4 * 8 * 4,
    "gdn.norm_gate_silu": 4 * 8 * 4,
    "gdn.output": 2 * 8 * 4,
}


def test_gated_deltanet_torch_fallback_by_hand():
    assert gdn_torch(4, 2) == GDN_TORCH_BY_HAND


def test_gated_deltanet_torch_fallback_pads_and_drops_the_last_update():
    # s = 3 in one chunk of 4: padded to P = 4 x 2 = 8 rows; the unpadded tensors keep 6 rows;
    # with a single chunk the state update is never read, so its tensors are not kept
    got = gdn_torch(3, 4)
    assert got["gdn.q"] == 4 * 8 * 4 and got["gdn.q_l2_input"] == 4 * 6 * 4
    assert got["gdn.A"] == 4 * 8 * 4 and got["gdn.decay_mask"] == 4 * 4
    assert got["gdn.decay_exp"] == 4 * 2 * 8
    assert got["gdn.q_decayed"] == got["gdn.k_decayed"] == got["gdn.chunk_decay"] == 0
    assert got["gdn.states"] == 4 * 1 * 2 * 4 * 4


def test_checkpointed_layers_keep_their_call_arguments():
    got = act.model_activation_bytes(
        b=2, s=4, hidden=8, vocab=10, checkpointed=True, attention_kernel="eager"
    )
    assert got["checkpoint.position_ids"] == 8 * 4  # int64, (1, s)
    assert got["checkpoint.attention_mask"] == 2 * 2 * 4 * 4  # b x 1 x s x s, BF16
    flash = act.model_activation_bytes(b=2, s=4, hidden=8, vocab=10, checkpointed=True)
    assert "checkpoint.attention_mask" not in flash
    assert "checkpoint.position_ids" not in act.model_activation_bytes(b=2, s=4, hidden=8, vocab=10)


def test_symbolic_forms():
    flash, eager = act.dense_flash_layer_bytes, act.dense_eager_layer_bytes
    assert sp.degree(sp.numer(sp.together(flash)), s) == 1  # no s x s term
    assert sp.degree(sp.numer(sp.together(eager)), s) == 2
    assert (
        sp.simplify(
            act.eager_square_bytes
            - (4 + bytes_per_element) * n_heads * b_micro * s**2 / (c_p * t_p)
        )
        == 0
    )
    # the SymPy form evaluated at the small numbers is the hand count
    values = {
        b_micro: 1,
        s: 4,
        sp.Symbol("h", positive=True): 8,
        n_heads: 2,
        sp.Symbol("n_kv", positive=True): 1,
        sp.Symbol("d_h", positive=True): 4,
        sp.Symbol("d_hv", positive=True): 4,
        sp.Symbol("d_ff", positive=True): 16,
        bytes_per_element: 2,
        c_p: 1,
        t_p: 1,
    }
    assert flash.subs(values) == 896
    assert act.full_recompute_layer_bytes.subs(values) == 64


def test_logits():
    got = act.model_activation_bytes(b=2, s=4, hidden=8, vocab=10, rope_head_dim=4)
    assert got["logits"] == 2 * 8 * 10 and got["logits_fp32"] == 4 * 8 * 10
    assert got["rope.cos"] == got["rope.sin"] == 2 * 4 * 4  # (1, s) positions, shared
    assert got["embedding.token_ids"] == 8 * 8
    chunked = act.model_activation_bytes(b=2, s=4, hidden=8, vocab=10, logits_chunks=5)
    assert chunked["logits"] == got["logits"] / 5 and chunked["logits_fp32"] == 4 * 8 * 10 / 5
    bf16_loss = act.model_activation_bytes(b=2, s=4, hidden=8, vocab=10, loss_fp32=False)
    assert "logits_fp32" not in bf16_loss


@pytest.mark.parametrize(
    "kwargs",
    [
        {"attention_kernel": "xformers"},
        {"recompute": "some"},
        {"elementwise": "triton"},
        {"linear_attention_kernel": "cuda"},
    ],
)
def test_bad_options_are_refused(kwargs):
    with pytest.raises(ValueError):
        dense(**kwargs)
    with pytest.raises(ValueError):
        act.layer_activation_bytes("mamba", "dense", **SMALL)


def test_zero_stages():
    # ZeRO paper (2-byte gradients): 16, 4 + 12/N_d, 2 + 14/N_d, 16/N_d bytes per parameter
    paper = [ms.bytes_per_parameter(z, 8, grad_bytes=2) for z in ms.STAGES]
    assert paper == [16, 4 + 12 / 8, 2 + 14 / 8, 16 / 8]
    # Megatron-LM (fp32 main grads): 18, and 6 + 12/DP with the distributed optimizer
    assert ms.bytes_per_parameter(0) == 18
    assert ms.bytes_per_parameter(1, 8) == 6 + 12 / 8
    assert ms.model_state_bytes(1000, 3, 4, grad_bytes=2) == {
        "weights": 500.0,
        "gradients": 500.0,
        "optimizer": 3000.0,
    }
    assert (
        sp.simplify(ms.model_states_stage_3 - (bytes_per_element + beta_g + K_opt) * Psi / N_d) == 0
    )
    with pytest.raises(ValueError):
        ms.model_state_bytes(1, 4)


# The measurement: stored CSV, and a fresh run (torch and transformers needed).


def _stored_rows():
    with CSV_PATH.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


#: (model, part) rows the check must have: six families and more, MLA, MoE and a hybrid, and the
#: full-recompute rows under torch.utils.checkpoint
REQUIRED_PARTS = {
    ("llama-gqa", "layer attention+dense"),
    ("qwen2-bias", "layer attention+dense"),
    ("qwen3-moe", "layer attention+moe"),
    ("mixtral", "layer attention+moe"),
    ("deepseek-v3-mla", "layer mla+moe"),
    ("qwen3-next-hybrid", "layer gated_deltanet+moe"),
    ("qwen3-next-hybrid", "layer attention+moe"),
    ("phi3", "layer attention+dense"),
    ("llama-gqa", "checkpoint kept: layer attention+dense"),
    ("deepseek-v3-mla", "checkpoint recompute: layer mla+moe"),
    ("qwen3-next-hybrid", "checkpoint recompute: layer gated_deltanet+moe"),
    ("mixtral", "checkpoint backward peak"),
}


def _ratio(row) -> float:
    return int(row["measured"]) / float(row["predicted"])


def test_stored_rows_are_within_tolerance():
    from costmodel.validate_memory import TOLERANCE

    rows = _stored_rows()
    assert TOLERANCE == 0.05
    assert REQUIRED_PARTS <= {(r["model"], r["part"]) for r in rows}
    assert {(r["attention"], r["seq_len"]) for r in rows} == {
        (a, n) for a in ("eager", "sdpa") for n in ("32", "128")
    }
    for row in rows:
        assert abs(_ratio(row) - 1) <= TOLERANCE, row


def test_stored_per_tensor_rules_agree_to_a_tenth_of_a_percent():
    # every row but the backward peak, an upper bound (the inputs of the layers above the
    # heaviest one are freed by then)
    for row in _stored_rows():
        if row["part"] == "checkpoint backward peak":
            assert int(row["measured"]) <= float(row["predicted"]), row
        else:
            assert abs(_ratio(row) - 1) <= 0.001, row


def test_stored_full_recompute_keeps_only_the_layer_inputs():
    kept = [r for r in _stored_rows() if r["part"].startswith("checkpoint kept: layer")]
    assert kept
    for row in kept:
        assert int(row["measured"]) == int(row["predicted"]), row


@pytest.fixture(scope="module")
def fresh_rows():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        missing(
            f"torch/transformers not importable ({exc}); pip install -r validate-requirements.txt"
        )
    from costmodel import validate_memory

    with tiny_torch_runs():
        return validate_memory.validation_rows()


def test_measured_saved_bytes_match_the_prediction(fresh_rows):
    from costmodel.validate_memory import ATTENTIONS, MODELS, SEQ_LENS, TOLERANCE

    seen = {(r.model, r.attention, r.seq_len) for r in fresh_rows}
    assert seen == {(m, a, n) for m in MODELS for a in ATTENTIONS for n in SEQ_LENS}
    for row in fresh_rows:
        assert row.measured > 0, row
        assert abs(row.ratio - 1) <= TOLERANCE, row


def test_checkpointed_layers_keep_their_input_and_rebuild_their_working_set(fresh_rows):
    from costmodel.validate_memory import KEPT, PEAK, RECOMPUTED

    kept = [r for r in fresh_rows if r.part.startswith(KEPT + "layer")]
    rebuilt = [r for r in fresh_rows if r.part.startswith(RECOMPUTED)]
    peaks = [r for r in fresh_rows if r.part == PEAK]
    assert kept and rebuilt and peaks
    for row in kept:
        assert row.measured == row.predicted, row  # the hidden states in, nothing else
    for row in rebuilt:
        assert abs(row.ratio - 1) <= 0.001, row
    for row in peaks:
        assert row.measured <= row.predicted, row


def test_stored_csv_is_current(fresh_rows):
    from costmodel.validate_memory import rows_to_csv

    assert CSV_PATH.read_text(encoding="utf-8") == rows_to_csv(fresh_rows), (
        "stale: python -m costmodel.validate_memory --out costmodel/course/saved_tensors.csv"
    )


def test_most_loaded_stage_takes_the_heaviest_layers_up_to_its_share():
    from costmodel.evaluate.simulate.run import heaviest_stage

    heavy, light = {"x": 3.0}, {"x": 1.0}
    assert heaviest_stage([(light, 6), (heavy, 2)], 4) == [heavy, heavy]
    assert heaviest_stage([(light, 6), (heavy, 2)], 2) == [heavy, heavy, light, light]
    # uneven: 61 layers on 16 stages, the largest stage holds 4 (not one of each kind)
    assert len(heaviest_stage([(light, 3), (heavy, 58)], 16)) == 4
    assert heaviest_stage([(light, 3), (heavy, 58)], 1).count(light) == 3
