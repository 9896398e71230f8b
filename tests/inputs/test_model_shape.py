"""costmodel.inputs.model_shape: the scenario's model config is parsed once per file contents."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from costmodel.evaluate.account import account as account_module
from costmodel.inputs import model_shape, models
from costmodel.inputs.scenario import resolve


def _counting(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = models.load_shape

    def load_shape(reference):
        calls.append(str(reference))
        return real(reference)

    monkeypatch.setattr(models, "load_shape", load_shape)
    model_shape._shape_and_keys.cache_clear()
    return calls


def test_one_account_parses_the_config_once(monkeypatch):
    calls = _counting(monkeypatch)
    account_module._ACCOUNTS.clear()
    account_module.account(resolve())
    assert calls, "the account reads the course's model config"
    assert len(calls) == len(set(calls)), calls


def test_a_config_edited_on_disk_is_read_again(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    path = tmp_path / "config.json"
    shutil.copy(Path(models.__file__).parent / "presets" / "llama-3.1-8b.json", path)
    first, _ = model_shape.loaded_shape(str(path))
    model_shape.loaded_shape(str(path))
    assert len(calls) == 1
    config = json.loads(path.read_text())
    config["num_hidden_layers"] = 16
    path.write_text(json.dumps(config))
    os.utime(path, ns=(1, 1))  # a new modification time even on a coarse clock
    second, keys = model_shape.loaded_shape(str(path))
    assert len(calls) == 2
    assert (first.num_layers, second.num_layers, keys["num_layers"]) == (32, 16, 16)


def test_the_config_shape_is_the_scenarios_only_with_its_attention_width():
    """`--set hidden_size=2048` on the course: a team's width drops the course's 16 x 256 heads,
    so the account's attention width is 2048 (the course's rule); the GEMMs must then come from
    a shape of that width too, not from the config's 4096 (before, they did: the predicted step
    mixed two models)."""
    course = resolve()
    assert course.shape.attention_dim == course.attention_dim == 4096
    assert course.shape_source.startswith("config")
    team = resolve(overrides={"hidden_size": 2048})
    assert team.attention_dim == 2048
    assert team.shape.attention_dim == team.attention_dim
    assert team.shape_source.startswith("scenario keys")
