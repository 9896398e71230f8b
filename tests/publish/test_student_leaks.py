"""A student build of the course gives no exercise's answer away: the text of its HTML pages and
of its booklet, in the order a student reads them, against each exercise's answers from the
stored notebooks (the rule: tests/answer_leaks.py; the stored notebooks alone:
tests/course/test_answer_leaks.py). One build, student edition with its booklet."""

import re
import shutil

import nbformat
import pdf_text
import pytest
from answer_leaks import course_answers, html_text, leaks, run_givens
from conftest import missing

from costmodel.publish import suite

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: The pages a student can open before the first section: the index and the conventions.
FRONT = ("index.html", "conventions.html")


@pytest.fixture(scope="module")
def student(course_handouts):
    """The student edition of the course's build (tests/conftest.py: once per test run)."""
    if CHROMIUM is None:
        missing("chromium not installed (it prints the booklet)")
    sections, folder, _ = course_handouts
    assert [s.error for s in sections] == [None] * len(sections)
    return folder / "student"


@pytest.fixture(scope="module")
def exercises(course, course_account):
    notebooks = [
        (p.stem, nbformat.read(p.with_suffix(".ipynb"), as_version=4)) for p in suite.sources()
    ]
    return [stem for stem, _ in notebooks], course_answers(
        notebooks, run_givens(course, course_account)
    )


#: Figures that equal an exercise's answer by chance, each with the unit that tells them apart on
#: the page where it shows (every occurrence there must carry it) and what it is. An entry no
#: longer needed fails the tests (the figures moved): remove it.
COINCIDENCES: dict[tuple[str, str], tuple[str, str]] = {}


def _excused(found, pages, used) -> list:
    """`found` less the leaks COINCIDENCES explain."""
    texts = dict((name, text) for name, _, text in pages)
    kept = []
    for leak in found:
        rest = []
        for figure in leak.figures:
            unit, _ = COINCIDENCES.get((leak.exercise.name, figure), (None, None))
            text = texts[leak.page]
            # the figure itself, not a longer one that starts with it (47.136 is not 47.1)
            alone = rf"(?<![\d.]){re.escape(figure)}(?![\d])"
            if unit and len(re.findall(alone, text)) == len(re.findall(unit, text)):
                used.add((leak.exercise.name, figure))
            else:
                rest.append(figure)
        if rest:
            kept.append(f"{leak.exercise.name} ({leak.exercise.title}): {rest} on {leak.page}")
    return kept


def test_no_html_page_gives_an_exercise_away(student, exercises):
    stems, answers = exercises
    pages = [(name, [], html_text((student / name).read_text(encoding="utf-8"))) for name in FRONT]
    pages += [
        (stem, ex, html_text((student / f"{stem}.html").read_text(encoding="utf-8")))
        for stem, ex in zip(stems, answers)
    ]
    assert all(text.strip() for _, _, text in pages)
    used = set()
    found = _excused(leaks(pages), pages, used)
    assert not found, "\n".join(found)
    assert used == set(COINCIDENCES), f"COINCIDENCES not needed: {set(COINCIDENCES) - used}"


def _booklet_sections(pdf, count: int) -> list[str]:
    """The booklet's text: what comes before section 01 (the index), then each section's pages
    (a section starts on a new page whose first line is its number, "04 Padding 与 packing")."""
    sections = [[] for _ in range(count + 1)]
    current = 0
    for text in pdf_text.page_texts(pdf):
        number = re.match(r"(\d\d) ", text)
        if number and int(number.group(1)) == current + 1:
            current += 1
        sections[current].append(text)
    assert current == count, f"the booklet has {current} of {count} sections"
    return ["\n".join(pages) for pages in sections]


def test_the_booklet_gives_no_exercise_away(student, exercises):
    stems, answers = exercises
    front, *texts = _booklet_sections(student / "booklet.pdf", len(stems))
    pages = [("booklet, before section 01", [], front)]
    pages += [(f"booklet {stem}", ex, text) for stem, ex, text in zip(stems, answers, texts)]
    found = _excused(leaks(pages), pages, set())
    assert not found, "\n".join(found)


def test_the_booklet_has_no_near_blank_page(student):
    """No printed page holds only a heading or a line (a table kept whole moved to the next page
    and left the index's page 3 with two lines): each page has some 40 characters besides its
    number."""
    pages = pdf_text.page_texts(student / "booklet.pdf")
    text = [re.sub(r"\s|\d+ / \d+", "", page) for page in pages]
    short = [(n, t[:40]) for n, t in enumerate(text, start=1) if len(t) < 40]
    assert not short, short
