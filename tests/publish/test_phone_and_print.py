"""The course's handouts on a phone and on paper (issue 36, 8), read from the course build the
session builds once (tests/conftest.py, course_handouts): every plot SVG; on a 390-px screen no
page wider than the screen (a wide table scrolls in its own box) and no identifier in a table
cell split over lines; no booklet page that holds a single line, and a student booklet no larger
than the teacher's (its answer spaces' dashed borders were a path a dash: 2.46 against 1.94 MB).
A booklet printed here (not a build) checks the single lines where they happened."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pdf_text
import pytest
from conftest import missing

from costmodel.publish import booklet, pages

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: A phone's screen width, in CSS pixels (an iPhone 12 to 15's).
PHONE_PX = 390
_FOOTER = re.compile(r"\s*\d+\s*/\s*\d+\s*")
#: On the loaded page: the document's width, and each code element in a table cell that is one
#: identifier (no space in it) but is laid out over more than one line.
PHONE_JS = """() => {
  const split = [];
  for (const code of document.querySelectorAll('td code, th code')) {
    const text = code.textContent.trim();
    if (!text || /\\s/.test(text)) continue;
    const range = document.createRange();
    range.selectNodeContents(code);
    const tops = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
    if (tops.size > 1) split.push(text);
  }
  const tables = Array.from(document.querySelectorAll('table'));
  return {width: document.documentElement.scrollWidth, split,
          widest: Math.max(0, ...tables.map((t) => t.scrollWidth))};
}"""


@pytest.fixture(scope="module")
def built(course_handouts):
    _, folder, _ = course_handouts
    return folder


def _pages(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.html")) + sorted((folder / "student").glob("*.html"))


def _lines(text: str) -> list[str]:
    """A printed page's lines of text, without its footer (the page number)."""
    return [line for line in text.splitlines() if line.strip() and not _FOOTER.fullmatch(line)]


def test_every_plot_is_svg(built):
    """08's plan scatter was a 457-px PNG (drawn so to keep its page under its size limit); every
    plot of every page is an SVG image now (a heatmap's cells may be a bitmap inside one)."""
    for page in _pages(built):
        images = re.findall(r"<img\b[^>]*>", page.read_text(encoding="utf-8"))
        png = [i[:80] for i in images if re.search(r'src="(data:image/png|[^"]*\.png")', i)]
        assert not png, f"{page.name}: {png}"
    assert 'src="data:image/svg+xml,' in (built / "08_optimization_path.html").read_text("utf-8")


def test_pages_fit_a_phone_screen(built):
    """At 390 px no page is wider than the screen (29 of 84 tables were; 05 was 1,118 px wide):
    a wide table scrolls inside its own box; an identifier in a table cell stays on one line
    (`llama-gqa` broke at its hyphen in 05)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is needed")
    if CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) is needed")
    found, widest = {}, 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=booklet.CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": PHONE_PX, "height": 844}, offline=True)
            page = context.new_page()
            for file in _pages(built):
                page.goto(file.as_uri())
                shown = page.evaluate(PHONE_JS)
                widest = max(widest, shown["widest"])
                if shown["width"] > PHONE_PX or shown["split"]:
                    found[str(file.relative_to(built))] = shown
        finally:
            browser.close()
    assert not found, found
    assert widest > PHONE_PX  # the wide tables are still there, scrolled inside their boxes


def test_no_booklet_page_holds_a_single_line(built):
    for pdf in (built / "booklet.pdf", built / "student" / "booklet.pdf"):
        texts = pdf_text.page_texts(pdf)
        single = [n for n, text in enumerate(texts, start=1) if len(_lines(text)) == 1]
        assert not single, f"{pdf}: pages {single} hold a single line"


def test_the_student_booklet_is_no_larger_than_the_teachers(built):
    """The student's edition drops the solutions and draws an answer space instead: it was a
    quarter larger (2.19 against 1.74 MB in the issue), each dashed border printed as a path of
    its own for every dash."""
    teacher, student = (
        (built / "booklet.pdf").stat().st_size,
        (built / "student" / "booklet.pdf").stat().st_size,
    )
    assert student <= teacher, (student, teacher)


def _ending(index: int, filler_mm: int):
    """A section whose text fills `filler_mm` of its first page, then ends with a paragraph of
    three lines: some fillers put the paragraph's last line alone on the next page."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"# 第 {index} 节\n\n<div style='height:{filler_mm}mm'>填充</div>"
        ),
        nbformat.v4.new_markdown_cell("这一段的最后一行不会独占一页。" * 8),
    ]
    return nb


def test_a_paragraphs_last_line_is_never_alone_on_a_page(tmp_path):
    """Chromium's own widows (2) left the last line of a paragraph alone on a page (teacher
    page 59 of a team's booklet in the issue: the last line of 03's last paragraph): sections
    whose last paragraph ends at every height near a page's end, printed as a booklet."""
    if CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) is needed")
    parts = []
    for i, mm in enumerate(range(200, 262, 2), start=1):
        target = tmp_path / f"{i:02d}_part.html"
        pages.export_html(_ending(i, mm), target, no_input=False, banner="", edition="teacher")
        parts.append(target)
    [pdf] = booklet.write_pdfs([(parts, tmp_path / "booklet.pdf", "版面")])
    texts = pdf_text.page_texts(pdf)
    single = [n for n, text in enumerate(texts, start=1) if len(_lines(text)) == 1]
    assert not single, f"pages {single} of {len(texts)} hold a single line"
    assert sum("第" in text and "节" in text for text in texts) >= len(parts)
