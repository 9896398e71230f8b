"""The index of the handouts (index.html of an edition: the scenario's headline numbers, a link
to each section with its one-line summary, the scenario's inputs with those that differ from the
course's highlighted) and the banner above every page."""

from __future__ import annotations

import html
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from costmodel.formats import printable, seconds, table_value
from costmodel.publish.pages import EDITION_NAMES, FONT_STACK, SCREEN_CSS, Section

if TYPE_CHECKING:
    from costmodel.inputs import scenario


def _fields() -> list[str]:
    from costmodel.inputs import scenario

    return list(scenario.FIELDS)


def shown_value(key: str, value: Any) -> str:
    """A scenario value as the pages print it: a file (a model's config.json, a lengths file) by
    its name, not by the absolute path the build made of it (a path of the machine that built
    the pages, and a team's folders, in every banner and booklet); a preset name as it is."""
    from costmodel.inputs.fields import FIELDS

    if isinstance(value, str) and key in FIELDS and FIELDS[key].kind in ("path", "file"):
        value = PurePath(value).name or value
    return printable(table_value(value))


def banner(sc: scenario.Scenario, account: dict[str, Any], inputs: dict[str, Any], edition: str):
    """The line above every page: the scenario, the edition, the MFU and the inputs it was run
    with (the parameters cells are not shown; a file by its name, shown_value). Plain text,
    control characters shown escaped: the template HTML-escapes it."""
    changed = ", ".join(f"{key}={shown_value(key, value)}" for key, value in inputs.items())
    return (
        f"{printable(sc.name)} · {EDITION_NAMES[edition]} · MFU {100 * account['mfu']:.2f}%"
        + ("（单步耗时为预测值）" if account["time"]["measured_seconds"] is None else "")
        + " · "
        + (f"输入：课程场景 + {changed}" if changed else "输入：课程场景")
        + " · costmodel 讲义"
    )


def _step_seconds(value: float) -> str:
    return seconds(value) if abs(value) >= 1 else f"{value:.3g} s"


def step_cards(t: dict[str, Any]) -> list[tuple[str, str]]:
    """The index cards of the step-time model: the predicted step beside the measured one and
    the unexplained remainder (said plainly when negative), or the predicted step alone, labelled
    predicted, when the scenario's step_time is null."""
    predicted = _step_seconds(t["predicted_seconds"])
    if t["measured_seconds"] is None:
        return [("单步耗时（预测值：step_time 为空）", predicted)]
    unexplained = t["unexplained_seconds"]
    return [
        ("单步耗时（实测）", _step_seconds(t["measured_seconds"])),
        ("单步耗时（模型预测）", predicted),
        (
            "未解释部分（实测 − 预测）"
            + ("；为负：模型预测的一步比实测的长" if unexplained < 0 else ""),
            f"{_step_seconds(unexplained)} ({100 * t['unexplained_share']:.1f}%)",
        ),
    ]


def _input_rows(sc: scenario.Scenario) -> str:
    """The scenario's inputs, one table row a key (a file by its name, shown_value), those that
    differ from the course's marked. A step the scenario leaves null is the step-time model's
    prediction (account.fill_step_time), not an input the team changed: its row says null and
    the prediction the pages use."""
    changed = set(sc.changed)
    rows = []
    for key in _fields():
        if key == "name":
            continue
        value, note = shown_value(key, sc.values[key]), "已改动" if key in changed else ""
        if key == "step_time" and sc.step_time_from == "predicted":
            predicted = "" if sc.step_time is None else f" {_step_seconds(sc.step_time)}"
            value, note = "null", f"未实测：各页用模型预测的单步耗时{predicted}"
            changed.discard(key)
        rows.append(
            f'<tr class="{"changed" if key in changed else ""}"><td><code>{key}</code></td>'
            f"<td><code>{html.escape(value)}</code></td><td>{html.escape(note)}</td></tr>"
        )
    return "".join(rows)


def _attention_cards(account: dict[str, Any]) -> list[tuple[str, str]]:
    """The attention core's share: at the padded length and at the real lengths; a packed run
    pads nothing, so its one card is the real (per-document) lengths' (a padded-length figure
    would describe a run it is not)."""
    att = account["attention"]
    actual = f"{100 * att['actual']['share']:.1f}%"
    if account["padding"]["batching"] == "packed":
        return [(f"注意力占比（packing，按文档长度，{att['attention_flops']}）", actual)]
    return [
        (
            f"注意力占比（补齐长度，{att['attention_flops']}）",
            f"{100 * att['padded']['share']:.1f}%",
        ),
        (f"注意力占比（真实长度，{att['attention_flops']}）", actual),
    ]


def _cards(account: dict[str, Any]) -> str:
    """The headline numbers, one card each."""
    predicted = account["time"]["measured_seconds"] is None
    headline = [
        ("MFU" + ("（单步耗时为预测值）" if predicted else ""), f"{100 * account['mfu']:.2f}%"),
        *step_cards(account["time"]),
        ("HFU" + ("（单步耗时为预测值）" if predicted else ""), f"{100 * account['hfu']:.2f}%"),
        *_attention_cards(account),
        ("padding 浪费", f"{100 * account['padding']['waste_fraction']:.1f}%"),
    ]
    return "".join(
        f'<div class="card"><div class="v">{v}</div><div>{html.escape(k)}</div></div>'
        for k, v in headline
    )


def _items(sections: list[Section]) -> str:
    """One list item a section: a link and its summary, or why it failed (and whether its page
    is the previous build's)."""
    items = []
    for s in sections:
        if s.error and s.stale:
            items.append(
                f'<li class="failed"><a href="{s.page}">{html.escape(s.stem)}</a> — '
                f"未更新：本次构建失败（{html.escape(s.error)}），此页是上一次构建的</li>"
            )
        elif s.error:
            items.append(
                f'<li class="failed"><strong>{html.escape(s.stem)}</strong> — 失败：'
                f"{html.escape(s.error)}</li>"
            )
        else:
            items.append(
                f'<li><a href="{s.page}">{html.escape(s.title or s.stem)}</a>'
                f'<div class="summary">{html.escape(s.summary)}</div></li>'
            )
    return "".join(items)


def _editions(edition: str, others: dict[str, str] | None) -> str:
    """The line that names the edition and links the other one."""
    solutions = "" if edition == "teacher" else "：解答的位置留出了作答区"
    links = "".join(
        f'另一版本：<a href="{link}index.html">{EDITION_NAMES[e]}</a>。'
        for e, link in (others or {}).items()
    )
    return f"版本：<strong>{EDITION_NAMES[edition]}</strong>{solutions}。{links}"


def plan_section(plan: dict[str, Any] | str | None) -> str:
    """The index's section of `costmodel plan` for the scenario: the table of
    present.plan.as_table (the own layout's row marked), or the one line that says why there is
    none (a model that fits nowhere, a search too large, an N its shape contradicts)."""
    if plan is None:
        return ""
    head = (
        "<h2>放得下的并行布局，按预测的一步排序（<code>costmodel plan</code>）</h2>"
        "<p>本场景的模型、全局 batch 和序列长度在它的 GPU 上所有可行的并行布局，按单步耗时模型预测的"
        "一步排序；放不放得下由显存模型判断。布局一列是它的场景键，照录命令行 <code>costmodel plan</code> "
        "的写法。</p>"
    )
    if isinstance(plan, str):  # the command line's one line, as it writes it
        return (
            f'{head}<p class="failed">没有布局排名，<code>costmodel plan</code> 拒绝了这次搜索，原因：'
            f"<code>{html.escape(plan)}</code></p>"
        )
    columns = "".join(f"<th>{html.escape(c)}</th>" for c in plan["columns"])
    rows = "".join(
        f'<tr class="{"changed" if own else ""}">'
        + "".join(
            f"<td><code>{html.escape(cell)}</code></td>"
            if i == 1
            else f"<td>{html.escape(cell)}</td>"
            for i, cell in enumerate(cells)
        )  # the layout's keys (the second column) as code
        + "</tr>"
        for cells, own in plan["rows"]
    )
    summary = "".join(f"<p>{html.escape(line)}</p>" for line in plan["summary"])
    findings = "".join(f"<li>{html.escape(line)}</li>" for line in plan["findings"])
    return (
        f'{head}{summary}<table class="plan"><thead><tr>{columns}</tr></thead>'
        f"<tbody>{rows}</tbody></table>"
        f"<h3>这次搜索得出的规律</h3><ul>{findings}</ul>"
    )


def index_html(
    sc: scenario.Scenario,
    account: dict[str, Any],
    sections: list[Section],
    edition: str = "teacher",
    others: dict[str, str] | None = None,
    plan: dict[str, Any] | str | None = None,
) -> str:
    """The index page. `plan`: the scenario's `costmodel plan` (`plan_section`), or None."""
    title = html.escape(printable(sc.name))
    return f"""<!DOCTYPE html>
<html lang="zh-CN"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<style>
body {{ font-family: {FONT_STACK}; max-width: 60rem; margin: 2rem auto; padding: 0 1rem;
  color: #1f2328; line-height: 1.5; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid #d0d7de;
  padding: 2px 10px; text-align: left; }}
tr.changed td {{ background: #fff8c5; font-weight: 600; }}
table.plan th, table.plan td {{ white-space: nowrap; }} table.plan td:nth-child(2),
table.plan td:nth-child(2) code {{ white-space: normal; }}
.cards {{ display: flex; flex-wrap: wrap; gap: 12px; margin: 1rem 0; }}
.card {{ border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 9rem; }}
.card .v {{ font-size: 1.6rem; font-weight: 700; }}
li {{ margin: 0.5rem 0; }} .summary {{ color: #57606a; }} .failed {{ color: #cf222e; }}
@page {{ size: A4; margin: 15mm; }}
{SCREEN_CSS}</style></head>
<body>
<main>
<h1>{title}</h1>
<p>课程第 06 节，按本场景重新执行；页上的数字都由 costmodel 计算。</p>
<p class="edition">{_editions(edition, others)}</p>
<h2>主要数字</h2>
<div class="cards">{_cards(account)}</div>
<h2>各节</h2>
<ol>{_items(sections)}</ol>
{plan_section(plan)}
<h2>场景输入</h2>
<p>高亮的行与课程场景不同。</p>
<table><thead><tr><th>键</th><th>值</th><th></th></tr></thead><tbody>{_input_rows(sc)}</tbody></table>
</main>
</body></html>
"""
