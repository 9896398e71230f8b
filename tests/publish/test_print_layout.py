"""The booklet as printed (issue 23, 2): nothing wider than the print area, no page without text
(an answer space that spilled over left one), no Type 3 font, plots drawn as SVG, answer spaces
sized per exercise, the conventions document a part of the booklet. Built cheaply: stored
notebooks exported to pages, small booklets printed by Chromium."""

from __future__ import annotations

import re
import shutil

import nbformat
import pdf_text
import pytest
from conftest import missing
from notebook_text import python_notebook

from costmodel.publish import booklet, fonts, pages, runner, suite

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: The booklet's print area: A4 less its left and right margins (booklet._print_one), in CSS
#: pixels (96 to the inch).
PRINT_WIDTH_PX = int((210 - 14 - 14) / 25.4 * 96)
#: Every element whose content is wider than its box, or that reaches past the print area; every
#: table cell holding a number that is broken across lines (a table squeezed to fit).
OVERFLOW_JS = """(width) => {
  const found = [];
  for (const el of document.querySelectorAll('main *')) {
    const box = el.getBoundingClientRect();
    const cut = el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0 &&
      getComputedStyle(el).overflowX !== 'visible';
    if (box.width > 0 && (box.right > width + 1 || cut || el.scrollWidth > width + 1)) {
      found.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(box.right)} px ` +
                 `(content ${el.scrollWidth} px): ${el.textContent.trim().slice(0, 60)}`);
    }
  }
  for (const el of document.querySelectorAll('main td, main th')) {
    const text = el.textContent.trim();
    const range = document.createRange();
    range.selectNodeContents(el);
    const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
    if (/^[0-9][0-9,.%]*$/.test(text) && lines.size > 1) {
      found.push(`a number broken across ${lines.size} lines: ${text}`);
    }
  }
  return found;
}"""


def _need_chromium():
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing("playwright is needed")
    if CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) is needed")


def _stored(stem: str):
    return nbformat.read(suite.NOTEBOOKS / f"{stem}.ipynb", as_version=4)


def _export(nb, folder, stem: str, edition: str):
    target = folder / f"{stem}.html"
    pages.export_html(nb, target, no_input=False, banner="banner", edition=edition)
    return target


def test_every_page_fits_the_print_width(tmp_path):
    """Every stored notebook's page (teacher edition, the wider) and the conventions page, laid
    out for print at the booklet's print width: no element is wider than the print area or has
    content its box cuts (05's FLOP-counter table was 15% wider: its notes' long formulas did
    not wrap, and Chromium shrank the whole booklet to fit it, and cut it all the same)."""
    _need_chromium()
    from playwright.sync_api import sync_playwright

    printed = [_export(_stored(p.stem), tmp_path, p.stem, "teacher") for p in suite.sources()]
    conventions = pages.conventions_html()
    if conventions:
        (tmp_path / pages.CONVENTIONS_PAGE).write_text(conventions, encoding="utf-8")
        printed.append(tmp_path / pages.CONVENTIONS_PAGE)
    # laid out as in the booklet: its stylesheets around each page's <main>
    document = booklet.booklet_html([printed[0], *printed], "layout")
    (tmp_path / "booklet.html").write_text(document, encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=booklet.CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": PRINT_WIDTH_PX, "height": 1000})
            page.emulate_media(media="print")
            page.goto((tmp_path / "booklet.html").as_uri())
            overflowing = page.evaluate(OVERFLOW_JS, PRINT_WIDTH_PX)
            widest = page.evaluate("document.documentElement.scrollWidth")
        finally:
            browser.close()
    assert not overflowing, "\n".join(overflowing[:15])
    assert widest <= PRINT_WIDTH_PX


def _filled(filler_mm: int, index: int):
    """A notebook whose text fills `filler_mm` of a page, then an exercise and its solution."""
    nb = nbformat.v4.new_notebook()
    exercise = nbformat.v4.new_markdown_cell(
        f"### 练习 {index}\n\n先写下你的推导：$\\mathrm{{MFU}} = \\frac{{6 D N}}{{P T}}$。"
    )
    solution = nbformat.v4.new_markdown_cell("解答：" + "推导" * 20)
    solution.metadata["tags"] = [pages.SOLUTION]
    nb.cells = [
        nbformat.v4.new_markdown_cell(
            f"# 第 {index} 节\n\n<div style='height:{filler_mm}mm'>填充</div>"
        ),
        exercise,
        solution,
    ]
    return nb


def _pdf_pages(pdf) -> tuple[list[str], set[str]]:
    """Each page's text, and the subtypes of every font the PDF uses."""
    from pypdf import PdfReader

    reader = PdfReader(pdf)
    kinds = set()
    for page in reader.pages:
        for font in (page.get("/Resources", {}).get("/Font") or {}).values():
            kinds.add(str(font.get_object().get("/Subtype")))
    return pdf_text.page_texts(pdf), kinds


def test_student_booklet_has_no_blank_page_and_no_type3_font(tmp_path):
    """Six student pages, each ending with an answer space placed a little lower on the page
    than the one before, so that some reach past the page's end: none is split (a split one
    left a page holding only its lower border: 07's page in the course booklet), and each stays
    on the page of its prompt. Every page has text besides its number; the text's fonts are embedded as TrueType, none as Type 3
    (345 of 353 fonts were Type 3: Chromium writes Noto CJK's CFF outlines as Type 3)."""
    _need_chromium()
    if not (fonts.FONT_DIR / fonts.WEIGHTS[400]).is_file():
        missing("the Debian package fonts-noto-cjk is needed")
    parts = [
        _export(_filled(mm, i), tmp_path, f"{i:02d}_part", "student")
        for i, mm in enumerate(range(150, 216, 6), start=1)
    ]
    [pdf] = booklet.write_pdfs([(parts, tmp_path / "booklet.pdf", "版面")])
    texts, kinds = _pdf_pages(pdf)
    footer = re.compile(r"^\s*\d+\s*/\s*\d+\s*$")
    blank = [n for n, text in enumerate(texts, start=1) if footer.match(text) or not text.strip()]
    assert not blank, f"pages with nothing but their number: {blank} of {len(texts)}"
    assert sum("作答区" in text for text in texts) == len(parts)
    # each prompt is printed on the page of its answer space
    assert all("先写下你的推导" in text for text in texts if "作答区" in text), texts
    assert "/Type3" not in kinds, kinds
    assert "/Type0" in kinds  # the CID TrueType fonts


def test_the_conventions_are_the_booklets_last_part_without_its_stylesheet(tmp_path):
    """docs/conventions.md is a part of the booklet (it was only a page beside it); its page's
    stylesheet (body width and margins for the screen) does not restyle the booklet."""
    conventions = pages.conventions_html()
    assert conventions, "docs/conventions.md is part of a checkout"
    index = tmp_path / "index.html"
    index.write_text("<html><head><style>.i{}</style></head><body><main>目录</main></body></html>")
    section = _export(_stored("02_six_nd"), tmp_path, "02_six_nd", "teacher")
    (tmp_path / pages.CONVENTIONS_PAGE).write_text(conventions, encoding="utf-8")
    document = booklet.booklet_html(
        [index, section, tmp_path / pages.CONVENTIONS_PAGE], "t", "<style>.font{}</style>"
    )
    assert 'id="booklet-conventions"' in document
    assert "Counting conventions" in document.split('id="booklet-conventions"')[1]
    assert "max-width: 52rem; margin: 2rem auto" not in document
    assert ".answer-space" in document and ".font{}" in document
    assert 'href="#booklet-conventions"' in document  # 02 links the conventions


def test_answer_spaces_are_sized_per_exercise():
    """A proof's answer space is higher than one for a number (04-1 and 05-1 are proofs; every
    space was 7 em, about 3 cm printed), and none is over half a page (so none breaks)."""
    heights = {}
    for stem in ("04_padding_packing", "05_attention_term", "07_roofline"):
        nb = _stored(stem)
        pages.answer_spaces(nb)
        spaces = [c.source for c in nb.cells if pages.ANSWER_SPACE in c.metadata.get("tags", [])]
        heights[stem] = [int(re.search(r"min-height: (\d+)mm", s)[1]) for s in spaces]
    assert heights["04_padding_packing"][0] >= 90
    assert heights["05_attention_term"][0] >= 60
    assert min(heights["07_roofline"]) < heights["04_padding_packing"][0]
    low, high = pages.ANSWER_MM
    assert all(low <= h <= high for hs in heights.values() for h in hs), heights


def test_handout_kernels_draw_plots_as_svg_with_the_same_bytes(tmp_path):
    """The handouts' kernels draw plots as SVG (the pages and booklet print them sharp; they were
    100-dpi PNG), with their text as paths (no plot font in the PDF) and the same bytes on a
    second run; the page embeds the SVG as an image."""
    suite.inline_figures()
    nb = python_notebook(
        [
            nbformat.v4.new_code_cell(
                "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\n"
                "ax.plot([1, 2], [3, 4])\nax.set_xlabel('tokens')\nplt.show()"
            )
        ]
    )
    nbformat.write(nb, tmp_path / "plot.ipynb")
    kernel = runner.Kernel(tmp_path)
    try:
        runs = [runner.run_notebook("plot", {}, kernel, notebooks=tmp_path) for _ in range(2)]
    finally:
        kernel.shutdown()
    outputs = []
    for executed, error in runs:
        assert error is None, error
        [output] = [o for o in executed.cells[-1].outputs if "data" in o]
        assert "image/svg+xml" in output["data"] and "image/png" not in output["data"]
        outputs.append(output["data"]["image/svg+xml"])
    assert outputs[0] == outputs[1]
    assert "<text " not in outputs[0] and "font-family" not in outputs[0]  # text as paths
    page = _export(runs[0][0], tmp_path, "plot", "teacher").read_text(encoding="utf-8")
    assert '<img alt="plot" src="data:image/svg+xml,%3Csvg ' in page  # compacted, not base64


@pytest.mark.parametrize("documents", [["<p>注意力 <b>x</b></p>", "<style>忽略</style>&amp;"]])
def test_printed_chars_are_the_text_of_the_documents(documents):
    chars = fonts.printed_chars(documents)
    assert {"注", "意", "力", "x", "&", "/"} <= set(chars) and "忽" not in chars


#: What an exercise's prompt may not ask: to run (or not yet run) cells below it, which the
#: student edition does not have (its solutions are an answer space).
RUN_WORDS = re.compile(r"运行下面|运行解答|运行答案|先别运行|先不运行|再运行")


@pytest.mark.parametrize("stem", [p.stem for p in suite.sources()])
def test_prompts_ask_for_nothing_the_student_edition_lacks(stem):
    """Each exercise's prompt (the Markdown before its solutions) holds in all three places it
    is read: the teacher's page, the student's (an answer space below) and JupyterLab."""
    nb = _stored(stem)
    before = []
    for previous, cell in zip(nb.cells, nb.cells[1:]):
        tags = cell.metadata.get("tags", [])
        if pages.SOLUTION in tags and pages.SOLUTION not in previous.metadata.get("tags", []):
            before.append(previous.source)
    found = [m.group(0) for text in before for m in RUN_WORDS.finditer(text)]
    assert not found, found
