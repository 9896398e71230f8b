"""Each fact once (issue 21): the per-model-type switches live in ``inputs.family_flags`` and
every reader asks it; the assumptions live in ``inputs.assumptions``, each with a source."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

from costmodel import validate_memory
from costmodel.evaluate import run
from costmodel.inputs import family_flags

PACKAGE = Path(__file__).resolve().parent.parent / "costmodel"


def test_one_qk_norm_mapping_for_parameters_report_and_memory_check(monkeypatch):
    """Adding llama to the one QK-norm mapping must change all three readers: the parameter
    count, the report's memory model (run._layer_kwargs) and the check's prediction. A reader
    with its own mapping stays unchanged and fails here."""
    shape = validate_memory.model_shape("llama-gqa")
    config = SimpleNamespace(model_type="llama")
    predicted = sum(validate_memory.predicted_layer(shape, config, 0, 32, "eager").values())
    assert not shape.qk_norm
    assert not run._layer_kwargs(shape, _values(), 1)["qk_norm"]

    monkeypatch.setattr(family_flags, "QK_NORM_TYPES", (*family_flags.QK_NORM_TYPES, "llama"))
    normed = validate_memory.model_shape("llama-gqa")
    assert normed.qk_norm
    assert run._layer_kwargs(normed, _values(), 1)["qk_norm"]
    assert normed.total_params == shape.total_params + 2 * shape.head_dim * shape.num_layers
    assert sum(validate_memory.predicted_layer(normed, config, 0, 32, "eager").values()) > predicted


def _values() -> dict:
    return {
        "seq_len": 32,
        "attention_kernel": "flash",
        "framework": "megatron",
        "fp8_activations": False,
        "context_parallel": 1,
    }


def test_no_second_qk_norm_or_dtype_switch_by_model_type():
    """No module but family_flags (and the family readers' own structural choices) compares a
    model type with a list: QK-norm, the fp32 router, fp32 routing weights and the RMSNorm offset
    are asked of family_flags."""
    for name in ("qk_norm", "router_fp32", "routing_weights_fp32", "rmsnorm_offset"):
        for path in PACKAGE.rglob("*.py"):
            if path.name == "family_flags.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg == name:
                    assert not isinstance(node.value, ast.Compare | ast.Constant), (
                        f"{path}:{node.value.lineno}: {name}= set here, not from family_flags"
                    )
