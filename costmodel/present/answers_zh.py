"""The one answer every page gives to "what would packing give this run" and "what would
selective recompute give this run", in Chinese (issue 36: packing had two answers across the
pages, selective recompute four).

The answer is the step-time model's lever of the account (evaluate.levers.advice.answer): the
run's step before and after, their ratio, MFU on the step after, and whether the changed run fits.
The course's own arithmetic (packing: the slot ratio B·S / D; selective recompute: the ratio of
the recompute factors 1 + r/3) is quoted as what it is, the share of the work it scales, and each
sentence says why the model's answer differs from it.
"""

from __future__ import annotations

from typing import Any

from costmodel.evaluate.levers.advice import answer
from costmodel.formats import decimals, gb, short, times


def _step(ans: dict[str, Any]) -> str:
    return f"{short(ans['step_before'])} 秒 → {decimals(ans['step_time'], 1)} 秒（{times(ans['gain'])}）"


def packing(acc: dict[str, Any]) -> dict[str, Any] | None:
    """The packing answer (None for a packed run or one with no pad slot: nothing to pack)."""
    pad = acc["padding"]
    if pad["batching"] == "packed" or pad["slots"] <= acc["scenario"]["tokens_per_step"]:
        return None
    return answer(acc, "packing")


def packing_step(acc: dict[str, Any]) -> str:
    """ "120 秒 → 67.5 秒（1.78×）": the run's step before and after packing, by the model."""
    return _step(packing(acc))


def packing_why(acc: dict[str, Any]) -> str:
    """Why the model's packing answer is not the slot ratio: what the pads cost beyond the
    weight GEMMs (`attention_on_padding`), and the part of a measured step the model does not
    explain, which packing is not assumed to shorten."""
    ans, pad = packing(acc), acc["padding"]
    ratio = times(pad["packing_speedup"])
    whose = (
        "课程的前提"
        if acc["assumptions"].get("attention_on_padding", {}).get("source") == "course"
        else "场景的设定"
    )
    if acc["time"]["detail"]["attention_lengths"] == "padded":  # the kernel runs the pads
        attention = (
            f"注意力 kernel 也在 pad 上整行计算（attention_on_padding，{whose}），packing 让它"
            "按长度的平方缩短，比槽位缩得多"
        )
    else:
        attention = (
            f"注意力 kernel 已经只算真实长度（attention_on_padding，{whose}：它拿到了 "
            "cu_seqlens），packing 省不到它"
        )
    kept = ""
    if ans["step_time_from"] == "measured - saved":
        unexplained = acc["time"]["unexplained_seconds"]
        kept = f"；实测一步里模型没有解释的 {decimals(unexplained, 1)} 秒原样保留，不算进收益"
    return (
        f"槽位之比 {ratio} 只管带权重的矩阵乘（它们的耗时与槽位成正比）；{attention}{kept}。"
        f"按单步耗时模型，一步 {_step(ans)}"
    )


def selective(acc: dict[str, Any]) -> dict[str, Any] | None:
    """The selective-recompute answer (None where the run does not recompute in full: the
    course's lever ② starts from full recompute)."""
    if acc["scenario"]["recompute"] != "full":
        return None
    return answer(acc, "selective_recompute")


def selective_why(acc: dict[str, Any]) -> str:
    """The model's answer to selective recompute (Megatron-LM's default modules, or the
    scenario's), with whether it fits, beside the ratio of the recompute factors."""
    ans = selective(acc)
    proj = acc["projections"]["selective_recompute"]
    modules = "、".join(proj["modules"])
    lever = next(x for x in acc["advice"] if x["lever"] == "selective_recompute")
    fits = (
        "放得下"
        if ans["fits"]
        else f"但放不下：显存峰值 {gb(lever['peak_after'])}，超过可用的 "
        f"{gb(acc['memory']['capacity'])}"
    )
    return (
        f"按单步耗时模型，换成 selective 重算（{modules}）一步 {_step(ans)}，{fits}。"
        f"重算系数之比只看重做了多少权重 GEMM 的前向（{decimals(proj['factor_now'], 3)} → "
        f"{decimals(proj['factor_selective'], 3)}）；模型还算上注意力核心、逐元素运算和不随重算"
        "变的部分"
    )
