"""The example scenarios shipped in scenarios/: each resolves from its own folder, derives the
layout its comments state, lands in a plausible MFU band, and `costmodel report` accepts it."""

import json
from pathlib import Path

import pytest
from commands import cli

from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
CONFIGS = SCENARIOS / "configs"

#: Per example: the file, its layout (DP = GPUs / (TP x PP x CP), EP), tokens per step, and the
#: MFU band it must fall in (6ND over the dense BF16 peak).
#: - Llama-3.1-70B on H100 with Megatron-LM: published dense runs of this size reach 35-45%;
#:   the scenario's step time is chosen for ~40%.
#: - DeepSeek-V3 on H800: the report's 180K GPU-hours per trillion tokens gives ~36% of the
#:   BF16 peak with N counting the MTP module; 30-40% brackets it (FP8 GEMMs, not BF16).
EXAMPLES = {
    "llama-3.1-70b-512xH100": {
        "gpus": 512,
        "layout": (8, 4, 1),  # TP, PP, CP
        "dp": 16,
        "ep": 1,
        "tokens_per_step": 512 * 8192,
        "mfu": (0.35, 0.45),
        "config": "llama-3.1-70b.json",
    },
    "deepseek-v3-2048xH800": {
        "gpus": 2048,
        "layout": (1, 16, 1),
        "dp": 128,
        "ep": 64,
        "tokens_per_step": 15360 * 4096,
        "mfu": (0.30, 0.40),
        "config": "deepseek-v3.json",
    },
}


def path(name: str) -> Path:
    return SCENARIOS / f"{name}.yaml"


@pytest.fixture(scope="module", params=sorted(EXAMPLES))
def example(request):
    name = request.param
    sc = scenario.resolve(path(name))
    return name, EXAMPLES[name], sc, account(sc)


def test_the_examples_are_shipped():
    for name, expected in EXAMPLES.items():
        assert path(name).is_file(), name
        assert (CONFIGS / expected["config"]).is_file(), expected["config"]


def test_model_is_read_from_the_config_beside_the_scenario(example):
    _, expected, sc, _ = example
    assert Path(sc["model"]) == CONFIGS / expected["config"]
    assert sc.sources["activated_params"] == "model"
    assert sc.sources["num_layers"] == "model"


def test_layout_derives_dp_and_ep(example):
    _, expected, sc, acc = example
    tp, pp, cp = expected["layout"]
    assert (sc["tensor_parallel"], sc["pipeline_parallel"], sc["context_parallel"]) == (tp, pp, cp)
    assert sc["num_gpus"] == expected["gpus"]
    assert sc["data_parallel"] == expected["gpus"] // (tp * pp * cp) == expected["dp"]
    assert sc["expert_parallel"] == expected["ep"]
    assert sc.sources["expert_parallel"] in ("file", "derived")
    assert acc["parallel"]["dp"] == expected["dp"] and acc["parallel"]["ep"] == expected["ep"]
    assert sc["micro_batches_per_step"] == sc["samples_per_step"] / (
        sc["data_parallel"] * sc["micro_batch"]
    )


def test_tokens_per_step(example):
    _, expected, sc, _ = example
    assert sc["tokens_per_step"] == expected["tokens_per_step"]


def test_mfu_is_plausible_and_nothing_exceeds_the_peak(example):
    _, expected, sc, acc = example
    low, high = expected["mfu"]
    assert low <= acc["mfu"] <= high
    assert acc["mfu"] <= acc["hfu"] <= 1
    # every slot is a real token: the HFU counting padded slots is the HFU
    assert acc["padding"]["batching"] == "padded"
    assert acc["padding"]["useful_fraction"] == pytest.approx(1.0)
    assert acc["padding"]["hfu_of_slots"] <= 1


def test_mfu_is_6nd_over_the_peak(example):
    _, _, sc, acc = example
    six_nd = 6 * sc["activated_params"] * sc["tokens_per_step"]
    peak = sc["step_time"] * sc["num_gpus"] * sc["peak_flops"]
    assert acc["mfu"] == pytest.approx(six_nd / peak, rel=1e-9)


def test_llama_step_time_gives_forty_percent():
    sc = scenario.resolve(path("llama-3.1-70b-512xH100"))
    assert sc["activated_params"] == 69_501_714_432
    assert account(sc)["mfu"] == pytest.approx(0.40, abs=0.005)


def test_deepseek_step_time_is_the_reports_gpu_hours():
    """180K H800 GPU-hours per trillion tokens (arXiv:2412.19437), as one step's seconds and as
    the cluster's tokens/s."""
    sc = scenario.resolve(path("deepseek-v3-2048xH800"))
    gpu_seconds_per_token = 180_000 * 3600 / 1e12
    assert sc["step_time"] == pytest.approx(
        sc["tokens_per_step"] * gpu_seconds_per_token / sc["num_gpus"], abs=0.05
    )
    assert sc["measured_tokens_per_s"] == pytest.approx(
        sc["num_gpus"] / gpu_seconds_per_token, abs=1
    )
    assert sc["num_mtp_layers"] == 1 and sc["activated_params"] == 38_239_338_496
    assert sc["communication_share"] is None


def test_configs_are_the_published_ones():
    llama = json.loads((CONFIGS / "llama-3.1-70b.json").read_text(encoding="utf-8"))
    assert {
        key: llama[key]
        for key in (
            "model_type",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
            "rope_theta",
            "tie_word_embeddings",
        )
    } == {
        "model_type": "llama",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    }
    assert llama["rope_scaling"]["rope_type"] == "llama3"
    shipped = (CONFIGS / "deepseek-v3.json").read_bytes()
    assert shipped == (REPO / "tests" / "configs" / "deepseek-v3.json").read_bytes()
    sources = (CONFIGS / "SOURCES.md").read_text(encoding="utf-8")
    for config in CONFIGS.glob("*.json"):
        assert f"`{config.name}`" in sources, config.name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_report_exits_zero_from_any_folder(name, tmp_path):
    result = cli("report", "--scenario", str(path(name)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "MFU" in result.stdout and result.stderr == ""


#: The page whose table of the example runs the account must agree with (it was README's).
RUNS_PAGE = REPO / "docs" / "howto-read-report.md"


def _readme_row(label: str) -> str:
    readme = RUNS_PAGE.read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith(f"| {label} |")]
    assert len(rows) == 1, label
    return rows[0]


@pytest.mark.parametrize(
    "label, file, overrides",
    [
        ("course", None, None),
        ("`example-team.yaml`", "example-team", None),
        ("`llama-3.1-70b-512xH100.yaml`", "llama-3.1-70b-512xH100", None),
        ("`deepseek-v3-2048xH800.yaml`", "deepseek-v3-2048xH800", None),
        ("`qwen3-next-80b-256xB200.yaml`", "qwen3-next-80b-256xB200", None),
    ],
)
def test_readme_table_of_the_runs_is_the_account(label, file, overrides):
    """The README's memory, communication and first-lever figures are what the account says."""
    row = _readme_row(label)
    acc = account(scenario.resolve(path(file) if file else None, overrides=overrides))
    mem, comm, first = acc["memory"], acc["communication"], acc["advice"][0]
    assert f"{mem['total'] / 1e9:.1f} of {mem['capacity'] / 1e9:.0f} GB" in row
    assert ("does not fit" in row) == (not mem["fits"])
    assert f"{comm['seconds']:.1f} s, {100 * comm['estimated_share']:.1f}%" in row
    assert f"exposed {comm['exposed_seconds']:.2f} s" in row
    time = acc["time"]
    assert f"{time['predicted_seconds']:.1f} s of {time['measured_seconds']:.1f} s" in row.replace(
        " of 120 s", " of 120.0 s"
    )
    assert f"unexplained {time['unexplained_seconds']:.1f} s" in row
    assert f"{first['lever'].replace('_', ' ')} {first['speedup']:.2f}x" in row


@pytest.mark.parametrize("name", [None, "example-team", *sorted(EXAMPLES)])
def test_the_runs_fit_with_the_settings_their_files_state(name):
    """Runs that trained fit (issue 19): the course's under course.yaml's settings, the example
    team's, Llama 3.1 70B's and DeepSeek-V3's under the recompute and FP8 storage their files
    state; each figure is the peak phase against the card's usable bytes."""
    acc = account(scenario.resolve(path(name) if name else None))
    mem = acc["memory"]
    assert mem["fits"], (name, mem["total"], mem["capacity"])
    assert mem["total"] == max(phase["bytes"] for phase in mem["phases"].values())
    assert mem["fit"] is None


def test_deepseek_states_its_recompute_and_fp8_storage():
    sc = scenario.resolve(path("deepseek-v3-2048xH800"))
    assert sc["recompute_modules"] == ["moe_act", "layernorm", "mla_up_proj"]
    assert (sc["fp8"], sc["fp8_activations"]) == ("hybrid", "moe_inputs")
    assert (sc["tensor_parallel"], sc["zero_stage"]) == (1, 1)
    # with the attention core alone recomputed (Megatron-LM's default set) it does not fit
    default = scenario.resolve(
        path("deepseek-v3-2048xH800"),
        overrides={"recompute_modules": None, "fp8": "none", "fp8_activations": "none"},
    )
    assert not account(default)["memory"]["fits"]


def test_the_runs_page_prose_on_packing_is_the_account():
    """The page's packing figures for the course: the first lever's speedup of the predicted step,
    the measured step less the seconds the model saves, and the seconds left unexplained."""
    acc = account(scenario.resolve())
    lever, time = acc["advice"][0], acc["time"]
    assert lever["lever"] == "packing"
    text = " ".join(RUNS_PAGE.read_text(encoding="utf-8").split())
    assert f"so {lever['speedup']:.2f}x of the predicted step" in text
    assert f"120 s -> {lever['step_time']:.1f} s" in text
    assert f"the {time['unexplained_seconds']:.0f} s the model leaves unexplained" in text


def test_readme_prose_on_selective_recompute_is_the_memory_model():
    """The README's 'selective recompute would need X GB' figures (the course's run with
    Megatron-LM's default set; DeepSeek-V3 with the attention core alone) are the model's."""
    from costmodel.evaluate.simulate.run import memory

    readme = RUNS_PAGE.read_text(encoding="utf-8")
    course = memory(scenario.resolve(overrides={"recompute": "selective"}), fit=False)
    assert f"would\nneed {course['total'] / 1e9:.0f} GB" in readme
    deepseek = scenario.resolve(
        path("deepseek-v3-2048xH800"), overrides={"recompute_modules": ["core_attn"]}
    )
    core_only = memory(deepseek, fit=False)
    assert not core_only["fits"]
    assert f"alone recomputed it would need {core_only['total'] / 1e9:.0f} GB" in readme


def test_the_packing_prose_is_the_courses_lever():
    """The page's sentence on the course's first lever quotes the account: packing's gain on the
    predicted step and the measured step it projects."""
    acc = account(scenario.resolve())
    first = acc["advice"][0]
    assert first["lever"] == "packing"
    text = " ".join(RUNS_PAGE.read_text(encoding="utf-8").split())
    assert f"so {first['speedup']:.2f}x of the predicted step" in text
    assert f"120 s -> {first['step_time']:.1f} s" in text
