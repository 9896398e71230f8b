"""inputs.what_if: one what-if path. A changed scenario derived from the resolved one equals
`resolve` of the changed inputs, re-reads no file and builds no shape it need not; the levers
go through it, so one account resolves its scenario once; the EP it fits is resolution's."""

from pathlib import Path

import pytest

from costmodel import cli
from costmodel.errors import CostModelError
from costmodel.evaluate.account import account as account_module
from costmodel.evaluate.plan import layouts
from costmodel.evaluate.simulate import run
from costmodel.inputs import lengths, model_shape, scenario, what_if
from costmodel.inputs.layout import cp_divides

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

#: (scenario file or None for the course, its --set): the bases the changes are made on.
BASES = [
    (None, {}),
    (None, {"num_gpus": 12, "tensor_parallel": 2}),
    (None, {"recompute": "selective", "cross_entropy": None}),
    (None, {"model": "qwen3-30b-a3b"}),
    (None, {"hidden_size": 4096}),
    ("deepseek-v3-2048xH800.yaml", {}),
    ("llama-3.1-70b-512xH100.yaml", {}),
    ("llama-3.1-8b-packed-64xH100.yaml", {}),
    ("qwen3-next-80b-256xB200.yaml", {}),
]
#: Changes of every kind: the levers', layouts, shape keys, recompute policies, the GPU, the
#: lengths' keys. (Each sets what it leaves without meaning too, as a full resolve needs.)
CHANGES = [
    {"tensor_parallel": 2, "sequence_parallel": True},
    {"pipeline_parallel": 2},
    {"context_parallel": 2},
    {"num_gpus": 80},
    {"expert_parallel": 4},
    {"micro_batch": 2},
    {"batching": "packed"},
    {"fp8": "hybrid", "fp8_activations": "linear_inputs"},
    {"recompute": "none", "recompute_modules": None},
    {"recompute": "selective", "recompute_modules": ["core_attn", "layernorm"]},
    {"recompute": "full", "recompute_modules": None, "recompute_num_layers": 2},
    {"attention_efficiency": 0.3, "ep_overlap": "dualpipe"},
    {"pipeline_schedule": "interleaved", "virtual_pipeline": 2, "pipeline_parallel": 2},
    {"cross_entropy": "chunked", "zero_stage": 3},
    {"hidden_size": 4096},
    {"hidden_size": 1024, "num_layers": 24},
    {"seq_len": 8192},
    {"samples_per_step": 160},
    {"num_heads": 32},
    {"head_dim": 128},
    {"num_kv_heads": 4},
    {"ffn_hidden_size": 8192},
    {"num_experts": 64},
    {"vocab_size": 32000},
    {"gpu": "B200"},
    {"step_time": 60},
    {"full_attention_every": 1},
    {"model": "llama-3.1-8b"},
    # the parameter counts alone: checked and set, nothing derived again (what_if.CHECKED_ONLY)
    {"activated_params": 2_000_000_000, "total_params": 30_000_000_000},
    {"activated_params": 5_000_000_000},
    {"total_params": 1_000_000_000},
]


def _base(file, overrides):
    if file is not None:
        return scenario.resolve(SCENARIOS / file, overrides or None)
    return scenario.resolve(data={"name": "base", **overrides})


def _full(file, overrides, changes):
    """`resolve` of the changed inputs: the base's own, the changes set over them."""
    if file is not None:
        return scenario.resolve(SCENARIOS / file, {**overrides, **changes})
    return scenario.resolve(data={"name": "base", **overrides, **changes})


@pytest.mark.parametrize("file, overrides", BASES)
def test_what_if_equals_a_full_resolve(file, overrides):
    base = _base(file, overrides)
    compared = 0
    for changes in CHANGES:
        try:
            full, expected = _full(file, overrides, changes), None
        except CostModelError as error:
            full, expected = None, str(error)
        got, reason = what_if.refusal(base, changes)
        assert reason == expected, changes
        if full is not None:
            assert got == full, (changes, {k for k in full.values if full[k] != got[k]})
            assert got.values == full.values and got.lengths == full.lengths
            compared += 1
    assert compared >= len(CHANGES) // 2


def test_what_if_of_a_predicted_step_predicts_it_again(course):
    """account.fill_step_time's step is not an input: the changed scenario predicts its own."""
    base = scenario.resolve(overrides={"step_time": None})
    filled = account_module.fill_step_time(base)
    got = filled.what_if(micro_batch=2)
    assert got.step_time is None and got == base.what_if(micro_batch=2)


def test_a_change_clears_what_it_leaves_without_meaning():
    sc = scenario.resolve(SCENARIOS / "deepseek-v3-2048xH800.yaml")
    assert sc.recompute == "selective" and sc.recompute_modules
    full = sc.what_if(recompute="full")
    assert full.recompute_modules is None and full.recompute == "full"
    tp = scenario.resolve(SCENARIOS / "llama-3.1-70b-512xH100.yaml")
    assert tp.sequence_parallel and not tp.what_if(tensor_parallel=1).sequence_parallel
    interleaved = scenario.resolve(
        overrides={
            "pipeline_parallel": 2,
            "pipeline_schedule": "interleaved",
            "virtual_pipeline": 2,
        }
    )
    assert interleaved.what_if(pipeline_schedule="1f1b").virtual_pipeline is None


def test_a_refusal_is_the_validators_line():
    course = scenario.resolve()
    with pytest.raises(CostModelError) as error:
        course.what_if(tensor_parallel=3)
    assert str(error.value) == (
        "num_gpus: 40 is not allowed; expected a multiple of tensor_parallel x "
        "pipeline_parallel x context_parallel (3 x 1 x 1 = 3)"
    )
    refused, reason = run.variant_or_reason(course, {"micro_batch": 0})
    assert refused is None and reason.startswith("micro_batch: 0 is not allowed; expected ")
    assert run.variant(course, {"tensor_parallel": 3}) is None
    assert what_if.refusal(course, {"seq_lenn": 1})[1].startswith("unknown scenario key")


def test_the_ep_refit_is_resolutions_rule():
    """40 GPUs, TP 2 -> DP 6 and EP 2 (the course's 8 fitted); TP 1 -> DP 12: resolution fits
    the course's EP 8 to 4. The old refit, gcd(2, 256, 12), gave 2."""
    sc = scenario.resolve(overrides={"num_gpus": 12, "tensor_parallel": 2})
    assert (sc.data_parallel, sc.expert_parallel) == (6, 2)
    got = run.variant(sc, {"tensor_parallel": 1})
    full = scenario.resolve(overrides={"num_gpus": 12, "tensor_parallel": 1})
    assert got.expert_parallel == full.expert_parallel == 4
    assert got.sources["expert_parallel"] == "derived"


def test_no_file_read_and_the_shape_kept(monkeypatch):
    sc = scenario.resolve(SCENARIOS / "qwen3-next-80b-256xB200.yaml")
    shape = sc.shape

    def refuse(*args):
        raise AssertionError("a file read again")

    monkeypatch.setattr(lengths, "read_lengths", refuse)
    monkeypatch.setattr(model_shape, "shape_from_keys", refuse)
    monkeypatch.setattr(model_shape.models, "load_shape", refuse)
    relaid = sc.what_if(context_parallel=2, micro_batch=2)
    assert relaid.shape is shape and relaid.lengths == sc.lengths
    shorter = sc.what_if(seq_len=32768)  # the lengths summarized again, not read again
    assert shorter.lengths.raw is sc.lengths.raw and shorter.lengths.seq_len == 32768
    assert shorter.sum_squared_lengths < sc.sum_squared_lengths


def test_resolve_once_per_account(monkeypatch, capsys):
    """One course account and one `costmodel report` resolve the scenario once: the levers'
    21 changed scenarios are derived from it (before: 22 resolve calls)."""
    calls = []
    real = scenario.resolve

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(scenario, "resolve", counted)
    account_module._ACCOUNTS.clear()
    account_module.account(scenario.resolve())
    assert len(calls) == 1
    calls.clear()
    account_module._ACCOUNTS.clear()
    assert cli.main(["report", "--format", "json"]) in (0, None)
    capsys.readouterr()
    assert len(calls) == 1


def test_one_cp_rule():
    """Load-balanced CP cuts a sequence into 2 x CP chunks: resolution, the layouts table and
    the plan's search ask the one rule (the table asked 2 x CP, resolution CP)."""
    assert cp_divides(6, 1) and cp_divides(8, 4) and not cp_divides(6002, 2)
    keys = {"seq_len": 6002, "mean_tokens_per_sample": 1000, "context_parallel": 2}
    with pytest.raises(CostModelError, match="context_parallel: 2 is not allowed; expected 1"):
        scenario.resolve(overrides=keys)
    table = {lay.cp: lay for lay in layouts.layouts(40, 80, 6002, 256)}
    assert not table[2].seq_divides and table[1].seq_divides  # CP 1 cuts nothing
    assert scenario.resolve(overrides={**keys, "seq_len": 6004})["context_parallel"] == 2


def test_a_team_key_the_model_also_sets_is_the_teams():
    """resolve gave a --set key its model config also sets the source `model`: the shape key was
    not the team's, so its N was not derived from it (nor a conflicting one refused)."""
    sc = scenario.resolve(SCENARIOS / "llama-3.1-70b-512xH100.yaml", {"ffn_hidden_size": 8192})
    assert sc.sources["ffn_hidden_size"] == "--set"
    assert sc.sources["activated_params"] == "derived" and sc.activated_params < 4e10
