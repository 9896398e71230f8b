"""ZeRO 3's gathered layer in the memory model (derive.model_states.zero3_gathered,
evaluate.memory.gpu_memory): the weights of the layer computing and of the one prefetched, and
the layer's unsharded gradients, beside the sharded states; the report, the plan and the levers
read the same figure (tests/evaluate/test_plan.py checks the plan against the report)."""

from __future__ import annotations

from pathlib import Path

import sympy as sp

from costmodel import cli
from costmodel.derive import model_states, plain
from costmodel.derive.symbols import Psi, Psi_l, f_pre
from costmodel.evaluate.simulate import run
from costmodel.inputs import scenario

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "scenarios" / "qwen3-8b-hf-deepspeed-8xH100.yaml"


def test_the_working_set_is_unsharded_states_of_whole_layers():
    """Derived: (1 + f_pre) layers' weights and one layer's gradients as ZeRO 0 holds them
    (nothing sharded), for the largest layer's Psi_l parameters."""
    unsharded = (1 + f_pre) * model_states.weights[0] + model_states.gradients[0]
    assert sp.simplify(model_states.zero3_gathered - unsharded.subs(Psi, Psi_l)) == 0
    # the plain evaluator is the derivation's numeric form
    assert plain.zero3_gathered_bytes(1e9, 1, grad_bytes=4) == 2 * 2e9 + 4e9
    assert plain.zero3_gathered_bytes(1e9, 2, grad_bytes=2) == 3 * 2e9 + 2e9


def test_the_lab_holds_two_qwen3_8b_layers_gathered():
    """Qwen3-8B under ZeRO 3, TP 1, bf16 gradients (grad_bytes 2): the mean layer has
    (8,190,735,360 - 2 x 151,936 x 4,096) / 36 parameters (the untied embedding and lm_head
    apart), about 193 M: 2 x 2 bytes of weights and 2 of gradients each, 1.158 GB."""
    sc = scenario.resolve(LAB)
    assert (sc.zero_stage, sc.tensor_parallel, sc.grad_bytes) == (3, 1, 2)
    layer = (8_190_735_360 - 2 * 151_936 * 4_096) / 36
    mem = run.memory(sc)
    assert mem["gathered"] == (2 * 2 + 2) * layer
    assert round(mem["gathered"] / 1e9, 3) == 1.158
    assert "ZeRO 3: the gathered weights of the largest layer" in mem["convention"]
    # ZeRO 2 keeps the weights whole: nothing is gathered, and the convention does not say it
    lower = run.memory(scenario.resolve(LAB, {"zero_stage": 2}))
    assert "gathered" not in lower and "ZeRO 3" not in lower["convention"]


def test_an_moe_layer_gathers_its_experts_over_ep():
    """The course's model under ZeRO 3: the largest layer is an MoE layer, its routed experts
    (256 experts of 3 x 2,048 x 512 per layer, 40 layers) over EP, with the layers' mean dense
    share; EP 1 gathers every expert of the layer (what a search at EP 1 with ZeRO 3 must hold)."""
    at = {}
    for ep in (1, 8):
        sc = scenario.resolve(overrides={"zero_stage": 3, "expert_parallel": ep})
        at[ep] = run.memory(sc)["gathered"]
    experts_per_layer = 256 * 3 * 2_048 * 512
    grad = scenario.resolve(overrides={"zero_stage": 3}).grad_bytes
    # the dense share is the same at both EP sizes: the difference is the experts' alone
    assert at[1] - at[8] == (2 * 2 + grad) * experts_per_layer * (1 - 1 / 8)


def test_the_report_prints_the_gathered_row(capsys):
    assert cli.main(["report", "--scenario", str(LAB)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("  gathered "))
    assert "1.2 GB" in row and "ZeRO 3" in row
    assert cli.main(["report"]) == 0  # the course (ZeRO 1): no such row
    assert "  gathered " not in capsys.readouterr().out


def test_the_plans_screen_is_a_lower_bound_with_zero3s_gathered_layers():
    """The plan screens layouts out by their least peak over the ZeRO stages it searches. With
    ZeRO 3's gathered layers the most sharding is not always the least memory (a pipeline stage
    of few layers holds two gathered layers beside one sharded stage), so the least peak is
    taken over the stages: never above the peak of any stage the search then evaluates."""
    from costmodel.evaluate.plan import plan
    from costmodel.evaluate.plan.plan_batch import Batch
    from costmodel.evaluate.plan.plan_space import recompute_options, schedule_options

    base = plan.rebase(
        scenario.resolve(REPO / "scenarios" / "llama-3.1-8b-torchtitan-64xH200.yaml")
    )
    ev, _, every = plan._space(base, False, {})
    assert 3 in ev.zero_stages and 2 in ev.zero_stages  # torchtitan: FSDP2 (ZeRO 2 and 3)
    ev.batch = Batch(ev, every)
    options = recompute_options(base)
    least = ev.batch.least_peaks(options)
    above = 0
    for i, core in enumerate(every):
        schedules = schedule_options(base, core.pp)
        # [ZeRO stage (0 to 3), schedule] peaks; the stages searched
        searched = [ev.peaks(core, rc, schedules)[list(ev.zero_stages)] for rc in options]
        peaks = min(p.min() for p in searched)
        assert least[i] <= peaks * (1 + 1e-12), core
        zero3 = min(ev.peaks(core, rc, schedules)[3].min() for rc in options)
        above += zero3 > peaks * (1 + 1e-9)  # ZeRO 3 is not this core's least
    assert above > 0  # cores where the old screen (ZeRO 3's states) would have been too high
