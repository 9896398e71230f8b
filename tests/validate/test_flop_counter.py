"""costmodel's FLOP terms against torch's FlopCounterMode on tiny transformers models.

Needs the extra in validate-requirements.txt (torch, transformers). Without it these tests skip,
except in CI (environment variable CI set), where a missing tool is a failure, not a skip.
"""

from pathlib import Path

import pytest
from conftest import missing, tiny_torch_runs

pytestmark = pytest.mark.flop_counter

REPO = Path(__file__).resolve().parents[2]
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
    with tiny_torch_runs():
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


# --- packed batch of unequal documents (varlen) ------------------------------------------------

PACKED = "llama-gqa-packed"


def test_packed_documents_fill_one_row(validate):
    assert validate.PACKED_DOCUMENTS == (40, 16, 8)
    assert len(set(validate.PACKED_DOCUMENTS)) > 1  # unequal documents


@pytest.mark.parametrize(
    "term", ("matmul_6ND", "attention_core_varlen", "attention_core_block_diagonal", "total")
)
def test_packed_terms_are_exact(rows, term):
    row = _row(rows, PACKED, term)
    assert (row.batch, row.seq_len) == (1, 64)
    assert row.counted > 0
    assert row.counted == row.predicted


def test_varlen_term_is_sum_of_squares(validate, rows):
    from costmodel.derive.attention import sum_of_squares_flops
    from costmodel.inputs.models import shape_from_config

    shape = shape_from_config(validate.TINY_MODELS[validate.PACKED_MODEL][0])
    d, layers = shape.attention_dim, shape.num_full_attention_layers
    varlen = _row(rows, PACKED, "attention_core_varlen")
    square = _row(rows, PACKED, "attention_core_block_diagonal")
    assert varlen.predicted == sum_of_squares_flops((40, 16, 8), d, layers, "course")
    assert varlen.predicted == 3 * 4 * (40**2 + 16**2 + 8**2) * d * layers
    assert square.predicted == validate.attention_training_flops(64, d, layers, 1)
    # padded (block-diagonal mask) over varlen: (sum s_i)^2 / sum s_i^2
    assert square.counted * (40**2 + 16**2 + 8**2) == varlen.counted * 64**2


def test_varlen_attention_is_the_block_diagonal_attention(validate):
    import torch

    varlen = validate.packed_logits(validate.VARLEN_ATTENTION)
    block_diagonal = validate.packed_logits("eager")
    one_sequence = validate.packed_logits("eager", packed=False)
    torch.testing.assert_close(varlen, block_diagonal, rtol=1e-5, atol=1e-5)
    # the documents after the first really are cut off from the ones before them
    assert not torch.allclose(block_diagonal, one_sequence, atol=1e-3)
    torch.testing.assert_close(block_diagonal[:, :40], one_sequence[:, :40], rtol=1e-5, atol=1e-5)


# --- SDPA on CPU: flash convention --------------------------------------------------------------

SDPA = "llama-gqa-sdpa"


@pytest.mark.parametrize(
    "term", ("matmul_6ND", "attention_core_flash", "attention_core_sdpa_math", "total")
)
def test_sdpa_terms_are_exact(rows, term):
    row = _row(rows, SDPA, term)
    assert row.counted > 0
    assert row.counted == row.predicted


def test_stock_counter_does_not_see_cpu_sdpa(validate, rows):
    import torch
    from torch.utils.flop_counter import flop_registry

    row = _row(rows, SDPA, "attention_core_sdpa_cpu_stock")
    assert row.counted == 0 and row.predicted > 0
    for op in validate.cpu_flash_mapping():
        assert op not in flop_registry
    assert torch.ops.aten._scaled_dot_product_flash_attention in flop_registry


def test_flash_and_math_follow_the_conventions(validate, rows):
    from costmodel.inputs.models import shape_from_config

    cfg, batch, seq_len = validate.TINY_MODELS[validate.SDPA_MODEL]
    shape = shape_from_config(cfg)
    args = (seq_len, shape.attention_dim, shape.num_full_attention_layers, batch)
    flash = _row(rows, SDPA, "attention_core_flash")
    math = _row(rows, SDPA, "attention_core_sdpa_math")
    assert flash.predicted == validate.attention_training_flops(*args, convention="flash")
    assert math.predicted == validate.attention_training_flops(*args)
    # flash 3.5x vs course 3x, both full square
    assert 6 * flash.counted == 7 * math.counted
    assert math.counted == _row(rows, "llama-gqa", "attention_core").counted


# --- MTP -------------------------------------------------------------------------------------

MTP = "deepseek-v3-mla-mtp"


@pytest.mark.parametrize("term", ("matmul_6ND", "attention_core", "total"))
def test_mtp_terms_are_exact(rows, term):
    row = _row(rows, MTP, term)
    assert row.counted > 0
    assert row.counted == row.predicted


def test_mtp_adds_its_parameters_and_one_attention_layer(validate, rows):
    from costmodel.inputs.models import shape_from_config

    cfg, batch, seq_len = validate.MTP_MODELS[MTP]
    shape = shape_from_config(cfg)
    assert shape.num_mtp_layers == 1 and shape.mtp_activated_params > 0
    tokens = batch * seq_len
    with_mtp = _row(rows, MTP, "matmul_6ND").counted
    without = _row(rows, "deepseek-v3-mla", "matmul_6ND").counted
    assert with_mtp - without == 6 * shape.mtp_activated_params * tokens
    attention = _row(rows, MTP, "attention_core").counted
    assert 2 * attention == 3 * _row(rows, "deepseek-v3-mla", "attention_core").counted


def test_mtp_layers_are_not_built_by_the_causal_lm_nor_for_qwen(validate):
    import transformers

    cfg, _, _ = validate.MTP_MODELS[MTP]
    model = validate.build_model(cfg)
    assert len(model.model.layers) == cfg["num_hidden_layers"]
    assert r"model\.layers\.61.*" in model._keys_to_ignore_on_load_unexpected
    qwen = dict(validate.TINY_MODELS["qwen3.5-moe-hybrid"][0])
    qwen["text_config"] = {**qwen["text_config"], "mtp_num_hidden_layers": 1}
    text = transformers.CONFIG_MAPPING["qwen3_5_moe"](
        **{k: v for k, v in qwen.items() if k != "model_type"}
    ).text_config
    with pytest.raises(ValueError, match="num_mtp_layers"):
        text.get_mtp_config()
