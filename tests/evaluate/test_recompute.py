"""derive.recompute as Megatron-LM's modules. FLOPs and memory come from the same set: what is
recomputed costs its forward again (the weight GEMMs' share r of 2ND, the attention core's share
r_core of its forward) and frees its saved tensors."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import sympy as sp

from costmodel.derive import activations as act
from costmodel.derive import recompute
from costmodel.derive.flops import backward_flops, forward_flops, model_flops
from costmodel.derive.symbols import N, N_m, r
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import run
from costmodel.inputs import models, scenario

DEEPSEEK = Path(__file__).resolve().parents[2] / "scenarios" / "deepseek-v3-2048xH800.yaml"


def resolve(file=None, **overrides):
    return scenario.resolve(file, overrides=overrides or None)


def test_the_modules_factor_is_derived_from_the_schedule():
    """Redoing modules with N_m matmul parameters per token costs 2 N_m D more: the factor is
    (2ND + 2 N_m D + 4ND) / 6ND = 1 + N_m / (3N)."""
    schedule = (forward_flops + forward_flops.subs(N, N_m) + backward_flops) / model_flops
    assert sp.simplify(recompute.modules_factor - schedule) == 0
    assert sp.simplify(recompute.modules_factor - (1 + N_m / (3 * N))) == 0
    assert sp.simplify(recompute.modules_fraction - N_m / N) == 0
    by_r = recompute.recompute_factor.subs(r, recompute.modules_fraction)
    assert sp.simplify(by_r - recompute.modules_factor) == 0


def test_fractions_of_module_sets():
    params = {"mlp": 30.0, "moe": 50.0, "shared_experts": 10.0, "mla_up_proj": 5.0}
    got = recompute.fractions("selective", ["core_attn"], params, 100.0)
    assert got == {"weights": 0.0, "core": 1.0, "from": "modules"}
    got = recompute.fractions("selective", ["mlp", "mla_up_proj", "layernorm"], params, 100.0)
    assert got["weights"] == pytest.approx(0.35) and got["core"] == 0.0
    # moe already redoes the shared experts: not counted twice
    both = recompute.fractions("selective", ["moe", "shared_experts"], params, 100.0)
    assert both["weights"] == pytest.approx(0.5)
    stated = recompute.fractions("selective", ["core_attn"], params, 100.0, selective_fraction=0.3)
    assert stated == {"weights": 0.3, "core": 1.0, "from": "scenario"}
    assert recompute.fractions("full")["weights"] == recompute.fractions("full")["core"] == 1.0
    assert recompute.fractions("none") == {"weights": 0.0, "core": 0.0, "from": "policy"}
    assert recompute.recomputed_layers(10, 4, "block") == 0.4
    assert recompute.recomputed_layers(10, 4, "uniform") == 1.0


def test_selective_is_megatrons_default_set_and_costs_only_the_core():
    """recompute: selective is core_attn: no weight GEMM is redone (factor 1, not the course's
    assumed 1.1), and the attention core's hardware FLOPs are forward + forward again + the
    flash backward: 4.5 forwards."""
    acc = account(resolve(recompute="selective"))
    assert acc["scenario"]["recompute_modules"] == ["core_attn"]
    assert acc["recompute_factor"] == 1.0 and acc["hfu"] == acc["mfu"]
    for reading in ("padded", "actual"):
        a = acc["attention"][reading]
        assert a["hardware_flops_per_step"] == pytest.approx(4.5 / 3 * a["flops_per_step"])
    mlp_only = account(resolve(recompute="selective", recompute_modules="moe_act,layernorm"))
    a = mlp_only["attention"]["actual"]
    assert a["hardware_flops_per_step"] == pytest.approx(3.5 / 3 * a["flops_per_step"])


def test_deepseek_v3_recomputes_its_up_projections_by_hand():
    """q_b 1536 x (128 x 192) and kv_b 512 x (128 x (128 + 128)) on 61 + 1 MTP layers, over
    N = 38,239,338,496 with the MTP layer counted."""
    sc = resolve(DEEPSEEK)
    up = (1536 * 128 * 192 + 512 * 128 * (128 + 128)) * 62
    assert up == 3_380_609_024
    assert sc["recompute_weights_fraction"] == pytest.approx(up / 38_239_338_496)
    assert sc["recompute_core_fraction"] == 0.0 and sc["recompute_fraction_from"] == "modules"
    assert account(sc)["recompute_factor"] == pytest.approx(1 + up / 38_239_338_496 / 3)


def test_moe_recompute_is_the_routed_experts_router_and_shared_experts():
    shape = models.load_shape("qwen3.6-35b-a3b")
    parts = shape.breakdown
    sc = resolve(recompute="selective", recompute_modules=["moe"])
    expected = (parts["routed_experts_active"] + parts["router"] + parts["shared_experts"]) / (
        shape.activated_params
    )
    assert sc["recompute_weights_fraction"] == pytest.approx(expected)


def test_a_stated_fraction_still_overrides_the_weights_share():
    sc = resolve(recompute="selective", selective_recompute_fraction=0.3)
    assert sc["recompute_weights_fraction"] == 0.3 and sc["recompute_fraction_from"] == "scenario"
    assert account(sc)["recompute_factor"] == pytest.approx(1.1)


SMALL = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, ffn=16)


def dense(**options):
    return act.layer_activation_bytes(
        "attention", "dense", framework="megatron", **SMALL, **options
    )


def test_recomputed_modules_free_their_tensors():
    whole = dense()
    for modules, freed in (
        (["mlp"], {"mlp.gate", "mlp.up", "mlp.down_input"}),
        (["layernorm"], {"attn.qkv_input", "mlp.input"}),
        (["core_attn"], {"attn.lse"}),
    ):
        kept = dense(recompute="selective", recompute_modules=modules)
        assert set(whole) - set(kept) == freed, modules
    moe = dict(b=1, s=4, hidden=8, heads=2, kv_heads=1, head_dim=4, experts=4, top_k=2, moe_ffn=4)
    kept = act.layer_activation_bytes(
        "attention",
        "moe",
        framework="megatron",
        recompute="selective",
        recompute_modules=["moe"],
        **moe,
    )
    assert [k for k in kept if k.startswith("moe.")] == ["moe.input"]
    act_only = act.layer_activation_bytes(
        "attention",
        "moe",
        framework="megatron",
        recompute="selective",
        recompute_modules=["moe_act"],
        **moe,
    )
    assert "moe.expert.down_input" not in act_only and "moe.expert.gate" in act_only


def test_mla_up_projection_recompute_frees_the_decompressed_heads():
    mla = dict(
        b=1, s=4, hidden=8, heads=2, head_dim=6, v_head_dim=4, q_lora_rank=4, kv_lora_rank=2, ffn=16
    )
    whole = act.layer_activation_bytes("mla", "dense", framework="megatron", **mla)
    kept = act.layer_activation_bytes(
        "mla",
        "dense",
        framework="megatron",
        recompute="selective",
        recompute_modules=["mla_up_proj"],
        **mla,
    )
    assert set(whole) - set(kept) == {
        "attn.q",
        "attn.k",
        "attn.v",
        "attn.q_b_input",
        "attn.kv_b_input",
    }


def test_full_recompute_groups_and_blocks():
    """Uniform groups of n layers keep one input per group and rebuild n layers at once; block
    recomputes the first n layers of the stage and keeps the others whole."""
    kinds = [({"layer.input": 1.0}, {"x": 10.0}, 8)]  # kept, whole, count: 8 layers
    # the keys run.stage_activations reads, as a Scenario's attributes
    values = {"pipeline_parallel": 1, "recompute": "full", "recompute_method": "uniform"}
    uniform = SimpleNamespace(**values, recompute_num_layers=None)
    assert run.stage_activations(kinds, uniform) == (8.0, 10.0)
    groups = SimpleNamespace(**values, recompute_num_layers=4)
    assert run.stage_activations(kinds, groups) == (2.0, 40.0)
    block = SimpleNamespace(**{**values, "recompute_method": "block", "recompute_num_layers": 3})
    assert run.stage_activations(kinds, block) == (3 * 1.0 + 5 * 10.0, 10.0)
    sel = SimpleNamespace(pipeline_parallel=2, recompute="selective", recompute_num_layers=None)
    assert run.stage_activations([({"a": 4.0}, {"a": 4.0, "b": 6.0}, 8)], sel) == (16.0, 6.0)


def test_block_recompute_redoes_its_share_of_the_layers():
    sc = resolve(recompute_num_layers=10, recompute_method="block")
    assert sc["recompute_weights_fraction"] == sc["recompute_core_fraction"] == 0.25
    uniform = resolve(recompute_num_layers=10)
    assert uniform["recompute_weights_fraction"] == 1.0
    assert run.memory(uniform)["phases"]["backward"]["contents"][
        "recompute_working_set"
    ] == pytest.approx(
        10 * run.memory(resolve())["phases"]["backward"]["contents"]["recompute_working_set"]
    )


def test_the_projection_pays_for_the_recomputed_core():
    """Full -> selective (core_attn) on the course's run: the weight GEMMs lose their second
    forward, the attention core keeps it; the step follows the hardware FLOPs with attention."""
    acc = account(resolve())
    proj = acc["projections"]["selective_recompute"]
    six_nd = acc["model_flops_per_step"]
    core = acc["attention"]["actual"]["flops_per_step"] / 3  # the core's forward
    linear = acc["linear_attention"]["flops_per_step"]
    now = 4 / 3 * six_nd + 4.5 * core + 4 / 3 * linear
    selective = six_nd + 4.5 * core + 4 / 3 * linear
    assert proj["hardware_flops_now"] == pytest.approx(now)
    assert proj["speedup"] == pytest.approx(now / selective)
    off = acc["projections"]["recompute_off"]
    assert off["speedup"] == pytest.approx(now / (six_nd + 3.5 * core + linear))
