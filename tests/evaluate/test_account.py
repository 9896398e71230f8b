"""evaluate.account.account: the account counts what a team's run really does.

The keys attention_flops, attention_kernel, batching, sequence_lengths and count_mtp; the report's
additions (hardware FLOPs of attention, linear attention, lengths); the JSON staying backward
compatible. Every expected value below is worked out by hand from the scenario's inputs.
"""

import json
from pathlib import Path

import numpy as np
import pytest
from commands import cli

from costmodel.derive import attention
from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate.linear import linear_attention_training_flops
from costmodel.inputs import models, scenario
from costmodel.present import report

REPO = Path(__file__).resolve().parents[2]


def resolve(**overrides):
    return scenario.resolve(overrides=overrides)


# ------------------------------------------------------------------ attention_flops


def test_causal_halves_the_square_everywhere(course_account):
    causal = account(resolve(attention_flops="causal"))
    for reading in ("padded", "actual"):
        full, half = course_account["attention"][reading], causal["attention"][reading]
        assert half["flops_per_step"] == pytest.approx(full["flops_per_step"] / 2, rel=1e-12)
        assert half["hardware_flops_per_step"] == pytest.approx(
            full["hardware_flops_per_step"] / 2, rel=1e-12
        )
    # by hand, course at the padded length: 3 x 1/2 x 4 x 49152^2 x 4096 x 10 layers x 80
    assert causal["attention"]["padded"]["flops_per_step"] == pytest.approx(
        3 * 0.5 * 4 * 49152**2 * 4096 * 10 * 80, rel=1e-12
    )
    assert causal["attention"]["convention"] == "causal (3x, half square)"
    # MFU with attention uses the causal term: (6ND + attention + linear) / (T n P)
    a, lin = causal["attention"]["actual"], causal["linear_attention"]["flops_per_step"]
    expected = (causal["model_flops_per_step"] + a["flops_per_step"] + lin) / (120 * 40 * 148e12)
    assert a["mfu_with_attention"] == pytest.approx(expected, rel=1e-12)
    assert causal["mfu"] == course_account["mfu"]  # 6ND does not change


@pytest.mark.parametrize("bad", ["half", "Causal-ish", 1, True])
def test_attention_flops_bad_values(bad):
    with pytest.raises(CostModelError, match="attention_flops: .* expected one of full, causal"):
        resolve(attention_flops=bad)


# ------------------------------------------------------------------ attention_kernel


def test_flash_changes_hardware_not_model_flops():
    flash = account(resolve(attention_kernel="flash"))
    eager_account = account(resolve(attention_kernel="eager"))
    for reading in ("padded", "actual"):
        eager, fl = eager_account["attention"][reading], flash["attention"][reading]
        assert fl["flops_per_step"] == eager["flops_per_step"]  # model FLOPs: 3 x forward
        forward = eager["flops_per_step"] / 3
        # full recompute (r = 1): eager runs fwd + fwd again + 2 fwd = 4 fwd; flash 4.5 fwd
        assert eager["hardware_flops_per_step"] == pytest.approx(4 * forward, rel=1e-12)
        assert fl["hardware_flops_per_step"] == pytest.approx(4.5 * forward, rel=1e-12)
    assert flash["attention"]["hardware_convention"].startswith("FlashAttention")
    no_recompute = account(resolve(attention_kernel="flash", recompute="none"))
    a = no_recompute["attention"]["padded"]
    assert a["hardware_flops_per_step"] == pytest.approx(3.5 / 3 * a["flops_per_step"], rel=1e-12)


def test_flash_backward_is_derived_from_its_gemms():
    assert attention.KERNEL_BACKWARD_OVER_FORWARD["flash"] == pytest.approx(2.5)
    assert len(attention.flash_backward_gemms()) == 5  # QK^T again, dV, dP, dQ, dK


@pytest.mark.parametrize("bad", ["flash4", "", 3])
def test_attention_kernel_bad_values(bad):
    with pytest.raises(CostModelError, match="attention_kernel: .* expected one of eager, flash"):
        resolve(attention_kernel=bad)


# ------------------------------------------------------------------ batching


def test_packed_has_no_padding_slots(course):
    packed = account(resolve(batching="packed"))
    pad = packed["padding"]
    assert pad["batching"] == "packed"
    assert pad["slots"] == course["tokens_per_step"] == 80 * 28875
    assert (pad["useful_fraction"], pad["waste_fraction"], pad["packing_speedup"]) == (1, 0, 1)
    assert pad["mfu_after_packing"] == packed["mfu"]
    assert packed["projections"]["packing"]["speedup"] == 1


@pytest.mark.parametrize("bad", ["unpadded", None])
def test_batching_bad_values(bad):
    with pytest.raises(CostModelError, match="batching: .* expected one of padded, packed"):
        resolve(batching=bad)


# ------------------------------------------------------------------ sequence_lengths


def write_lengths(folder: Path, name: str, lengths) -> Path:
    path = folder / name
    if name.endswith(".npy"):
        np.save(path, np.asarray(lengths))
    elif name.endswith(".csv"):
        path.write_text("id,length\n" + "".join(f"{i},{x}\n" for i, x in enumerate(lengths)))
    else:
        path.write_text("".join(f"{x}\n" for x in lengths))
    return path


@pytest.mark.parametrize("name", ["lengths.txt", "lengths.npy", "lengths.csv"])
def test_one_exact_step(tmp_path, name):
    # 4 samples, seq_len 1000: 100, 300, 600 and 1500 (cut to 1000, 500 tokens lost)
    write_lengths(tmp_path, name, [100, 300, 600, 1500])
    (tmp_path / "team.yaml").write_text(
        f"sequence_lengths: {name}\nsamples_per_step: 4\nseq_len: 1000\n"
        "num_gpus: 4\n"  # a sample for each data-parallel pipeline
    )
    sc = scenario.resolve(tmp_path / "team.yaml")
    assert sc["tokens_per_step"] == 100 + 300 + 600 + 1000 == 2000
    assert sc["mean_tokens_per_sample"] == 500
    assert sc["sum_squared_lengths"] == 100**2 + 300**2 + 600**2 + 1000**2
    a = account(sc)
    lengths = a["lengths"]
    assert lengths["reading"] == "one step, exactly"
    assert (lengths["count"], lengths["truncated_samples"], lengths["truncated_tokens"]) == (
        4,
        1,
        500,
    )
    assert lengths["mean_of_squares"] == pytest.approx((100**2 + 300**2 + 600**2 + 1000**2) / 4)
    # attention over the real lengths: 3 x 4 x sum(s_i^2) x d x L_full (course: d 4096, 10 layers)
    assert a["attention"]["actual"]["flops_per_step"] == pytest.approx(
        12 * 1_460_000 * 4096 * 10, rel=1e-12
    )
    # the course's B x mean^2 would have said 4 x 500^2 = 1,000,000: 32% low
    assert a["attention"]["actual"]["sum_squared_lengths_from"] == "sequence_lengths"
    assert a["padding"]["slots"] == 4 * 1000


def test_a_distribution_is_scaled(tmp_path):
    write_lengths(tmp_path, "l.txt", [1000, 3000])
    (tmp_path / "t.yaml").write_text("sequence_lengths: l.txt\nsamples_per_step: 80\n")
    sc = scenario.resolve(tmp_path / "t.yaml")
    assert sc["mean_tokens_per_sample"] == 2000
    assert sc["tokens_per_step"] == 80 * 2000
    assert sc["sum_squared_lengths"] == pytest.approx(80 * (1000**2 + 3000**2) / 2)
    summary = account(sc)["lengths"]
    assert summary["reading"].startswith("a distribution, scaled to samples_per_step = 80")
    # the two-sample check of the issue: B x mean^2 is 20% below the real sum of squares
    assert 80 * 2000**2 / sc["sum_squared_lengths"] == pytest.approx(0.8)


def test_lengths_path_is_relative_to_the_scenario_file(tmp_path):
    sub = tmp_path / "data"
    sub.mkdir()
    write_lengths(sub, "l.txt", [10, 20])
    (sub / "t.yaml").write_text("sequence_lengths: l.txt\n")
    other = tmp_path / "elsewhere"
    other.mkdir()
    result = cli("report", "--scenario", str(sub / "t.yaml"), "--format", "json", cwd=other)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["lengths"]["mean"] == 15


@pytest.mark.parametrize(
    "content, message",
    [
        ("", "a file with no lengths is not allowed"),
        (
            "100\nabc\n",
            "line 2 (not a positive integer) is not allowed; expected a positive integer",
        ),
        ("100\n0\n", "line 2 (not a positive integer) is not allowed"),
        ("-5\n", "line 1 (not a positive integer) is not allowed"),
        ("1.5\n", "line 1 (not a positive integer) is not allowed"),
        ("200000000\n", "line 1 (a length above 100,000,000) is not allowed"),
    ],
)
def test_bad_lengths_files(tmp_path, content, message):
    (tmp_path / "l.txt").write_text(content)
    (tmp_path / "t.yaml").write_text("sequence_lengths: l.txt\n")
    result = cli("report", "--scenario", str(tmp_path / "t.yaml"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert result.stderr.startswith("costmodel: error: sequence_lengths '")


def test_bad_csv_and_npy(tmp_path):
    (tmp_path / "a.csv").write_text("id,len\n1,5\n")
    with pytest.raises(CostModelError, match="expected a 'length' column"):
        resolve(sequence_lengths=str(tmp_path / "a.csv"))
    np.save(tmp_path / "b.npy", np.ones((2, 2), dtype=np.int64))
    with pytest.raises(CostModelError, match="expected a 1-D array"):
        resolve(sequence_lengths=str(tmp_path / "b.npy"))
    np.save(tmp_path / "c.npy", np.array([1.5, 2.0]))
    with pytest.raises(CostModelError, match=r"sample 1 \(not a whole number\)"):
        resolve(sequence_lengths=str(tmp_path / "c.npy"))
    np.save(tmp_path / "d.npy", np.array(["x"], dtype=object), allow_pickle=True)
    with pytest.raises(CostModelError, match="an array of Python objects is not allowed"):
        resolve(sequence_lengths=str(tmp_path / "d.npy"))
    with pytest.raises(CostModelError, match="no such file"):
        resolve(sequence_lengths=str(tmp_path / "missing.txt"))


def test_lengths_and_a_mean_together_are_refused(tmp_path):
    write_lengths(tmp_path, "l.txt", [10])
    with pytest.raises(CostModelError, match="not allowed with sequence_lengths"):
        resolve(sequence_lengths=str(tmp_path / "l.txt"), mean_tokens_per_sample=10)


# ------------------------------------------------------------------ count_mtp


def test_count_mtp_adds_the_mtp_layers():
    shape = models.load_shape("qwen3.6-35b-a3b")
    base = scenario.resolve(data={"model": "qwen3.6-35b-a3b"})
    mtp = scenario.resolve(data={"model": "qwen3.6-35b-a3b", "count_mtp": True})
    assert shape.num_mtp_layers == 1
    assert mtp["activated_params"] == base["activated_params"] + shape.mtp_activated_params
    assert mtp["total_params"] == base["total_params"] + shape.mtp_params
    assert mtp["num_full_attention_layers"] == base["num_full_attention_layers"] + 1
    # by hand, the MTP layer's matmuls per token: projection 2h x h, the gated attention of a
    # full layer, router, 8 of 256 experts, the shared expert and its gate, the head again
    h = 2048
    attention_weights = h * (16 * 256 * 2) + 2 * h * (2 * 256) + 16 * 256 * h
    moe = 256 * h + 8 * 3 * h * 512 + 3 * h * 512 + h
    assert shape.mtp_activated_params == 2 * h * h + attention_weights + moe + 248320 * h


def test_deepseek_v3_mtp_module_is_about_the_published_14b():
    shape = models.load_shape(str(REPO / "tests" / "configs" / "deepseek-v3.json"))
    # DeepSeek-V3 publishes 671B main model + 14B MTP module; the module's unique weights are
    # its 14B less the embedding and head it shares with the main model (2 x 129280 x 7168)
    assert shape.mtp_params + 2 * 129280 * 7168 == pytest.approx(14e9, rel=0.05)


def test_count_mtp_errors():
    with pytest.raises(CostModelError, match="count_mtp: true is not allowed without model"):
        resolve(count_mtp=True)
    with pytest.raises(CostModelError, match="^count_mtp: true is not allowed; model 'llama"):
        resolve(model="llama-3.1-8b", count_mtp=True)
    with pytest.raises(CostModelError, match="count_mtp: 'yes please' .* expected true or false"):
        resolve(count_mtp="yes please")


def test_params_shows_the_mtp_parameters():
    out = cli("params", "qwen3.6-35b-a3b").stdout
    assert "1 MTP layer(s): 844,640,768 parameters" in out
    assert "activated_params_with_mtp" in out
    data = json.loads(cli("params", "qwen3.6-35b-a3b", "--format", "json").stdout)
    assert data["activated_params_with_mtp"] == data["activated_params"] + 573_048_832


# ------------------------------------------------------------------ linear attention


def test_linear_attention_in_the_account(course_account):
    lin = course_account["linear_attention"]
    shape = models.load_shape("qwen3.6-35b-a3b")
    tokens = 80 * 28875
    expected = linear_attention_training_flops(shape, tokens)
    assert lin["layers"] == 30 and lin["flops_per_step"] == pytest.approx(expected, rel=1e-12)
    # its share of 6ND + attention at the real lengths + itself: 1.44% for the course
    att = course_account["attention"]["actual"]["flops_per_step"]
    total = course_account["model_flops_per_step"] + att + expected
    assert lin["share"] == pytest.approx(expected / total, rel=1e-12)
    assert round(100 * lin["share"], 2) == 1.44
    assert lin["hardware_flops_per_step"] == pytest.approx(4 / 3 * expected, rel=1e-12)


def test_no_linear_attention_for_dense_models():
    a = account(scenario.resolve(data={"model": "llama-3.1-8b"}))
    assert a["linear_attention"] is None


def test_unknown_linear_widths_are_said_not_guessed():
    a = account(resolve(hidden_size=4096))  # hybrid layout, no config for these keys
    lin = a["linear_attention"]
    assert lin["flops_per_step"] is None and "not counted" in lin["note"]
    assert "unknown" in report.render(a)


# ------------------------------------------------------------------ the JSON


#: Every key of the JSON before issue 10 (backward compatible: keys only added).
OLD_KEYS = {
    "": {
        "model_flops_per_step",
        "hardware_flops_per_step",
        "recompute_factor",
        "mfu",
        "hfu",
        "padding",
        "attention",
        "projections",
        "logits_bytes",
        "machine_balance",
        "tokens_per_expert",
        "scenario",
        "mfu_from_measured_tokens_per_s",
        "mfu_if_total_params",
    },
    "padding": {
        "slots",
        "useful_fraction",
        "waste_fraction",
        "packing_speedup",
        "mfu_after_packing",
        "step_time_after_packing",
    },
    "attention": {"convention", "padded", "actual"},
}


def test_json_keys_only_added():
    data = json.loads(cli("report", "--format", "json").stdout)
    assert OLD_KEYS[""] <= set(data)
    assert OLD_KEYS["padding"] <= set(data["padding"])
    assert OLD_KEYS["attention"] <= set(data["attention"])
    for reading in ("padded", "actual"):
        assert {"seq_len", "flops_per_step", "share", "mfu_with_attention"} <= set(
            data["attention"][reading]
        )
        assert "hardware_flops_per_step" in data["attention"][reading]
    assert {"flops_per_step", "hardware_flops_per_step", "share"} <= set(data["linear_attention"])
    assert data["lengths"] is None


def test_the_keys_in_the_docs():
    explained = (REPO / "docs" / "scenarios.md").read_text(encoding="utf-8")
    for key in ("attention_flops", "attention_kernel", "sequence_lengths", "batching", "count_mtp"):
        assert f"`{key}`" in explained, key
    assert "costmodel gemms" in (REPO / "README.md").read_text(encoding="utf-8")


def test_handouts_pass_the_lengths_file_as_an_absolute_path(tmp_path, monkeypatch):
    from costmodel.publish.handouts import user_layer

    (tmp_path / "data").mkdir()
    write_lengths(tmp_path / "data", "l.txt", [10, 20])
    (tmp_path / "data" / "t.yaml").write_text("sequence_lengths: l.txt\n")
    monkeypatch.chdir(tmp_path)
    layer = user_layer("data/t.yaml", {})
    assert layer["sequence_lengths"] == str(tmp_path / "data" / "l.txt")
    layer = user_layer(None, {"sequence_lengths": "data/l.txt"})
    assert layer["sequence_lengths"] == str(tmp_path / "data" / "l.txt")
    # the notebooks resolve the same scenario from any folder
    monkeypatch.chdir("/")
    assert scenario.resolve(data=layer)["mean_tokens_per_sample"] == 15


def test_a_padded_step_faster_than_its_slots_allow_is_refused():
    # DeepSeek-V3 on the course's 40 x H20 in 120 s: 6 x 36.6e9 x (80 x 49,152 slots) x 4/3
    # = 1.15e18 FLOPs, 162% of 120 s x 40 x 148e12, though its MFU on real tokens is 95%
    deepseek = str(REPO / "tests" / "configs" / "deepseek-v3.json")
    result = cli("report", "--set", f"model={deepseek}")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "HFU counting the padded slots = 162.18% is not allowed" in result.stderr
    packed = account(scenario.resolve(data={"model": deepseek, "batching": "packed"}))
    assert packed["hfu"] == pytest.approx(162.18 / 100 / (49152 / 28875), rel=1e-4)
    assert packed["padding"]["hfu_of_slots"] == packed["hfu"]


def test_account_is_worked_out_once_and_each_caller_gets_its_own_copy():
    """A kernel that runs the suite asks for the scenario's account in every notebook: the
    second time it comes from the process's cache, equal to the first and not the same object
    (a caller that changes its copy changes nobody else's); a scenario with the same values but
    a value from another source has its own account (the assumptions name the source)."""
    course = scenario.resolve()
    first = account(course)
    first["mfu"] = -1.0
    first["memory"]["total"] = -1.0
    second = account(course)
    assert second["mfu"] > 0 and second["memory"]["total"] > 0
    assert second == account(scenario.resolve())
    team = scenario.resolve(
        overrides={"expert_parallel": course["expert_parallel"], "name": course["name"]}
    )
    assert team.values == course.values and team.sources != course.sources
    assert second["assumptions"]["expert_parallel"]["source"] == "course"
    assert account(team)["assumptions"]["expert_parallel"]["source"] == "scenario"
