"""Scenarios that name a model (`model:` a preset or a config.json), and `costmodel params`."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.evaluate.account.account import account
from costmodel.inputs import models, scenario

QWEN36_N = 2_945_269_760  # matmul parameters per token (lm_head in, input embedding out)


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "costmodel", *args], capture_output=True, text=True
    )


def test_preset_fills_the_model_keys():
    sc = scenario.resolve(overrides={"model": "qwen3.6-35b-a3b"})
    assert sc["activated_params"] == QWEN36_N
    assert sc["total_params"] == 34_660_610_688
    assert (sc["attention_dim"], sc["num_full_attention_layers"], sc["num_layers"]) == (
        4096,
        10,
        40,
    )
    assert sc.sources["activated_params"] == "model"


def test_explicit_keys_win_over_the_model():
    sc = scenario.resolve(data={"model": "qwen3.6-35b-a3b", "activated_params": 3e9})
    assert sc["activated_params"] == 3_000_000_000
    assert sc["total_params"] == 34_660_610_688


def test_model_path_is_relative_to_the_scenario_file(tmp_path):
    (tmp_path / "cfg").mkdir()
    shutil.copy(
        Path(models.__file__).parent / "presets" / "llama-3.1-8b.json",
        tmp_path / "cfg" / "config.json",
    )
    team = tmp_path / "team.yaml"
    team.write_text("model: cfg/config.json\nnum_experts: 0\nexperts_per_token: 0\n")
    sc = scenario.resolve(team)
    assert (
        sc["activated_params"]
        == models.load_shape(str(tmp_path / "cfg" / "config.json")).activated_params
    )
    assert sc["attention_dim"] == 4096 and sc["num_full_attention_layers"] == 32


def test_example_team_scenario_differs_from_the_course():
    root = Path(__file__).resolve().parents[2]
    sc = scenario.resolve(root / "scenarios" / "example-team.yaml")
    changed = set(sc.changed)
    assert {"activated_params", "num_layers", "num_heads", "gpu", "seq_len"} <= changed
    assert account(sc)["mfu"] != account(scenario.resolve())["mfu"]


def test_params_json():
    result = cli("params", "qwen3.6-35b-a3b", "--format", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in [
        "total_params",
        "activated_params",
        "embedding_params",
        "lm_head_params",
        "attention_dim",
        "num_layers",
        "num_full_attention_layers",
        "num_experts",
        "experts_per_token",
    ]:
        assert key in data
    assert data["activated_params"] == QWEN36_N
    assert data["activated_params_published"] == 3_454_988_928
    assert data["embedding_params"] == 508_559_360


def test_params_text_names_both_counts():
    result = cli("params", "qwen3.6-35b-a3b")
    assert result.returncode == 0
    assert "2,945,269,760" in result.stdout and "3,454,988,928" in result.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["params", "/no/such/config.json"], "/no/such/config.json"),
        (["report", "--set", "model=/no/such/config.json"], "/no/such/config.json"),
    ],
)
def test_bad_model_one_line(args, message):
    result = cli(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_unsupported_model_type(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt_bigcode", "n_embd": 768}))
    result = cli("params", str(path))
    assert result.returncode == 2
    assert "gpt_bigcode" in result.stderr and "llama" in result.stderr
