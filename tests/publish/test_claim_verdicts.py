"""One verdict per course claim across the handouts (issue 36, 1 and 2): the course's packing gain
was judged 成立 on the slot ratio in five claim rows while section 08's step-time model said
otherwise, and selective recompute had four gains. Every page now answers "what would packing /
selective recompute give this run" with the report's lever (costmodel.present.answers_zh), so a
course figure gets the same verdict wherever it is judged, in both editions."""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path

#: A claims-table row: its cells (tags dropped, entities read).
ROW = re.compile(r"<tr>(.*?)</tr>", re.S)
CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)
#: A course figure as the pages quote it (costmodel.course.claim): "1.70×（课程 06.4）", the
#: number read from the first digit before it.
FIGURE = re.compile(r"([^：，、（；]*?)（课程 ([^）]*)）")
VERDICT = re.compile(r"^(成立|有出入|无从判断|不成立|不适用)")
#: Course figures that more than one distinct claim quotes, each with its own verdict: the figure
#: is not the claim. The H20's balance point holds as a number; the claim that micro batch 1
#: pushes many operators down to it is judged on the GEMMs' intensities (06 and 07 agree on it).
SEVERAL_CLAIMS = {"37 FLOP/byte（课程 06.6）"}


def verdicts(folder: Path) -> dict[str, set[tuple[str, str]]]:
    """figure -> {(page, verdict)} of every claims-table row of the pages in `folder`."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for page in sorted(folder.glob("*.html")):
        for row in ROW.findall(page.read_text(encoding="utf-8")):
            cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in CELL.findall(row)]
            if len(cells) < 3:
                continue
            verdict = VERDICT.match(cells[-1])
            if not verdict:
                continue
            for before, section in FIGURE.findall(cells[0]):
                number = re.search(r"\d.*", before)
                if number:
                    figure = f"{number.group(0).strip()}（课程 {section}）"
                    found[figure].add((page.stem[:2], verdict.group(1)))
    return found


def disagreements(folders: list[Path]) -> dict[str, set[tuple[str, str]]]:
    """The figures judged with more than one verdict over the pages of `folders`."""
    merged: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for folder in folders:
        for figure, seen in verdicts(folder).items():
            merged[figure] |= seen
    return {
        figure: seen
        for figure, seen in merged.items()
        if figure not in SEVERAL_CLAIMS and len({word for _, word in seen}) > 1
    }


def test_the_checker_finds_two_verdicts_on_one_claim(tmp_path):
    row = "<tr><td>{}</td><td>x</td><td>{}：因为</td></tr>"
    (tmp_path / "04_a.html").write_text(
        row.format("完美 packing 的提速：1.70×（课程 06.4）", "成立")
    )
    (tmp_path / "08_b.html").write_text(row.format("① 完美 packing：1.70×（课程 06.4）", "有出入"))
    assert disagreements([tmp_path]) == {"1.70×（课程 06.4）": {("04", "成立"), ("08", "有出入")}}


def test_each_course_claim_has_one_verdict_on_every_page(course_handouts):
    _, folder, _ = course_handouts
    folder = Path(folder)
    seen = verdicts(folder)
    # the packing and selective-recompute claims are judged on several pages, and found there
    assert len({page for page, _ in seen["1.70×（课程 06.4）"]}) >= 2
    assert disagreements([folder, folder / "student"]) == {}


def test_a_teams_claims_have_one_verdict_each(hostile_readers):
    """The readers' edition of a team's build (tests/hostile_names.py: the course's run under
    another name and a few keys of its own)."""
    _, folder, _ = hostile_readers
    assert disagreements([Path(folder)]) == {}
