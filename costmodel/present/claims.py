"""Claims-table rows for the course's claims that several pages judge: one row, worded once, from
the one verdict costmodel.evaluate.account.claims computes (issue 23: the same claim was "有出入" on 01
and "成立" on 03)."""

from __future__ import annotations

from typing import Any

from costmodel import course
from costmodel.evaluate.account import claims
from costmodel.formats import pct, times
from costmodel.inputs import scenario

#: How each candidate of reported_convention is named on a page.
CANDIDATE_NAMES = {
    "MFU": "MFU（场景的 N）",
    "HFU": "HFU（场景的 N）",
    "MFU_published": "MFU（公开激活数，含 embedding）",
    "HFU_published": "HFU（公开激活数，含 embedding）",
}


def _verdict(holds: bool | None, why: str) -> str:
    word = "无从判断" if holds is None else "成立" if holds else "有出入"
    return word + (f"：{why}" if why else "")


def course_run(ours: str, why: str = "") -> str:
    """The verdict on a figure of the course's own run (its MFU, its 68%; the claim quotes it) on
    a team's scenario: another run cannot judge it, so '无从判断', said once, with the team's
    figure by the same rule and (`why`) the input that makes it differ. Not '有出入': the
    course's figure is not wrong because the team's run is another (issue 36)."""
    return _verdict(
        None,
        f"这是课程那次运行的读数，只有课程的输入能核对；你的运行按同一算法是 {ours}"
        + (f"：{why}" if why else ""),
    )


def reported_convention_row(acc: dict[str, Any], sc: Any) -> tuple[str, str, str]:
    """The row of "the project's reported 8-10% is HFU (a little optimistic, or N a little
    larger)": the claim, what this scenario computes, the verdict (evaluate.account.claims)."""
    r = claims.reported_convention(acc, sc)
    claim = (
        "项目自报的 "
        + course.claim("nb01_reported_is_hfu")
        + "对应 HFU 口径（稍乐观，或 N 取得略大）"
    )
    hfu, gap = r["candidates"]["HFU"], r["gaps"]["HFU"]
    if r["holds"] is None:
        return (
            claim,
            f"MFU {pct(acc['mfu'])}，HFU {pct(hfu)}",
            _verdict(
                None,
                "这个区间是课程项目自报的数，只说明课程那次运行；"
                "请拿你们自己报告的利用率与 03 第 6 节的表对照",
            ),
        )
    found = f"HFU {pct(hfu)} 离区间 {100 * gap:.2f} pp" if gap > 0 else f"HFU {pct(hfu)} 在区间内"
    others = [CANDIDATE_NAMES[k] for k in r["inside"] if k != "HFU"]
    if others:
        found += f"；{'、'.join(others)}在区间内"
    closer = r["closer"]
    why = (
        f"HFU 比 MFU 离区间近，HFU 本身{'还差一点' if gap > 0 else '已在区间内'}；"
        if closer == "HFU"
        else "MFU 比 HFU 离区间近；"
        if closer == "MFU"
        else "MFU 与 HFU 离区间一样远；"
    )
    why += (
        f"把 N 换成含 embedding 的公开激活数后，{'、'.join(others)}落进区间，正是课程说的“N 取得略大”"
        if others and gap > 0
        else ""
        if gap == 0
        else "换了 N 也没有候选落进区间"
    )
    return claim, found, _verdict(r["holds"], why.rstrip("；"))


def total_params_verdict(sc: Any, acc: dict[str, Any]) -> str:
    """The verdict on "误把总参数代进 6ND，MFU 成了 68%" for a team's scenario, one wording for
    02, 03 and 09: the 68% is the course's run's (无从判断 on another run, `display.course_run`),
    and what makes the team's reading differ is its total over activated parameters."""
    wrong, ratio = acc["mfu_if_total_params"], sc.total_params / sc.activated_params
    course_sc = scenario.resolve()
    theirs = course_sc.total_params / course_sc.activated_params
    why = f"这个错把 MFU 放大“总参数 ÷ 激活参数”倍，课程的模型是 {times(theirs, 1)}，"
    why += (
        "你的模型总参数等于激活参数，这个错在你的模型上不存在"
        if ratio < 1 + 1e-9
        else f"你的模型是 {times(ratio, 2)}" + ("，超过 100%，一眼可见是错的" if wrong > 1 else "")
    )
    return course_run(pct(wrong), why)
