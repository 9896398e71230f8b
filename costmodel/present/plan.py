"""`costmodel plan` as text, JSON or CSV: the top layouts of a search (evaluate.plan.plan), the
scenario's own layout and its rank, what limits each layout, and the findings.

JSON: {"scenario", "framework", "not_offered" (what the search left out: the framework lacks it,
inputs.frameworks; null when nothing), "gpus", "gpu", "global_batch", "seq_len", "searched",
"fitting", "timed",
"least_peak_bytes", "usable_bytes", "own": a layout, "own_rank", "own_note", "own_outside"
(why the search does not generate the own layout, which the report's model then evaluates and the
plan ranks all the same; null where the search holds it),
"layouts": [a layout, ...], "findings": [{"name", "holds", "count", "of", "statement"}]}; a
layout is {"rank", "own", "layout": its scenario keys, "step_seconds", "tokens_per_s", "mfu",
"peak_bytes", "headroom_bytes", "parts": {step_time's parts, seconds}, "limit", "shares":
{"compute", "communication", "bubble"}, "versus_own"}. `versus_own` (evaluate.plan.plan_why): the
parts of the layout's step that differ from the own layout's by a visible amount (plan_why.VISIBLE
of the own step), the largest first, [{"part", "seconds" (the layout's minus the own's),
with communication_exposed "collectives": [{"name", "parallelism", "seconds"}] and
"parallelisms": [{"parallelism", "seconds"}], each visible}]; null for the own layout and where
no layout is compared (`versus_own_note` says why once: the own layout is the fastest).
"rests_on" (plan_why.rests_on): the one or two parts whose differences decide the ranking,
{"of", "parts": [{"part", "seconds", "share", "inputs"}]}, or null.

CSV: one row per layout (the top K, then the scenario's own where it is not among them), the
columns CSV_COLUMNS (`versus_own`: the text line of `why`, empty where there is none); every field through the csv writer, and each text cell through
`formats.spreadsheet_text` (never a formula in a spreadsheet); the numbers as they are.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from costmodel.evaluate.plan import plan as search
from costmodel.evaluate.plan import plan_why
from costmodel.evaluate.plan.plan_findings import findings
from costmodel.formats import printable, spreadsheet_text
from costmodel.present.words import LIMITS, STEP_PARTS

#: The CSV's columns, in order.
CSV_COLUMNS = (
    "rank",
    "own",
    "tensor_parallel",
    "pipeline_parallel",
    "pipeline_schedule",
    "virtual_pipeline",
    "context_parallel",
    "expert_parallel",
    "data_parallel",
    "micro_batch",
    "sequence_parallel",
    "fp8",
    "recompute",
    "recompute_modules",
    "zero_stage",
    "step_seconds",
    "tokens_per_s",
    "mfu",
    "peak_bytes",
    "headroom_bytes",
    "compute_share",
    "communication_share",
    "bubble_share",
    "limit",
    "versus_own",
)


def _visible(diffs: list[dict[str, Any]] | None, own: float) -> list[dict[str, Any]] | None:
    """The differences (plan_why.versus) worth a word beside the own step, and of the exposed
    communication, its collectives and parallelisms worth one."""
    if diffs is None:
        return None
    out = []
    for d in diffs:
        if plan_why.visible(d["seconds"], own):
            d = dict(d)
            for key in ("collectives", "parallelisms"):
                if key in d:
                    d[key] = [c for c in d[key] if plan_why.visible(c["seconds"], own)]
            out.append(d)
    return out


def _layout(
    plan: search.Plan, row: search.Row, rank: int | None, versus: list | None = None
) -> dict[str, Any]:
    limit = search.limits(plan, row)
    return {
        "rank": rank,
        "own": row.key == plan.own.key,
        "layout": search.layout_keys(plan, row),
        "step_seconds": row.seconds,
        "tokens_per_s": plan.tokens_per_s(row),
        "mfu": plan.mfu(row),
        "peak_bytes": row.peak_bytes,
        "headroom_bytes": row.headroom,
        "parts": dict(row.parts),
        "limit": limit["limit"],
        "shares": limit["shares"],
        "versus_own": _visible(versus, plan.own.seconds),
    }


def as_json(plan: search.Plan, top: int) -> dict[str, Any]:
    """The JSON object (module docstring)."""
    base = plan.base
    own = plan.own
    return {
        "scenario": base.name,
        "framework": base.framework,
        "not_offered": plan.extra.get("not_offered") or None,
        "gpus": base.num_gpus,
        "gpu": base.gpu,
        "global_batch": base.samples_per_step,
        "seq_len": base.seq_len,
        "searched": plan.searched,
        "fitting": plan.fitting,
        "timed": plan.timed,
        "least_peak_bytes": plan.least_peak,
        "usable_bytes": plan.extra["evaluator"].usable,
        "own": _layout(plan, own, plan.own_rank),
        "own_rank": plan.own_rank,
        "own_note": plan.own_note or None,
        "own_outside": plan.own_outside or None,
        "layouts": [
            _layout(plan, row, i + 1, versus)
            for i, (row, versus) in enumerate(zip(plan.rows[:top], plan_why.versus(plan, top)))
        ],
        "versus_own_note": plan_why.why_not(plan),
        "rests_on": plan_why.rests_on(plan, top),
        "findings": findings(plan, top),
    }


def _text(value: Any) -> Any:
    """A text cell as a spreadsheet shows it (formats.spreadsheet_text); anything else as it is."""
    return spreadsheet_text(value) if isinstance(value, str) else value


def _cells(item: dict[str, Any]) -> list[Any]:
    keys = item["layout"]
    modules = keys["recompute_modules"]
    return [
        item["rank"] if item["rank"] is not None else "",
        item["own"],
        keys["tensor_parallel"],
        keys["pipeline_parallel"],
        _text(keys["pipeline_schedule"]),
        keys["virtual_pipeline"] or "",
        keys["context_parallel"],
        keys["expert_parallel"],
        keys["data_parallel"],
        keys["micro_batch"],
        keys["sequence_parallel"],
        _text(keys["fp8"]),
        _text(keys["recompute"]),
        _text("+".join(modules)) if modules else "",
        keys["zero_stage"],
        repr(item["step_seconds"]),
        repr(item["tokens_per_s"]),
        repr(item["mfu"]),
        repr(item["peak_bytes"]),
        repr(item["headroom_bytes"]),
        repr(item["shares"]["compute"]),
        repr(item["shares"]["communication"]),
        repr(item["shares"]["bubble"]),
        _text(item["limit"]),
        _text(why(item["versus_own"])) if item["versus_own"] is not None else "",
    ]


def as_csv(plan: search.Plan, top: int) -> str:
    data = as_json(plan, top)
    items = list(data["layouts"])
    if not any(item["own"] for item in items):
        items.append(data["own"])
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for item in items:
        writer.writerow(_cells(item))
    return out.getvalue()


def settings(keys: dict[str, Any]) -> str:
    """A layout's keys in one line: "TP 8 SP, PP 4 interleaved v2, CP 1, ..., recompute none"."""
    pp = f"PP {keys['pipeline_parallel']}"
    if keys["pipeline_parallel"] > 1:
        pp += f" {keys['pipeline_schedule']}"
        if keys["virtual_pipeline"]:
            pp += f" v{keys['virtual_pipeline']}"
    recompute = keys["recompute"]
    if keys["recompute_modules"]:
        recompute += f" ({'+'.join(keys['recompute_modules'])})"
    return (
        f"TP {keys['tensor_parallel']}{' SP' if keys['sequence_parallel'] else ''}, {pp}, "
        f"CP {keys['context_parallel']}, EP {keys['expert_parallel']}, DP "
        f"{keys['data_parallel']}, mb {keys['micro_batch']}, ZeRO {keys['zero_stage']}, "
        f"recompute {recompute}{', FP8' if keys['fp8'] == 'hybrid' else ''}"
    )


def _signed(seconds: float) -> str:
    """A difference in seconds, its sign always written: "+0.31 s", "-0.042 s"."""
    return f"{seconds:+.2f} s" if abs(seconds) >= 0.1 else f"{seconds:+.3f} s"


def why(versus: list[dict[str, Any]]) -> str:
    """A layout's visible differences from the own layout (`versus_own`) in one line:
    "pipeline_bubble -0.70 s, communication_exposed +0.31 s (TP all-reduce +0.28 s)"; the
    collectives too small to name, where their sum is a tenth of the part, as "the others"."""
    if not versus:
        return f"no part differs by {plan_why.VISIBLE:.0%} of the own step"
    parts = []
    for d in versus:
        listed = d.get("collectives", ())
        split = "; ".join(f"{c['name']} {_signed(c['seconds'])}" for c in listed)
        rest = d["seconds"] - sum(c["seconds"] for c in listed)
        if listed and abs(rest) >= 0.1 * abs(d["seconds"]):  # the small ones, in sum
            split += f"; the others {_signed(rest)}"
        parts.append(f"{d['part']} {_signed(d['seconds'])}" + (f" ({split})" if split else ""))
    return ", ".join(parts)


def rests_on_line(rests: dict[str, Any]) -> str:
    """Which parts of the model the ranking rests on (plan_why.rests_on), as a statement."""
    names = " and ".join(p["part"] for p in rests["parts"])
    shares = " and ".join(f"{p['share']:.0%}" for p in rests["parts"])
    inputs = "; ".join(f"{p['part']} rests on {p['inputs']}" for p in rests["parts"])
    return (
        f"The ranking rests most on the model's {names}: {shares} of the parts' summed "
        f"|difference| between the scenario's own layout and the {rests['of']} listed besides it; "
        f"{inputs}."
    )


def _line(item: dict[str, Any]) -> str:
    rank = f"{item['rank']:>4}" if item["rank"] is not None else "   -"
    mark = "*" if item["own"] else " "
    shares = item["shares"]
    return (
        f"{rank}{mark} {item['step_seconds']:8.3f} s  {item['tokens_per_s']:12,.0f} tok/s  "
        f"MFU {item['mfu']:6.1%}  peak {item['peak_bytes'] / 1e9:6.1f} GB  "
        f"limit {item['limit']} (compute {shares['compute']:.0%}, comm "
        f"{shares['communication']:.0%}, bubble {shares['bubble']:.0%}; headroom "
        f"{item['headroom_bytes'] / 1e9:.1f} GB)\n       {settings(item['layout'])}"
    )


def as_text(plan: search.Plan, top: int) -> str:
    data = as_json(plan, top)
    lines = [
        f"costmodel plan: {printable(data['scenario'])}",
        f"{data['gpus']:,} x {data['gpu']}, global batch {data['global_batch']:,} x seq_len "
        f"{data['seq_len']:,}: {data['searched']:,} layouts searched (each with its schedules, "
        f"recompute policies and ZeRO stages), {data['fitting']:,} fit "
        f"({data['usable_bytes'] / 1e9:.1f} GB usable per GPU), {data['timed']:,} timed",
        *([f"Not searched: {data['not_offered']}"] if data["not_offered"] else []),
        "",
        f"The {len(data['layouts'])} fastest (predicted step; * the scenario's own layout):",
    ]
    for item in data["layouts"]:
        lines.append(_line(item))
        if item["versus_own"] is not None:
            lines.append(f"       vs own: {why(item['versus_own'])}")
    if data["versus_own_note"] and data["layouts"]:
        lines.append(f"No vs-own lines: {data['versus_own_note']}.")
    if not any(item["own"] for item in data["layouts"]):
        lines += ["", "The scenario's own layout:", _line(data["own"])]
    if data["own_note"]:
        lines += ["", f"Not ranked: {data['own_note']}"]
    elif data["own_rank"] is not None:
        lines += [
            "",
            f"The scenario's own layout ranks {data['own_rank']:,}: "
            f"{data['own_rank'] - 1:,} of the {data['fitting']:,} layouts that fit (each at its "
            "fastest settings) are predicted faster.",
        ]
    if data["own_outside"]:
        lines.append(
            f"The search does not generate the scenario's own layout ({data['own_outside']}): "
            "its step and memory are the report's model's, the same formulas on that one layout."
        )
    if data["rests_on"]:
        lines += ["", rests_on_line(data["rests_on"])]
    lines += ["", "Findings (from this search):"]
    lines += [
        f"  [{'holds' if f['holds'] else 'does not hold'}] {f['statement']}"
        for f in data["findings"]
    ]
    return "\n".join(lines) + "\n"


#: The columns of the handouts' table (`as_table`): the pages are Chinese (the layout's keys
#: stay as the command line writes them).
TABLE_COLUMNS = (
    "名次",
    "布局",
    "一步",
    "tokens/s",
    "MFU",
    "显存峰值",
    "限制",
    "比本场景的布局",
)


def as_table(plan: search.Plan, top: int) -> dict[str, Any]:
    """The plan as the handouts' index shows it: `columns` (TABLE_COLUMNS), `rows` (the top K,
    then the scenario's own where it is not among them; each a list of strings and whether it
    is the own layout), the `summary` line of the search and of the own rank, the `findings`."""
    data = as_json(plan, top)
    items = list(data["layouts"])
    if not any(item["own"] for item in items):
        items.append(data["own"])
    rows = [
        (
            [
                f"{item['rank']:,}" if item["rank"] is not None else "-",
                settings(item["layout"]),
                f"{item['step_seconds']:,.3f} s",
                f"{item['tokens_per_s']:,.0f}",
                f"{item['mfu']:.1%}",
                f"{item['peak_bytes'] / 1e9:.1f} GB",
                limit_words(item["limit"]),
                why_words(item["versus_own"]) if item["versus_own"] is not None else "-",
            ],
            item["own"],
        )
        for item in items
    ]
    summary = [
        f"{data['gpus']:,} × {data['gpu']}，全局 batch {data['global_batch']:,} × seq_len "
        f"{data['seq_len']:,}：搜索了 {data['searched']:,} 种布局，{data['fitting']:,} 种放得下"
        f"（每张卡可用 {data['usable_bytes'] / 1e9:.1f} GB）；下表是预测单步耗时最短的 "
        f"{len(data['layouts'])} 种。"
    ]
    if data["own_note"]:
        summary.append(f"本场景自己的布局没有排名：{own_note_words(data['own_note'])}。")
    elif data["own_rank"] is not None:
        summary.append(
            f"本场景自己的布局（高亮）排第 {data['own_rank']:,}：放得下的 {data['fitting']:,} "
            f"种布局（各取最快的设置）里有 {data['own_rank'] - 1:,} 种预测比它快。"
        )
    if data["own_outside"]:
        summary.append(
            f"搜索本身不会生成这个布局（{data['own_outside']}），它的单步耗时和显存由报告的"
            "同一套公式单独算出，照样参与排名。"
        )
    if data["versus_own_note"] and data["layouts"]:
        summary.append(f"最后一列不作比较：{_WHY_NOT[data['versus_own_note']]}。")
    if data["rests_on"]:
        summary.append(rests_on_words(data["rests_on"]))
    return {
        "columns": list(TABLE_COLUMNS),
        "rows": rows,
        "summary": summary,
        "findings": [
            f"[{'成立' if f['holds'] else '不成立'}] "
            + finding_words(f, data["findings"][0]["of"], plan.base.gpus_per_node, data["seq_len"])
            for f in data["findings"]
        ],
    }


#: Why no row is compared with the own layout (plan_why.why_not), in Chinese.
_WHY_NOT = {
    "the scenario's own layout is the fastest": "本场景自己的布局就是预测最快的",
}


def why_words(versus: list[dict[str, Any]]) -> str:
    """`why` in Chinese: the parts by their Chinese names, the exposed communication split by
    the parallelism it belongs to (the collectives' names are the command line's)."""
    if not versus:
        return f"各部分之差都不到本场景一步的 {plan_why.VISIBLE:.0%}"
    parts = []
    for d in versus:
        split = "，".join(
            f"{c['parallelism']} {_signed(c['seconds'])}" for c in d.get("parallelisms", ())
        )
        name = STEP_PARTS.get(d["part"], d["part"])
        parts.append(f"{name} {_signed(d['seconds'])}" + (f"（其中 {split}）" if split else ""))
    return "，".join(parts)


def rests_on_words(rests: dict[str, Any]) -> str:
    """`rests_on_line` in Chinese (the inputs each part rests on left to the command line)."""
    names = "、".join(STEP_PARTS.get(p["part"], p["part"]) for p in rests["parts"])
    shares = " 和 ".join(f"{p['share']:.0%}" for p in rests["parts"])
    each = "分别" if len(rests["parts"]) > 1 else ""
    return (
        f"排名主要取决于单步模型里的{names}：表中另外 {rests['of']} 个布局与本场景自己的布局"
        f"各部分之差的绝对值加起来，{each}有 {shares} 来自这里。"
    )


def limit_words(limit: str) -> str:
    """What limits a layout (evaluate.plan.plan.limits: "compute", "communication+memory", ...) in
    Chinese."""
    what, _, memory = limit.partition("+")
    return LIMITS.get(what, what) + ("（显存紧张）" if memory else "")


def own_note_words(note: str) -> str:
    """Why the scenario's own layout is not ranked (evaluate.plan.plan's `own_note`), in Chinese; the
    search's own reason, where it gives one, as the command line writes it (a code span's text)."""
    if note.startswith("the scenario's own layout does not fit"):
        return "按显存模型，它放不下"
    return note


def finding_words(f: dict[str, Any], top: int, node: int, seq_len: int) -> str:
    """A finding of evaluate.plan.plan_findings in Chinese, from its data (the command line writes
    its `statement`): `top` the layouts it is over, `node` the GPUs per node. The rule first, then
    the counts, so that the tag before it ([成立] / [不成立]) reads true."""
    name, count, of = f["name"], f["count"], f["of"]
    counted = f"{top} 个里有 {count} 个" if count < of else f"{top} 个都是"
    if name == "tp_within_node":
        return f"最快的布局把 TP 放在一个节点之内（TP ≤ 每节点 {node} 张卡）：{counted}"
    if name == "pp_across_nodes":
        return f"最快的布局用流水线并行（PP > 1）：{top} 个里有 {count} 个"
    if name == "cp_at_seq_len":
        return f"序列长度 {seq_len:,} 时，最快的布局用 CP：{top} 个里有 {count} 个"
    if name == "ep_within_node":
        return f"EP 都在 DP 之内；最快的布局把 EP 放在一个节点之内（EP ≤ {node}）：{counted}"
    if name == "recompute_forced":
        if not of:
            return f"最快的 {top} 个布局都不重算"
        if count == of:
            return f"最快的 {top} 个布局里有 {of} 个重算，都是显存逼的：去掉重算就放不下"
        return f"最快的 {top} 个布局里有 {of} 个重算，其中 {of - count} 个去掉重算也放得下"
    return f["statement"]


def render(plan: search.Plan, fmt: str, top: int) -> str:
    if fmt == "json":
        return json.dumps(as_json(plan, top), indent=2) + "\n"
    if fmt == "csv":
        return as_csv(plan, top)
    return as_text(plan, top)
