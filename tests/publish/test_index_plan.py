"""The handouts' index carries the scenario's `costmodel plan` (issue 22): its top layouts, the
own layout marked with its rank, the findings; a model that fits nowhere gets its one line."""

import html
import re
from pathlib import Path

import pytest

from costmodel.errors import CostModelError
from costmodel.evaluate.account.account import account as evaluate_account
from costmodel.evaluate.plan import plan
from costmodel.inputs import scenario
from costmodel.present import plan as plan_text
from costmodel.publish import handouts
from costmodel.publish import index as index_page


def _rows(page: str) -> list[list[str]]:
    """The plan table's body rows, cells unescaped, the own row's marked by a leading '*'."""
    body = page.split("costmodel plan</code>", 1)[1].split("</table>", 1)[0]
    rows = []
    for cls, cells in re.findall(r'<tr class="(\w*)">(.*?)</tr>', body):
        texts = [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", cells)]
        rows.append((["*"] if cls else []) + texts)
    return rows


def test_index_shows_the_course_plan():
    sc = scenario.resolve()
    found = plan.search(sc)
    table = handouts.plan_table(sc)
    page = index_page.index_html(sc, evaluate_account(sc), [], plan=table)
    rows = _rows(page)
    top = found.rows[: plan.TOP]
    ranked = [r for r in rows if r[0] != "*" or r[1] != "-"]
    assert len(rows) == len(top) + (0 if found.own_rank and found.own_rank <= plan.TOP else 1)
    for row, want in zip(ranked, top):
        cells = row[1:] if row[0] == "*" else row
        assert cells[2] == f"{want.seconds:,.3f} s"
    own = [r for r in rows if r[0] == "*"]
    assert len(own) == 1 and own[0][1] == f"{found.own_rank:,}"
    assert (
        f"排第 {found.own_rank:,}：放得下的 {found.fitting:,} 种布局（各取最快的设置）里有 "
        f"{found.own_rank - 1:,} 种预测比它快" in html.unescape(page)
    )
    assert html.unescape(page).count("[成立]") + html.unescape(page).count("[不成立]") == len(
        plan_text.as_json(found, plan.TOP)["findings"]
    )


def test_index_says_why_no_layout_fits():
    sc = scenario.resolve(overrides={"num_gpus": 1, "measured_tokens_per_s": None})
    with pytest.raises(CostModelError) as raised:
        plan.search(sc)
    table = handouts.plan_table(sc)
    assert table == str(raised.value) and "least peak" in table
    course = scenario.resolve()  # the page around the section: any scenario's
    page = index_page.index_html(course, evaluate_account(course), [], plan=table)
    assert f"<code>{html.escape(table)}</code>" in page and "没有布局排名" in page


def test_index_without_a_plan_has_no_plan_section():
    sc = scenario.resolve()
    assert "costmodel plan" not in index_page.index_html(sc, evaluate_account(sc), [])


def test_the_index_and_08_give_the_own_layout_one_rank(course_handouts):
    """Issue 36 (3): a team build gave its own layout two ranks (the index 203 of 1,241, page 08
    112 of the 400 it drew). Page 08 now ranks it by the same exact search as the index."""
    from pathlib import Path

    _, folder, _ = course_handouts

    def text(name):
        page = (Path(folder) / name).read_text(encoding="utf-8")
        return html.unescape(re.sub(r"<[^>]+>", "", page))

    index = re.search(
        r"本场景自己的布局（高亮）排第 ([\d,]+)：放得下的 ([\d,]+) ", text("index.html")
    )
    page = re.search(
        r"自己的布局排第 ([\d,]+)：放得下的 ([\d,]+) ", text("08_optimization_path.html")
    )
    assert index and page and index.groups() == page.groups()


ROOT = Path(__file__).resolve().parents[2]
#: The course, every shipped scenario and the scenarios unlike them (tests/data).
SCENARIOS = [
    None,
    *sorted((ROOT / "scenarios").glob("*.yaml")),
    *sorted((ROOT / "tests" / "data").glob("*.yaml")),
]
#: Each Chinese finding the index prints, with when its tag is [成立]: from the counts the line
#: itself states (a rule the line does not match fails the check: a reader cannot tell it).
_EVERY = r"(?P<top>\d+) 个(?:都是|里有 (?P<count>\d+) 个)"
FINDING_RULES = (
    (re.compile(rf"^最快的布局把 TP 放在一个节点之内（TP ≤ 每节点 \d+ 张卡）：{_EVERY}$"), "all"),
    (
        re.compile(rf"^EP 都在 DP 之内；最快的布局把 EP 放在一个节点之内（EP ≤ \d+）：{_EVERY}$"),
        "all",
    ),
    (
        re.compile(r"^最快的布局用流水线并行（PP > 1）：(?P<top>\d+) 个里有 (?P<count>\d+) 个$"),
        "some",
    ),
    (
        re.compile(r"^序列长度 [\d,]+ 时，最快的布局用 CP：(?P<top>\d+) 个里有 (?P<count>\d+) 个$"),
        "some",
    ),
    (
        re.compile(r"^最快的 \d+ 个布局都不重算$|^最快的 \d+ 个布局里有 \d+ 个重算，都是显存逼的"),
        "true",
    ),
    (re.compile(r"^最快的 \d+ 个布局里有 \d+ 个重算，其中 [1-9]\d* 个去掉重算也放得下$"), "false"),
)


def finding_reads_true(line: str) -> bool:
    """`line` ("[成立] ..." or "[不成立] ...") carries the tag its own counts give."""
    tag, _, text = line.partition("] ")
    for pattern, rule in FINDING_RULES:
        found = pattern.match(text)
        if not found:
            continue
        count = found.groupdict().get("count")
        holds = {
            "all": count is None or count == found["top"],
            "some": count is not None and int(count) > 0,
            "true": True,
            "false": False,
        }[rule]
        return tag == ("[成立" if holds else "[不成立")
    return False


def test_the_finding_checker_catches_a_tag_against_its_counts():
    """The issue's line, and a tag turned round, fail the check; the lines as printed pass."""
    assert not finding_reads_true("[不成立] 最快的 10 个布局都没有用流水线并行（PP = 1）")
    assert not finding_reads_true("[成立] 最快的布局用流水线并行（PP > 1）：10 个里有 0 个")
    assert finding_reads_true("[不成立] 最快的布局用流水线并行（PP > 1）：10 个里有 0 个")
    assert not finding_reads_true(
        "[成立] 最快的布局把 TP 放在一个节点之内（TP ≤ 每节点 8 张卡）：10 个里有 7 个"
    )
    assert finding_reads_true(
        "[成立] 最快的布局把 TP 放在一个节点之内（TP ≤ 每节点 8 张卡）：10 个都是"
    )


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: "course" if p is None else p.stem)
def test_no_finding_on_the_index_reads_against_its_tag(path):
    """Issue 36 (3, 6): every finding the index prints (both editions, every build: the course,
    each scenarios/*.yaml, the test scenarios unlike them) carries the tag its own counts give,
    read from the sentence as printed."""
    table = handouts.plan_table(scenario.resolve(path))
    if isinstance(table, str):  # no layout fits: no findings
        return
    assert table["findings"]
    wrong = [line for line in table["findings"] if not finding_reads_true(line)]
    assert not wrong, wrong
