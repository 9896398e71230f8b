"""The FLOP cross-check's runs, each one training step (or more) under ``FlopCounterMode`` and
the rows that compare its counts with costmodel's: the tiny models, the packed row, SDPA on
CPU, MTP."""

from __future__ import annotations

from costmodel.evaluate.simulate.linear import (
    linear_attention_conv_flops_per_token,
    linear_attention_flops_per_token,
)
from costmodel.inputs.models import shape_from_config
from costmodel.validate.flop_models import (
    CHUNK_SIZE,
    MTP_LOSS_WEIGHT,
    MTP_MODELS,
    NOTE_ATTENTION,
    NOTE_BLOCK_DIAGONAL,
    NOTE_CONV,
    NOTE_FLASH,
    NOTE_LINEAR_FWD,
    NOTE_LINEAR_TRAIN,
    NOTE_MATMUL,
    NOTE_MTP_ATTENTION,
    NOTE_MTP_MATMUL,
    NOTE_PACKED_MATMUL,
    NOTE_PACKED_TOTAL,
    NOTE_SDPA_MATH,
    NOTE_SDPA_MATMUL,
    NOTE_SDPA_STOCK,
    NOTE_SDPA_TOTAL,
    NOTE_TOTAL,
    NOTE_VARLEN,
    PACKED_DOCUMENTS,
    PACKED_MODEL,
    SDPA_MODEL,
    TINY_MODELS,
    VARLEN_ATTENTION,
    Row,
    attention_training_flops,
    matmul_training_flops,
    varlen_attention_training_flops,
)
from costmodel.validate.flop_torch import (
    build_model,
    cpu_flash_mapping,
    import_torch,
    layer_counts,
    op_counts,
    packed_inputs,
    step_counts,
)


def _linear_rows(name: str, model, ids, shape, layers, linear: list[int]) -> tuple[list[Row], int]:
    """The gated-DeltaNet rows of ``run_model`` (the core forward, the core's training step, the
    conv1d) and their predicted FLOPs; ``layers``: the training step's counts per layer, ``linear``:
    the linear-attention layers."""
    torch, _, FlopCounterMode = import_torch()
    batch, seq_len = ids.shape
    tokens = batch * seq_len
    rows = []
    per_token = linear_attention_flops_per_token(shape, CHUNK_SIZE)
    fwd_counter = FlopCounterMode(display=False, depth=None)
    with torch.no_grad(), fwd_counter:
        model(input_ids=ids)
    fwd_layers = layer_counts(fwd_counter.get_flop_counts(), model, shape.num_layers)
    rows.append(
        Row(
            name,
            "linear_attention_core_forward",
            batch,
            seq_len,
            per_token * tokens * len(linear),
            sum(fwd_layers[i].get("bmm", 0) for i in linear),
            NOTE_LINEAR_FWD,
        )
    )
    pred_linear = 3 * per_token * tokens * len(linear)
    rows.append(
        Row(
            name,
            "linear_attention_core",
            batch,
            seq_len,
            pred_linear,
            sum(layers[i].get("bmm", 0) for i in linear),
            NOTE_LINEAR_TRAIN,
        )
    )
    pred_conv = 3 * linear_attention_conv_flops_per_token(shape) * tokens * len(linear)
    rows.append(
        Row(
            name,
            "linear_attention_conv",
            batch,
            seq_len,
            pred_conv,
            sum(
                layers[i].get("convolution", 0) + layers[i].get("convolution_backward", 0)
                for i in linear
            ),
            NOTE_CONV,
        )
    )
    return rows, pred_linear + pred_conv


def run_model(name: str) -> list[Row]:
    """One training step of tiny model ``name`` under FlopCounterMode; the rows for the CSV."""
    torch, _, FlopCounterMode = import_torch()
    cfg, batch, seq_len = TINY_MODELS[name]
    shape = shape_from_config(cfg, name=name)
    model = build_model(cfg)
    vocab = shape.vocab_size
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=generator)
    tokens = batch * seq_len

    def loss_of(logits):
        return torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), ids.reshape(-1))

    counter = FlopCounterMode(display=False, depth=None)
    with counter:
        loss = loss_of(model(input_ids=ids).logits)
        loss.backward()
    flops = counter.get_flop_counts()
    total = op_counts(flops["Global"])
    layers = layer_counts(flops, model, shape.num_layers)
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]
    linear = [i for i, t in enumerate(shape.layer_types) if t == "linear_attention"]

    rows = []
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    rows.append(
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_MATMUL,
        )
    )
    pred_attention = attention_training_flops(seq_len, shape.attention_dim, len(full), batch)
    rows.append(
        Row(
            name,
            "attention_core",
            batch,
            seq_len,
            pred_attention,
            sum(layers[i].get("bmm", 0) for i in full),
            NOTE_ATTENTION,
        )
    )
    predicted_total = pred_matmul + pred_attention
    if linear:
        linear_rows, pred_linear = _linear_rows(name, model, ids, shape, layers, linear)
        rows += linear_rows
        predicted_total += pred_linear
    rows.append(
        Row(name, "total", batch, seq_len, predicted_total, sum(total.values()), NOTE_TOTAL)
    )
    return rows


def run_packed() -> list[Row]:
    """One packed row of unequal documents: per-document (varlen) attention vs the block-diagonal
    mask over the whole row."""
    cfg, _, _ = TINY_MODELS[PACKED_MODEL]
    name = f"{PACKED_MODEL}-packed"
    shape = shape_from_config(cfg, name=name)
    ids, position_ids = packed_inputs(shape.vocab_size)
    tokens = sum(PACKED_DOCUMENTS)
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]
    counted = {}
    for implementation in (VARLEN_ATTENTION, "eager"):
        model = build_model(cfg, implementation)
        flops = step_counts(
            model, ids, shape.vocab_size, position_ids=position_ids, use_cache=False
        )
        layers = layer_counts(flops, model, shape.num_layers)
        counted[implementation] = (
            op_counts(flops["Global"]),
            sum(layers[i].get("bmm", 0) for i in full),
        )
    total, varlen_bmm = counted[VARLEN_ATTENTION]
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    pred_varlen = varlen_attention_training_flops(PACKED_DOCUMENTS, shape.attention_dim, len(full))
    pred_square = attention_training_flops(tokens, shape.attention_dim, len(full), 1)
    return [
        Row(
            name,
            "matmul_6ND",
            1,
            tokens,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_PACKED_MATMUL,
        ),
        Row(name, "attention_core_varlen", 1, tokens, pred_varlen, varlen_bmm, NOTE_VARLEN),
        Row(
            name,
            "attention_core_block_diagonal",
            1,
            tokens,
            pred_square,
            counted["eager"][1],
            NOTE_BLOCK_DIAGONAL,
        ),
        Row(
            name,
            "total",
            1,
            tokens,
            pred_matmul + pred_varlen,
            sum(total.values()),
            NOTE_PACKED_TOTAL,
        ),
    ]


def run_sdpa() -> list[Row]:
    """``attn_implementation="sdpa"`` on CPU: stock counter (blind to the CPU flash ops), the
    counter with torch's SDPA formulas bound to them (flash convention), and the math backend."""
    torch, _, _ = import_torch()
    from torch.nn.attention import SDPBackend

    cfg, batch, seq_len = TINY_MODELS[SDPA_MODEL]
    name = f"{SDPA_MODEL}-sdpa"
    shape = shape_from_config(cfg, name=name)
    model = build_model(cfg, "sdpa")
    ids = torch.randint(
        0, shape.vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(1)
    )
    tokens = batch * seq_len
    full = [i for i, t in enumerate(shape.layer_types) if t == "full_attention"]

    def attention_ops(flops) -> int:
        """Everything counted in the full-attention layers except the weight matmuls."""
        layers = layer_counts(flops, model, shape.num_layers)
        return sum(n for i in full for op, n in layers[i].items() if op not in ("mm", "addmm"))

    stock = step_counts(model, ids, shape.vocab_size)
    mapped = step_counts(model, ids, shape.vocab_size, custom_mapping=cpu_flash_mapping())
    math = step_counts(model, ids, shape.vocab_size, backend=SDPBackend.MATH)
    total = op_counts(mapped["Global"])
    stock_total = op_counts(stock.get("Global", {}))
    pred_matmul = matmul_training_flops(shape.activated_params, tokens)
    pred_flash = attention_training_flops(
        seq_len, shape.attention_dim, len(full), batch, convention="flash"
    )
    pred_course = attention_training_flops(seq_len, shape.attention_dim, len(full), batch)
    return [
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            stock_total.get("mm", 0) + stock_total.get("addmm", 0),
            NOTE_SDPA_MATMUL,
        ),
        Row(
            name,
            "attention_core_sdpa_cpu_stock",
            batch,
            seq_len,
            pred_flash,
            attention_ops(stock),
            NOTE_SDPA_STOCK,
        ),
        Row(
            name,
            "attention_core_flash",
            batch,
            seq_len,
            pred_flash,
            attention_ops(mapped),
            NOTE_FLASH,
        ),
        Row(
            name,
            "attention_core_sdpa_math",
            batch,
            seq_len,
            pred_course,
            attention_ops(math),
            NOTE_SDPA_MATH,
        ),
        Row(
            name,
            "total",
            batch,
            seq_len,
            pred_matmul + pred_flash,
            sum(total.values()),
            NOTE_SDPA_TOTAL,
        ),
    ]


def run_mtp(name: str) -> list[Row]:
    """One training step of the main model and its MTP depths (transformers' ``MtpModel``)."""
    torch, _, FlopCounterMode = import_torch()
    from transformers.modeling_layers import MtpModel

    cfg, batch, seq_len = MTP_MODELS[name]
    shape = shape_from_config(cfg, name=name)
    model = build_model(cfg)
    torch.manual_seed(2)
    mtp = MtpModel(model, shape.num_mtp_layers)
    mtp.train()
    vocab = shape.vocab_size
    # s + 1 + depths tokens: the main model reads [0, s) and predicts [1, s + 1); MTP depth k
    # (from 1) reads the embeddings of [k, s + k) with the hidden states of depth k - 1 (the main
    # model for k = 1) and predicts [k + 1, s + k + 1), as in DeepSeek-V3's sequential MTP
    stream = torch.randint(
        0,
        vocab,
        (batch, seq_len + 1 + shape.num_mtp_layers),
        generator=torch.Generator().manual_seed(1),
    )
    positions = torch.arange(1, seq_len + 1)[None].expand(batch, -1)
    tokens = batch * seq_len

    def cross_entropy(logits, targets):
        return torch.nn.functional.cross_entropy(
            logits.float().reshape(-1, vocab), targets.reshape(-1)
        )

    counter = FlopCounterMode(display=False, depth=None)
    with counter:
        hidden = model.model(input_ids=stream[:, :seq_len], use_cache=False).last_hidden_state
        loss = cross_entropy(model.lm_head(hidden), stream[:, 1 : seq_len + 1])
        for depth in range(shape.num_mtp_layers):
            hidden = mtp.forward_layer(
                depth,
                hidden,
                positions + depth,
                None,
                input_ids=stream[:, 1 + depth : 1 + depth + seq_len],
            )
            targets = stream[:, 2 + depth : 2 + depth + seq_len]
            loss = loss + MTP_LOSS_WEIGHT * cross_entropy(mtp._project_to_logits(hidden), targets)
        loss.backward()
    total = op_counts(counter.get_flop_counts()["Global"])
    n_full = shape.num_full_attention_layers + shape.num_mtp_layers
    pred_matmul = matmul_training_flops(shape.activated_params + shape.mtp_activated_params, tokens)
    pred_attention = attention_training_flops(seq_len, shape.attention_dim, n_full, batch)
    return [
        Row(
            name,
            "matmul_6ND",
            batch,
            seq_len,
            pred_matmul,
            total.get("mm", 0) + total.get("addmm", 0),
            NOTE_MTP_MATMUL,
        ),
        Row(
            name,
            "attention_core",
            batch,
            seq_len,
            pred_attention,
            total.get("bmm", 0),
            NOTE_MTP_ATTENTION,
        ),
        Row(
            name,
            "total",
            batch,
            seq_len,
            pred_matmul + pred_attention,
            sum(total.values()),
            NOTE_TOTAL,
        ),
    ]
