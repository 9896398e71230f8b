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
