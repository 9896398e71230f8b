"""The levers' notes in Chinese, for the pages: the same reasons as costmodel.present.advice
(one sentence per reason code, from the same figures), worded for the handouts. The command line
and its JSON keep advice.NOTES' English; `note` here is what 08 and 10 show in their tables and
prose. Scenario keys and their values are written as code spans (Markdown)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from costmodel.evaluate.levers.advice import Lever, MemoryFigure, Repredicted
from costmodel.formats import decimals, gb, num, pct, short, sig4, times
from costmodel.present.words import PHASES


def _code(text: Any) -> str:
    return f"`{text}`"


def fitting(mem: MemoryFigure | dict[str, Any]) -> str:
    """A memory figure as the notes state it: the peak, its phase, and whether it fits."""
    if isinstance(mem, dict):
        mem = MemoryFigure.of(mem)
    verdict = "放得下" if mem.fits else "放不下"
    return (
        f"显存峰值 {gb(mem.peak)}（{PHASES.get(mem.phase, mem.phase)}），可用 "
        f"{gb(mem.capacity)}：{verdict}"
    )


def _step(before: float, after: float) -> str:
    """The predicted step before and after a change: "A 秒 → B 秒" only where B is shorter (a
    page's arrow is a gain), else said in words."""
    a, b = sig4(before), sig4(after)
    if a == b:
        return f"预测一步不变（{a} 秒）"
    if after < before:
        return f"预测一步 {a} 秒 → {b} 秒"
    return f"预测一步反而变长：改前 {a} 秒，改后 {b} 秒"


def _keys(changes: dict[str, Any]) -> str:
    return "、".join(_code(f"{key}: {value}") for key, value in changes.items())


def _packed(f: dict[str, Any]) -> str:
    return (
        f"文档拼进每行 {num(f['seq_len'])} 个 token 的行里：每条流水线 {sig4(f['rows'])} 个 "
        f"micro batch，而不是 {sig4(f['micro_batches'])} 个"
    )


def _fewest_modules(f: dict[str, Any]) -> str:
    how = "放得下的最少模块" if f["fits"] else "全部模块，没有一组放得下"
    return f"selective 重算（{'、'.join(_code(m) for m in f['modules'])}）：{how}"


def _estimate_exceeds_step(f: dict[str, Any]) -> str:
    return (
        f"没有杠杆：估出的通信（{sig4(f['seconds'])} 秒）比实测的一步"
        f"（{sig4(f['seconds'] / f['share'])} 秒）还长，与实测矛盾；请写入实测的 `communication_share`"
    )


def _overlap_flags(f: dict[str, Any]) -> str:
    text = f"{_keys(f['flags'])}：把暴露在外的通信（预测 {sig4(f['exposed'])} 秒）藏到计算后面"
    if "ep_overlap" in f["flags"]:
        text += (
            "（EP 的全交换藏在另一个 micro batch 的计算后面：DualPipe，或 Megatron-LM 的 "
            "1F1B 全交换重叠，这是假设）"
        )
    return text


def _measured_share(f: dict[str, Any]) -> str:
    text = f"实测的通信份额 {pct(f['share'])} 藏到计算后面"
    if f["exposed"] < f["share"]:
        text += f"（封顶于 {pct(f['exposed'])}：其余是计算在峰值下也要的时间）"
    return text


def _attention_exceeds_peak(f: dict[str, Any]) -> str:
    return (
        f"没有杠杆：按注意力的计数，这一步要 GPU 峰值的 {times(f['hfu'], 1)}，"
        "超过 GPU 的能力，与实测的单步耗时矛盾；注意力占时间的份额无从知道"
    )


def _faster_kernel(f: dict[str, Any]) -> str:
    return (
        f"flash kernel 快 {short(f['speedup'])} 倍：`attention_efficiency` "
        f"{decimals(f['efficiency'], 3)}（前向的 {short(f['forward'])} 与反向的 "
        f"{short(f['backward'])} 合成 {decimals(f['combined'], 3)}，× {short(f['speedup'])}"
        + ("，最多到 1）" if f["capped"] else "）")
    )


def _router_straggler(f: dict[str, Any]) -> str:
    return (
        f"路由专家的 GEMM（预测 {sig4(f['experts'])} 秒，按均衡负载）在负载最重的 EP rank 上，"
        f"按模拟的路由，拖后腿系数 {decimals(f['straggler'], 2)}（`router_skew` {short(f['skew'])}，"
        f"未实测时是假设）；按负载放置专家后降到 {decimals(f['greedy'], 2)}；"
        f"{_step(f['before'], f['after'])}（不是场景键，不参与合计）"
    )


def _interleaved(f: dict[str, Any]) -> str:
    text = f"气泡占预测一步的 {pct(f['share'], 1)}；每段交错 {f['chunks']} 个模型块"
    if f["indivisible"]:
        text += f"（`num_layers` {f['num_layers']} 不能被 {f['divisor']} 整除）"
    return text


def _layout(f: dict[str, Any]) -> str:
    text = f"{f['label']} {f['before']} → {f['after']}"
    if "dp" in f:
        text += f"（DP {f['dp'][0]} → {f['dp'][1]}"
        if "ep" in f:
            text += f"，EP {f['ep'][0]} → {f['ep'][1]}"
        text += "）"
    return text


def _chunked_logits(f: dict[str, Any]) -> str:
    before = f["before"]
    return (
        f"分 {f['chunks']} 块：算 loss 时留 {gb(f['logits_after'])} 的 logits，而不是 "
        f"{gb(f['logits_before'])}；峰值从 {gb(before.peak)}（{PHASES.get(before.phase)}）"
        f"降到{fitting(f['after']).removeprefix('显存峰值')}（省的是显存，不是时间）"
    )


#: The options a framework may lack (inputs.frameworks' words), in Chinese.
OPTIONS = {
    "selective recompute": "按模块的选择性重算",
    "the interleaved schedule": "交错流水线调度",
    "the zero_bubble schedule": "零气泡调度",
    "the dualpipe schedule": "DualPipe 调度",
    "TP communication overlap": "TP 通信重叠",
}


def _spaced(word: str) -> str:
    """A space before a Latin word that follows Chinese, none before a Chinese one."""
    return f" {word}" if word[:1].isascii() else word


#: reason code -> the sentence of its figures (advice.NOTES, in Chinese)
NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    "refused": lambda f: f"{_keys(f['changes'])}：重新解析时被拒绝（布局不能整除）",
    "already_packed": lambda f: "已经在 packing：没有可省的",
    "no_pad_slots": lambda f: "没有 pad 槽位：样本填满了各自的行",
    "packed": _packed,
    "selective_default": lambda f: "selective 重算（Megatron-LM 的默认模块）",
    "already_selective": lambda f: "已经是 selective 重算",
    "recompute_none": lambda f: "关掉重算",
    "recompute_already_none": lambda f: "没有收益：已经不重算",
    "fewest_modules": _fewest_modules,
    "fewest_modules_already": lambda f: "没有杠杆：场景的模块已经是放得下的最少模块",
    "no_module_set": lambda f: "没有杠杆：没有可选的模块组合",
    "estimate_exceeds_step": _estimate_exceeds_step,
    "all_overlaps_on": lambda f: "没有杠杆：模型知道的重叠都已打开",
    "overlap_flags": _overlap_flags,
    "measured_share": _measured_share,
    "micro_batch": lambda f: f"micro batch {f['size']}",
    "no_attention_core": lambda f: "没有注意力核心",
    "attention_exceeds_peak": _attention_exceeds_peak,
    "flash_kernel": lambda f: "换成 flash kernel（不保存 s × s 的分数矩阵）",
    "kernel_at_peak": lambda f: "没有杠杆：kernel 已经跑在峰值",
    "faster_kernel": _faster_kernel,
    "no_expert_parallelism": lambda f: "没有专家并行",
    "too_many_experts": lambda f: "专家太多，无法模拟",
    "no_router_skew": lambda f: "`router_skew` 为 null：没有路由的估计",
    "router_straggler": _router_straggler,
    "no_pipeline": lambda f: "没有流水线",
    "schedule_without_lever": lambda f: (
        f"没有杠杆：`pipeline_schedule` 已经是 {_code(f['schedule'])}"
    ),
    "interleaved": _interleaved,
    "layout": _layout,
    "already_fp8": lambda f: f"已经是 FP8（{_code(f['fp8'])}）",
    "no_fp8_cores": lambda f: f"没有杠杆：{f['gpu']} 没有 FP8 tensor core",
    "fp8_hybrid": lambda f: "`fp8: hybrid`：各层的 GEMM 按 FP8 峰值算（显存模型没有计入 FP8 的权重副本）",
    "already_chunked": lambda f: f"已经是 {_code(f['cross_entropy'])}",
    "chunked_logits": _chunked_logits,
    "no_logits_on_stage": lambda f: "没有杠杆：显存最满的那一段流水线没有 lm_head，没有 logits 可分块",
    "peak_without_logits": lambda f: (
        f"没有杠杆：峰值在{PHASES.get(f['before'].phase)}，那时没有 logits；把 {gb(f['logits'])} 的 "
        f"logits 分块，峰值仍是 {gb(f['before'].peak)}"
    ),
    "not_offered": lambda f: (
        f"`framework: {f['framework']}` 做不了：这个框架没有"
        f"{_spaced(OPTIONS.get(f['option'], f['option']))}（{_code(f['key'])}）"
    ),
}


def _repredicted(again: Repredicted) -> str:
    text = f"；{_step(again.before, again.after)}；{fitting(again.memory)}"
    return text if again.gain else text + "；没有收益：按模型并不更快"


def note(lever: Lever) -> str:
    """The lever's reason in Chinese (Markdown), with what the changed scenario's prediction
    says: advice.note's sentence, for the pages."""
    text = NOTES[lever.reason.code](lever.reason.facts)
    return text + (_repredicted(lever.repredicted) if lever.repredicted else "")
