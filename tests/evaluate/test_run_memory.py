"""evaluate.simulate.run: the memory of a step by phase, the framework rules behind it (checked against
Korthikanti et al. 2022 and Megatron-LM's theoretical memory), the usable capacity, FP8 storage,
and the changes that make a run fit."""

import math
import re

import pytest
import sympy as sp

from costmodel.derive import activations as act
from costmodel.derive import memory as mem_rules
from costmodel.derive.symbols import b_micro, s, t_p
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import run
from costmodel.inputs import hardware, scenario
from costmodel.present import report
from costmodel.present.advice import fitting, note

a_heads, h_w, f_w = sp.symbols("a h f", positive=True)


def resolve(file=None, **overrides):
    return scenario.resolve(file, overrides=overrides or None)


# ------------------------------------------------------------------ Megatron / Korthikanti


def gpt_layer(recompute="none", tp=1, sp_on=True, kernel="eager"):
    """A GPT layer under the megatron rules in symbols: a heads of width h/a (no GQA), an MLP of
    width f, attention dropout and the two hidden dropouts on (Korthikanti et al. count them),
    BF16. Returns (terms that grow with h or with s^2, per-row terms), each a dict."""
    got = act.layer_activation_bytes(
        "attention",
        "dense",
        tp=tp,
        sp=sp_on,
        b=b_micro,
        s=s,
        hidden=h_w,
        heads=a_heads,
        kv_heads=a_heads,
        head_dim=h_w / a_heads,
        ffn=f_w,
        attention_kernel=kernel,
        framework="megatron",
        dropout=True,
        recompute=recompute,
    )
    per_row = {k: v for k, v in got.items() if k.endswith((".rstd", ".lse"))}
    return {k: v for k, v in got.items() if k not in per_row}, per_row


def test_megatron_gpt_layer_is_korthikanti_table_2():
    """Korthikanti et al. 2022 (arXiv:2205.05198) section 4.1: s·b·h·(34 + 5·a·s/h) bytes per
    GPT layer with a 4h GELU MLP. The megatron rules give, exactly, 18·s·b·h for everything but
    the MLP's activation (attention 11, the two LayerNorm inputs 4, the MLP input 2 and its
    dropout mask 1), 5·a·s²·b for the scores, softmax and dropout, and for the MLP's activation
    the SwiGLU's 6·f·s·b (fc1 output 2f wide, fc2 input f wide), where GELU's is 4·f·s·b (16 at
    f = 4h, Megatron-LM's 4·ffn/h in theoretical_memory_usage.py). Named differences: one fp32
    rsigma per row and norm (per-row terms, not in the paper's table)."""
    terms, per_row = gpt_layer()
    total = sp.expand(sum(terms.values()))
    assert (
        sp.simplify(
            total - (s * b_micro * h_w * (18 + 6 * f_w / h_w) + 5 * a_heads * s**2 * b_micro)
        )
        == 0
    )
    assert sp.simplify(sum(per_row.values()) - 2 * 4 * s * b_micro) == 0  # two norms, fp32 each
    # the attention block alone is the paper's 11 s b h + 5 a s^2 b
    attention = sum(v for k, v in terms.items() if k.startswith("attn."))
    assert sp.simplify(attention - (11 * s * b_micro * h_w + 5 * a_heads * s**2 * b_micro)) == 0
    # the two LayerNorm inputs: 4 s b h
    norms = sum(v for k, v in terms.items() if k.endswith("norm.input"))
    assert sp.simplify(norms - 4 * s * b_micro * h_w) == 0


def test_megatron_selective_and_full_recompute_are_the_papers():
    """Selective recompute of the core (Megatron-LM's default set) removes exactly 5·a·s²·b: 34
    (here 18 + the MLP's activation); full recompute keeps 2·s·b·h, the layer's input."""
    terms, _ = gpt_layer("selective")
    assert sp.simplify(sum(terms.values()) - s * b_micro * h_w * (18 + 6 * f_w / h_w)) == 0
    full, _ = gpt_layer("full")
    assert full == {"layer.input": 2 * s * b_micro * h_w}


def test_megatron_without_sequence_parallelism_is_10_plus_24_over_t():
    """Megatron-LM's compute_activation_memory_without_sp: s·b·h·(10 + 24/t) with GELU. The
    replicated part is exactly 10 s b h; the split part (8 + the MLP's activation) / t."""
    terms, _ = gpt_layer("selective", tp=t_p, sp_on=False)
    replicated = sum(v for v in terms.values() if not v.has(t_p))
    split = sum(v for v in terms.values() if v.has(t_p))
    assert sp.simplify(replicated - 10 * s * b_micro * h_w) == 0
    assert sp.simplify(split - s * b_micro * (8 * h_w + 6 * f_w) / t_p) == 0


def test_flash_keeps_no_square_and_the_core_inputs():
    terms, per_row = gpt_layer(kernel="flash")
    assert not sp.expand(sum(terms.values())).has(s**2)
    assert "attn.lse" in per_row  # one fp32 log-sum-exp per row and head: a named difference


def test_frameworks_differ_where_named():
    shape = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=16)
    mega = act.layer_activation_bytes(framework="megatron", attention_kernel="eager", **shape)
    hf = act.layer_activation_bytes(framework="huggingface", attention_kernel="eager", **shape)
    assert "attn.softmax_fp32" in hf and "attn.softmax_fp32" not in mega
    assert "mlp.silu" in hf and "mlp.silu" not in mega
    assert "attn_norm.input_fp32" in hf and "attn_norm.input" in mega
    assert act.FRAMEWORKS["megatron"].cross_entropy == "fused"
    assert act.FRAMEWORKS["huggingface"].cross_entropy == "fp32"


MOE = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, experts=4, top_k=2, moe_ffn=4)


def test_megatron_moe_by_hand():
    """Megatron-Core's MoE: T = 4 tokens, k = 2 (8 routed rows), E = 4, expert width 4."""
    got = act.layer_activation_bytes("attention", "moe", framework="megatron", **MOE)
    assert {k: v for k, v in got.items() if k.startswith("moe.")} == {
        "moe.input": 2 * 4 * 8,
        "moe.router_scores": 4 * 4 * 4,  # fp32 T E
        "moe.routing_map": 1 * 4 * 4,  # bool T E
        "moe.row_id_map": 4 * 4 * (2 * 4 + 1),  # int32 T (2E + 1)
        "moe.routed_input": 2 * 8 * 8,  # fc1's input: the routed rows
        "moe.sort_chunks_map": 4 * 8,
        "moe.permuted_probs": 4 * 8,  # the weighted SwiGLU's fp32 weights
        "moe.expert.gate": 2 * 8 * 4,
        "moe.expert.up": 2 * 8 * 4,
        "moe.expert.down_input": 2 * 8 * 4,
    }


def test_fp8_storage_of_moe_inputs_and_linear_inputs():
    base = act.layer_activation_bytes("attention", "moe", framework="megatron", **MOE)
    moe8 = act.layer_activation_bytes(
        "attention", "moe", framework="megatron", fp8_activations="moe_inputs", **MOE
    )
    lin8 = act.layer_activation_bytes(
        "attention", "moe", framework="megatron", fp8_activations="linear_inputs", **MOE
    )
    fp8 = act.FP8_BYTES / 2  # one byte and a 1 x 128 tile's fp32 scale, over BF16's two
    for name in ("moe.routed_input", "moe.expert.gate", "moe.expert.up", "moe.expert.down_input"):
        assert moe8[name] == pytest.approx(base[name] * fp8), name
    assert moe8["attn.qkv_input"] == base["attn.qkv_input"]
    assert lin8["attn.qkv_input"] == pytest.approx(base["attn.qkv_input"] * fp8)
    assert lin8["moe.expert.gate"] == base["moe.expert.gate"]  # a SwiGLU input, not a linear's
    assert act.FP8_BYTES == 1 + 4 / 128


@pytest.mark.parametrize(
    "ce, framework, per_element",
    [
        ("fp32", "huggingface", 2 + 4 + 4),
        ("fp32", "megatron", 2 + 4),
        ("fused", "megatron", 2),
        ("chunked", "megatron", 2 / 8),
        ("fused_linear", "megatron", 0),
    ],
)
def test_the_loss_keeps_what_the_cross_entropy_says(ce, framework, per_element):
    got = act.loss_saved(10, 100, 2, ce, chunks=8, framework=framework)
    assert sum(t.bytes for t in got) == pytest.approx(per_element * 10 * 100)


# ------------------------------------------------------------------ phases and capacity


def test_phases_are_never_summed():
    got = mem_rules.phases(50, 8, 1, 1, logits=24, working_set=7, layer_gradients=1)
    assert {k: v["bytes"] for k, v in got.items()} == {
        "forward_end": 59,
        "loss": 83,
        "backward": 67,
        "optimizer_step": 50,
    }
    assert mem_rules.peak(got) == "loss"
    two = mem_rules.phases(50, 8, 0, 2, working_set=30)  # a stage without the lm_head
    assert "loss" not in two and mem_rules.peak(two) == "backward"
    assert two["backward"]["bytes"] == 50 + 16 + 30


def test_the_course_run_peaks_in_the_loss_and_fits():
    sc = resolve()
    mem = account(sc)["memory"]
    phases = mem["phases"]
    states = mem["weights"] + mem["gradients"] + mem["optimizer"]
    assert mem["peak_phase"] == "loss" and mem["total"] == phases["loss"]["bytes"]
    assert mem["logits"] == 49152 * 248320 * 2  # BF16 logits: fused cross-entropy
    # full recompute: each of the 40 layers keeps its BF16 input, 49,152 x 2,048 x 2 bytes
    assert phases["loss"]["contents"]["saved_activations"] == 40 * 49152 * 2048 * 2
    assert phases["loss"]["bytes"] == pytest.approx(
        states
        + 40 * 49152 * 2048 * 2
        + phases["loss"]["contents"]["outside_layers"]
        + mem["logits"]
    )
    # the recomputed layer is not held with the logits: they are in different phases
    working = phases["backward"]["contents"]["recompute_working_set"]
    assert working > 0 and mem["total"] < phases["loss"]["bytes"] + working
    # capacity: the H20's CUDA total (97,871 MiB) minus memory_reserve (2 GiB)
    assert mem["capacity"] == 97871 * 2**20 - 2 * 2**30
    assert mem["fits"]
    assert mem["settings"]["framework"] == "megatron"
    assert mem["settings"]["cross_entropy"] == "fused"
    assert mem["settings"]["attention_kernel"] == "flash"
    assert mem["fit"] is None


def test_capacity_is_the_cuda_total_minus_the_reserve():
    h100 = hardware.GPUS["H100-SXM"]
    assert h100.cuda_memory_bytes == 85_045_477_376 and h100.cuda_memory_kind == "cuda"
    assert hardware.GPUS["H200"].cuda_memory_bytes == 143_771 * 2**20
    assert hardware.GPUS["H800"].cuda_memory_kind == "datasheet GiB"
    for gpu in hardware.GPUS.values():
        assert gpu.cuda_memory_source and gpu.cuda_memory_bytes > 0.85 * gpu.memory_bytes
    got = run.capacity(resolve(gpu="H100-SXM", memory_reserve=10**9))
    assert got["usable"] == 85_045_477_376 - 10**9


def test_recompute_none_at_the_courses_length_does_not_fit_and_is_told_how():
    sc = resolve(recompute="none")
    mem = account(sc)["memory"]
    assert not mem["fits"]
    assert mem["fit"], "a run that does not fit gets the changes that make it fit"
    assert all(change["fits"] for change in mem["fit"])
    costs = [change["flop_cost"] for change in mem["fit"]]
    assert costs == sorted(costs)
    for change in mem["fit"]:  # each peak is the memory model run on the changed scenario
        again = run.memory(resolve(**{"recompute": "none", **change["set"]}))
        assert change["peak"] == pytest.approx(again["total"]), change["change"]
    assert "recompute full" in [change["change"] for change in mem["fit"]]


def test_the_changes_to_fit_are_what_the_framework_offers():
    """Issue 35 (2): the "to fit" list offers only what the team's framework has (the table of
    inputs.frameworks): under Megatron-LM's distributed optimizer no ZeRO-2 or 3; under
    torchtitan's FSDP2 ZeRO-2 and 3 but no ZeRO-1; under Trainer + DeepSpeed no TP, CP, PP or
    selective recompute."""
    shape = resolve().shape

    def changes(framework: str, zero: int = 0) -> list[str]:
        sc = resolve(recompute="none", framework=framework, zero_stage=zero)
        return [label for label, _, _ in run.candidates(sc, shape)]

    megatron = changes("megatron")
    assert "zero_stage 1" in megatron
    assert not {"zero_stage 2", "zero_stage 3"} & set(megatron)
    titan = changes("torchtitan")
    assert {"zero_stage 2", "zero_stage 3"} <= set(titan) and "zero_stage 1" not in titan
    hf = changes("huggingface")
    assert "recompute full" in hf and {"zero_stage 1", "zero_stage 3"} <= set(hf)
    assert not [x for x in hf if x.split()[0] in ("tensor_parallel", "context_parallel",
                                                  "pipeline_parallel", "recompute_modules")]  # fmt: skip


def test_levers_that_do_not_fit_say_so():
    acc = account(resolve())
    by = {x["lever"]: x for x in acc["advice"]}
    for name in ("selective_recompute", "recompute_off", "micro_batch"):
        assert not by[name]["feasible"] and "does not fit" in note(by[name]), name


def test_report_shows_phases_settings_and_fit():
    text = report.render(account(resolve(recompute="none")))
    for phase in ("forward end", "loss", "backward", "optimizer step"):
        assert f"phase: {phase}" in text
    assert "memory_reserve" in text and "framework megatron" in text
    assert "to fit: recompute full" in text


def test_mfu_against_the_fp8_peak():
    acc = account(resolve(fp8="hybrid"))
    fp8 = acc["fp8"]
    assert fp8["mfu_fp8_peak"] == pytest.approx(acc["mfu"] * 148e12 / 296e12)
    assert fp8["mfu_bf16_peak"] == acc["mfu"]
    text = report.render(acc)
    assert "MFU against the FP8 peak" in text and "MFU against the BF16 peak" in text
    assert "MFU against the FP8 peak" not in report.render(account(resolve()))
    a100 = account(resolve(gpu="A100-80GB", fp8="hybrid", step_time=1000))
    assert a100["fp8"]["mfu_fp8_peak"] is None


@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({"fp8_activations": "moe_inputs"}, "none unless fp8 is hybrid"),
        ({"recompute_modules": "mlp"}, "null unless recompute is selective"),
        ({"recompute": "none", "recompute_num_layers": 2}, "unset unless recompute is full"),
        ({"recompute_modules": "attn", "recompute": "selective"}, "a list (or comma-separated"),
    ],
)
def test_memory_settings_that_do_not_go_together(overrides, expected):
    with pytest.raises(scenario.CostModelError, match=re.escape(expected)):
        resolve(**overrides)


def test_json_names_the_settings():
    acc = account(resolve())
    assert set(run.MEMORY_SETTINGS) <= set(acc["memory"]["settings"])
    assert acc["memory"]["capacity_detail"]["memory_reserve"] == 2 * 2**30
    assert math.isclose(
        acc["memory"]["headroom"], acc["memory"]["capacity"] - acc["memory"]["total"]
    )
    assert fitting(acc["memory"]).endswith("fits")


def test_a_fit_names_every_key_it_sets():
    """The TP fit also turns sequence parallelism on: its label said only "tensor_parallel 2",
    and a team that set TP 2 alone got a larger peak than the fit had printed."""
    sc = scenario.resolve(
        data={
            "model": "qwen3-8b",
            "gpu": "H100-SXM",
            "num_gpus": 32,
            "seq_len": 8192,
            "samples_per_step": 256,
            "mean_tokens_per_sample": 6000,
            "step_time": 8.0,
            "measured_tokens_per_s": None,
            "recompute": "selective",
        }
    )
    fits = {x["change"]: x for x in account(sc)["memory"]["fit"]}
    tp = fits["tensor_parallel 2, sequence_parallel true"]
    assert tp["set"] == {"tensor_parallel": 2, "sequence_parallel": True}
    alone = sc.what_if(tensor_parallel=2, sequence_parallel=True)
    assert run.memory(alone)["total"] == tp["peak"]
