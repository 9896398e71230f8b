"""costmodel's FLOP terms against torch's FlopCounterMode on tiny transformers models.

Needs the extra in validate-requirements.txt (torch, transformers). Without it these tests skip,
except in CI (environment variable CI set), where a missing tool is a failure, not a skip.
"""

from pathlib import Path

import pytest
from conftest import missing

pytestmark = pytest.mark.flop_counter

REPO = Path(__file__).resolve().parents[1]
CSV_PATH = REPO / "costmodel" / "course" / "flop_counter.csv"


def _require_torch():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        missing(
            f"torch/transformers not importable ({exc}); pip install -r validate-requirements.txt"
        )


@pytest.fixture(scope="module")
def validate():
    _require_torch()
    from costmodel import validate as module

    return module


@pytest.fixture(scope="module")
def rows(validate):
    return validate.validation_rows()


def _row(rows, model, term):
    matches = [r for r in rows if r.model == model and r.term == term]
    assert len(matches) == 1, (model, term)
    return matches[0]


MODELS = ("llama-gqa", "qwen3-moe", "deepseek-v3-mla", "qwen3.5-moe-hybrid")


def test_every_tiny_model_is_validated(validate):
    assert tuple(validate.TINY_MODELS) == MODELS


@pytest.mark.parametrize("model", MODELS)
def test_matmul_term_is_exactly_6ND(rows, model):
    row = _row(rows, model, "matmul_6ND")
    assert row.counted > 0
    assert row.counted == row.predicted


@pytest.mark.parametrize("model", MODELS)
def test_attention_term_is_exact(rows, model):
    row = _row(rows, model, "attention_core")
    assert row.counted > 0
    assert row.counted == row.predicted


@pytest.mark.parametrize("model", ("llama-gqa", "qwen3-moe", "deepseek-v3-mla"))
def test_total_is_matmul_plus_attention_without_linear_attention(rows, model):
    row = _row(rows, model, "total")
    assert row.counted == row.predicted


def test_linear_attention_forward_differs_only_by_the_triangular_solves(validate, rows):
    from costmodel.inputs.models import shape_from_config

    cfg, batch, seq_len = validate.TINY_MODELS["qwen3.5-moe-hybrid"]
    shape = shape_from_config(cfg)
    row = _row(rows, "qwen3.5-moe-hybrid", "linear_attention_core_forward")
    c = validate.CHUNK_SIZE
    solves = (
        shape.linear_num_value_heads
        * (c - 1)
        * (shape.linear_key_head_dim + shape.linear_value_head_dim)
        * batch
        * seq_len
        * shape.num_linear_attention_layers
    )
    assert row.counted > 0
    assert row.predicted - row.counted == solves


def test_linear_attention_rows_are_reported(rows):
    for term in ("linear_attention_core", "linear_attention_conv"):
        row = _row(rows, "qwen3.5-moe-hybrid", term)
        assert row.counted > 0 and row.predicted > 0 and row.note


def test_attention_helper_formula(validate):
    assert validate.attention_training_flops(32, 64, 2, 2) == 3 * 4 * 32**2 * 64 * 2 * 2


def test_committed_csv_is_not_stale(validate, rows):
    expected = validate.rows_to_csv(rows)
    assert CSV_PATH.is_file(), (
        "costmodel/course/flop_counter.csv is missing: python -m costmodel.validate --out costmodel/course/flop_counter.csv"
    )
    assert CSV_PATH.read_text(encoding="utf-8") == expected, (
        "costmodel/course/flop_counter.csv is stale: python -m costmodel.validate --out costmodel/course/flop_counter.csv"
    )
