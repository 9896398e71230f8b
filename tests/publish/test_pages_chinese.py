"""Issue 23 (8): the built pages read in Chinese (the rule: tests/page_language.py). Built once
for the course (both editions) and once for a team's scenario (both editions); the conventions
page is docs/conventions.md, the project's English documentation, and is left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from page_language import blocks, english, problems

from costmodel.inputs import scenario
from costmodel.publish import handouts

ROOT = Path(__file__).resolve().parents[2]
TEAM = ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml"


def test_the_check_finds_english_sentences_spaces_and_quotes():
    page = (
        "<table><caption>The six levers, course order</caption><tr><td>structural</td>"
        "<td>yes</td><td>1.70×</td></tr></table>"
        "<p>本场景 all the top 10 layouts keep TP within a node。</p>"
        "<p>课程场景的 selective 重算（由模块推出） 给出系数 1.000</p>"
        '<p>典型 MFU 表「上述」一行，"引号"</p>'
        "<p>实测的一步里，**没有解释的 72.9 秒（60.7%）**不属于任何一项</p>"
        "<table><tr><td>dS = 2*d_h*s**2</td></tr></table>"  # a power, not emphasis
    )
    found = problems(page)
    words = english(" ".join(blocks(page)))
    assert {"the", "six", "levers", "course", "order", "structural", "yes"} <= set(words)
    assert {"all", "top", "layouts", "keep", "within", "node"} <= set(words)
    assert [t for what, t in found if what == "stray space"] == [
        "课程场景的 selective 重算（由模块推出） 给出系数 1.000"
    ]
    assert len([1 for what, _ in found if what == "quotation marks"]) == 1
    assert len([1 for what, _ in found if what == "unrendered emphasis"]) == 1


def test_the_check_passes_terms_identifiers_code_and_names():
    page = (
        "<h1>Course: Qwen3.6-35B-A3B on 40 x H20</h1>"
        "<p>把 full recompute 换成 selective recompute，micro batch = 2，"
        "<code>attention_kernel: flash</code> 与 <code>the code is not read</code>；"
        "MFU（Model FLOPs Utilization）、DeepSeek-V3、TP 1, PP 1、β(mk + kn + mn)。</p>"
        "<pre>any English at all</pre>"
    )
    assert problems(page, ("Course: Qwen3.6-35B-A3B on 40 x H20",)) == []


@pytest.fixture(scope="module")
def built(tmp_path_factory, course_handouts):
    """{label: (folder, the scenario's name)}: the course (the run's shared build,
    tests/conftest.py) and a team's, both editions each."""
    root = tmp_path_factory.mktemp("chinese")
    _, course, _ = course_handouts
    _, team = handouts.build(
        scenario_file=str(TEAM), out=root / "team", progress=False, edition="both"
    )
    return {
        "course": (course, scenario.resolve().name),
        "course student": (course / "student", scenario.resolve().name),
        "team": (team, scenario.resolve(TEAM).name),
        "team student": (team / "student", scenario.resolve(TEAM).name),
    }


@pytest.mark.parametrize("label", ["course", "course student", "team", "team student"])
def test_the_pages_read_in_chinese(built, label):
    folder, name = built[label]
    pages = sorted(folder.glob("*.html"))
    assert len(pages) >= 11
    found = {
        page.name: problems(page.read_text(encoding="utf-8"), (name,))
        for page in pages
        if page.name != "conventions.html"  # docs/conventions.md: the project's English docs
    }
    found = {page: items for page, items in found.items() if items}
    assert not found, "\n".join(
        f"{page}: {what}: {text[:160]}" for page, items in found.items() for what, text in items
    )


def test_collective_names_are_chinese_in_prose():
    """Issue 36 (5): a collective's English name in prose is English on the page (全交换, 全收集,
    全归约, 归约散射 are the pages' names); in code font, to match a table or the report, it stays."""
    for name in ("all-to-all", "all-gather", "all-reduce", "reduce-scatter"):
        assert problems(f"<p>EP 的 {name} 藏在计算后面</p>", ()), name
        assert problems(f"<p>EP 的全交换（<code>{name}</code>）藏在计算后面</p>", ()) == []
