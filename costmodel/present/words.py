"""Chinese names, for the pages, of what the library names in English: GEMMs, the parts of a
step and of the memory, conventions, where a value or a shape comes from. The command line and
the JSON keep the English (issue 23, item 8: the handouts read in Chinese; identifiers, scenario
keys and plot labels stay as they are). A name this module does not know is returned as given,
so that the test of the pages' English (tests/publish/test_pages_chinese.py) finds it."""

from __future__ import annotations

import re
from typing import Any

from costmodel.derive import numeric

#: The GEMMs of costmodel.evaluate.simulate.gemms.model_gemms, by key.
GEMMS = {
    "qkv": "Q/K/V 融合投影",
    "q_a": "MLA q_a",
    "q_b": "MLA q_b",
    "q": "MLA q",
    "kv_a": "MLA kv_a",
    "kv_b": "MLA kv_b",
    "attention_output": "注意力输出投影",
    "linear_in": "线性注意力输入投影",
    "linear_out": "线性注意力输出投影",
    "dense_gate_up": "稠密 FFN gate + up",
    "dense_down": "稠密 FFN down",
    "router": "router",
    "expert_gate_up": "路由专家 gate + up",
    "expert_down": "路由专家 down",
    "shared_gate_up": "共享专家 gate + up",
    "shared_down": "共享专家 down",
    "shared_expert_gate": "共享专家的 1 列 gate",
    "mtp_projection": "MTP 投影",
    "lm_head": "lm_head",
    "attention_scores": "每头的 QKᵀ",
    "attention_values": "每头的 A·V",
}

#: What bounds a GEMM on the roofline (a row's `bound`).
BOUND = {"compute": "算力", "memory": "带宽"}

#: The parts of costmodel.evaluate.simulate.step_time's step.
STEP_PARTS = {
    "gemms": "带权重的 GEMM",
    "attention": "注意力核心",
    "linear_attention": "线性注意力",
    "memory_bound": "受带宽限制的逐元素工作",
    "kernel_overhead": "kernel 启动的固定开销",
    "recompute": "重算",
    "communication_exposed": "暴露在外的通信",
    "pipeline_bubble": "流水线气泡",
}

#: The memory model's parts: the totals of evaluate.simulate.run.memory and a phase's contents.
MEMORY_PARTS = {
    "weights": "权重",
    "gradients": "梯度",
    "optimizer": "优化器状态",
    "gathered": "ZeRO 3 聚合出的层",
    "activations": "激活",
    "logits": "logits",
    "model_states": "模型状态",
    "saved_activations": "为反向保存的激活",
    "outside_layers": "层外的激活",
    "recompute_working_set": "重算的工作集",
    "layer_gradients": "层边界的梯度",
}

#: The memory model's phases (evaluate.simulate.run.memory's `phases`).
PHASES = {
    "forward_end": "前向结束",
    "loss": "算 loss",
    "backward": "反向",
    "optimizer_step": "优化器更新",
}

#: The pipeline stage the memory figure is of (evaluate.simulate.run.memory's `stage`).
STAGES = {"only": "只有一段", "first": "第一段", "last": "最后一段"}

#: What limits a layout of `costmodel plan` (evaluate.plan.plan.limits).
LIMITS = {"compute": "计算", "communication": "通信", "bubble": "流水线气泡"}

#: Where an assumption's value comes from (the account's `assumptions`).
SOURCES = {"scenario": "场景给定", "course": "课程假设", "derived": "由其他键推出"}

#: The attention conventions (derive.numeric.CONVENTION_NAMES), by key: a phrase that reads
#: after 按 ("按课程口径（…）计"), so that no caller puts it in parentheses of its own.
CONVENTIONS = {
    "course": "课程口径（3 倍前向、全方阵）",
    "causal": "causal 口径（3 倍前向、半个方阵）",
    "flash": "FlashAttention 口径（3.5 倍前向、全方阵）",
    "flash_causal": "FlashAttention causal 口径（3.5 倍前向、半个方阵）",
}
_CONVENTION_KEYS = {name: key for key, name in numeric.CONVENTION_NAMES.items()}


def gemm(row: Any) -> str:
    """A GEMM row (a dict or a GemmRow) by its Chinese name; its English name if unknown."""
    key = row["key"] if isinstance(row, dict) else row.key
    name = row["name"] if isinstance(row, dict) else row.name
    return GEMMS.get(key, name)


def convention(name: str) -> str:
    """An attention convention, by its key or its English name (the account's `convention`)."""
    return CONVENTIONS.get(_CONVENTION_KEYS.get(name, name), name)


#: The notes of a shape's source (inputs.model_shape, evaluate.simulate.gemm_rows), as patterns.
_SHAPE_NOTES = (
    (r"config of ([^,;]+)", r"\1 的 config"),
    (r"scenario keys", "由场景的键构造"),
    (r"no GQA", "没有 GQA"),
    (r"head_dim (\d+) \(course\)", r"head_dim \1（课程的假设）"),
    (r"linear-attention projections unknown, left out", "线性注意力的投影宽度未知，不计"),
    (r"SwiGLU MLP", "SwiGLU MLP"),
    (r"FFN width 4 x hidden \(course rule\)", "FFN 宽度取 4 × hidden（课程的规则）"),
    (r"expert width (\d+) of ([^,;]+)", r"专家宽度 \1（取自 \2）"),
    (r"no shared expert", "没有共享专家"),
    (r"rows of an EP group of (\d+)", r"专家 GEMM 的行数按 \1 卡的 EP 组汇集"),
    (
        r"(\d+) KV heads at TP (\d+): (\d+) per GPU, replicated",
        r"\1 个 KV 头、TP \2：每卡 \3 个（复制）",
    ),
)


def _note(part: str) -> str:
    for pattern, words in _SHAPE_NOTES:
        if re.fullmatch(pattern, part):
            return re.sub(pattern, words, part)
    return part


def shape_source(text: str, ep: bool = True) -> str:
    """Where a GEMM row's shape comes from (its `source`: parts joined by '; ', assumptions
    after 'assumed: '), in Chinese; `ep` False leaves out the EP group's part."""
    parts = []
    for part in text.split("; "):
        if not ep and part.startswith("rows of an EP group"):
            continue
        if part.startswith("assumed: "):  # notes joined by ", " (a note may hold one itself)
            notes = part.removeprefix("assumed: ")
            for pattern, zh in _SHAPE_NOTES:
                notes = re.sub(rf"(?<![^ ,]){pattern}(?![^,])", zh, notes)
            parts.append("假设：" + notes.replace(", ", "，"))
        else:
            parts.append(_note(part))
    return "；".join(parts)


#: The sources of the GPU table (inputs.hardware), as patterns.
_GPU_SOURCES = (
    (r"(.+) (?:datasheet|data sheet)", r"\1 数据手册"),
    (r"(.+) product brief", r"\1 产品简介"),
    (r"(.+) \(secondary sources; same die as (.+)\)", r"\1（二手资料；与 \2 同一颗芯片）"),
)


def gpu_source(text: str) -> str:
    """A GPU's `source` (inputs.hardware.GPUS) in Chinese."""
    for pattern, words in _GPU_SOURCES:
        if re.fullmatch(pattern, text):
            return re.sub(pattern, words, text)
    return text


#: The notes of the FLOP counter's table (costmodel/course/flop_counter.csv, written by
#: costmodel.validate in English), by term, and by (model, term) where a run differs.
_COUNTER_NOTES = {
    "matmul_6ND": "整步的 aten.mm/addmm = 6·N·T；N 不含输入 embedding（查表：前向、反向都是 0 FLOPs）",
    "attention_core": (
        "全注意力层的 aten.bmm（QKᵀ 与 AV，整块 s×s 方阵）= 3·4·s²·attention_dim·L_full·B；"
        "softmax、causal 掩码、缩放、RoPE 是逐元素运算，不计"
    ),
    "total": (
        "计数器数到的全部，对照上面各项之和；归一化、softmax、RoPE、SiLU 与门控、残差相加、"
        "top-k 路由和 loss 是逐元素运算或归约，没有 FLOP 公式"
    ),
    "linear_attention_core_forward": (
        "只算前向；计数器没有 linalg.solve_triangular 的公式，差值恰好是 costmodel 的两次单位三角"
        "求解 H·(C−1)·(dk+dv)·T·L_linear"
    ),
    "linear_attention_core": (
        "前向加反向；costmodel 按前向的 3 倍计，计数器的反向不是前向的 2 倍：每次 solve_triangular "
        "的反向多一次 bmm（C×C 方程组的梯度）；初始状态为零，不需要梯度（第一块读状态只要 1 次 bmm，"
        "不是 2 次）；最后一块的状态更新没有用到（没有反向）"
    ),
    "linear_attention_conv": (
        "逐通道的 causal conv1d（它的权重不在 N 里）；计数器按补齐后的 s+K−1 个位置算，它的 "
        "convolution_backward 公式不考虑分组卷积（输入梯度多算了通道数倍）"
    ),
    "attention_core_varlen": (
        "全注意力层的 aten.bmm，按文档切开注意力：自定义的 attn_implementation（transformers 的 "
        "AttentionInterface）像 transformers 的 flash varlen 路径（cu_seqlens）那样从 position_ids "
        "找出文档起点，对每个文档跑模型的 eager 注意力、加 causal 掩码 = sum_of_squares_flops："
        "3·4·Σsᵢ²·attention_dim·L_full（课程口径，每个文档一块整方阵）"
    ),
    "attention_core_block_diagonal": (
        "同一行改用普通 eager：transformers 由 position_ids 建出块对角的 causal 掩码，但 QKᵀ 和 AV "
        "仍乘整块 (Σsᵢ)² 方阵 = 3·4·(Σsᵢ)²·attention_dim·L_full·1，是 varlen 项的 "
        "64²/(40²+16²+8²) = 2.13 倍；不支持 varlen 的 kernel 就要付这么多"
    ),
    "attention_core_sdpa_cpu_stock": (
        "原版 FlopCounterMode：CPU 上的 SDPA 跑 aten._scaled_dot_product_flash_attention_for_cpu "
        "及其反向，它们不在 torch 的 flop_registry 里，也不能分解：数到 0；有公式的算子"
        "（_scaled_dot_product_flash/efficient/cudnn_attention、_flash/_efficient_attention_forward）"
        "没有 CPU kernel；预测按 costmodel 的 flash 口径"
    ),
    "attention_core_flash": (
        "把 torch 自己的 SDPA 公式绑定（custom_mapping）到模型实际跑的 CPU flash 算子上再数：前向 2 个 "
        "GEMM，反向 5 个（重算 QKᵀ）= 3.5·4·s²·attention_dim·L_full·B，即 costmodel 的 flash 口径、"
        "整块方阵；torch 不看 is_causal（transformers 传的是 is_causal=True），所以不是 flash_causal"
    ),
    "attention_core_sdpa_math": (
        "sdpa_kernel(SDPBackend.MATH)：组合的 math 路径拆成 aten.bmm，整块方阵，反向是前向的 2 倍 = "
        "课程口径（3 倍），是 flash 计数的 6/7"
    ),
    ("llama-gqa-packed", "matmul_6ND"): (
        "一行 packing 了 40+16+8 三个文档，T = 长度之和 = 64；aten.mm/addmm = 6·N·T（按文档切开注意力运行）"
    ),
    (
        "llama-gqa-packed",
        "total",
    ): "按文档切开运行时数到的全部，对照 matmul_6ND + attention_core_varlen",
    (
        "llama-gqa-sdpa",
        "matmul_6ND",
    ): "CPU 上 attn_implementation=sdpa；aten.mm/addmm = 6·N·T，与 eager 相同",
    (
        "llama-gqa-sdpa",
        "total",
    ): "用 flash 公式运行时数到的全部，对照 matmul_6ND + attention_core_flash",
    ("deepseek-v3-mla-mtp", "matmul_6ND"): (
        "主模型加 1 层 MTP（transformers.modeling_layers.MtpModel.forward_layer）：aten.mm/addmm = "
        "6·(N + N_mtp)·T；N_mtp = mtp_activated_params（场景键 count_mtp）：eh_proj 2h→h、MTP 层的"
        "注意力和 MoE（router、k 个专家、共享专家），以及再用一次的共享 head"
    ),
    ("deepseek-v3-mla-mtp", "attention_core"): (
        "整步的 aten.bmm：主模型的全注意力层加 MTP 层的（各一次）= "
        "3·4·s²·attention_dim·(L_full + L_mtp)·B"
    ),
}


def counter_note(model: str, term: str, note: str) -> str:
    """A row's note of the FLOP counter's table in Chinese; the CSV's own `note` (English) for a
    row this module does not know."""
    return _COUNTER_NOTES.get((model, term), _COUNTER_NOTES.get(term, note))
