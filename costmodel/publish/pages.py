"""The pages of the handouts: each executed notebook exported by nbconvert to one
self-contained HTML page of an edition (images embedded, math typeset as MathML at build time, no
script and no remote resource, the banner on top), and the conventions document as a page of
its own. The page layout is the nbconvert template in templates/handout/."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.publish import suite
from costmodel.publish.svg import svg_data_uri

TEMPLATE_DIR = Path(__file__).parent / "templates"
FONT_STACK = (
    '"Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans GB", '
    '"Microsoft YaHei", "WenQuanYi Micro Hei", system-ui, sans-serif'
)


#: The editions: the teacher's shows every cell; the student's drops the cells tagged `solution`
#: and leaves an answer space where they were.
EDITIONS = ("teacher", "student")
#: Cells no edition shows: the parameters cell of the source and the one injected (papermill's tag; the
#: banner and the index show the scenario's inputs instead), and the notes for a reader in
#: JupyterLab (which keys to edit in the parameters cell, restart and run all).
HIDDEN_CELLS = {"parameters", "injected-parameters", "lab-only"}
#: The conventions document, as the notebooks link it (from notebooks/), and the
#: page the handouts give it (beside the sections).
CONVENTIONS_LINK = "../docs/conventions.md"
CONVENTIONS_PAGE = "conventions.html"
#: Code cells whose only job is to render computed prose, tables or equations: their output is
#: shown, their code is not (the tag Jupyter Book uses).
HIDDEN_INPUT = {"remove-input"}
SOLUTION = "solution"
ANSWER_SPACE = "answer-space"
#: A table cell with more text than this is prose (long_cells).
LONG_CELL = 40
_CELL = re.compile(r"<td((?:\s+(?!class=)[^>]*)?)>(.*?)</td>", re.S)
_TAG = re.compile(r"<[^>]*>")
#: The answer spaces' size (answer_height): handwriting, characters a line and line height; a
#: table or formula of the solution, in lines; the heading line; the least and the most height
#: (at most half a printed page, so a space never breaks across pages).
ANSWER_CHARS_PER_LINE = 30
ANSWER_LINE_MM = 8
ANSWER_OUTPUT_LINES = 2
ANSWER_HEAD_MM = 10
ANSWER_MM = (30, 120)
EDITION_NAMES = {"teacher": "教师版（含解答）", "student": "学生版（不含解答）"}
#: Every page's rules for a narrow screen (a phone, 390 px wide), on the screen only (print has
#: its own: a table there fits the print width): a table wider than the page scrolls inside its
#: own box instead of widening the page; an identifier in a table cell stays on one line (the
#: table scrolls instead), while a long one in prose may wrap anywhere; on a narrow screen no
#: cell is squeezed to a character or two (a cell of prose keeps a paragraph's width).
SCREEN_CSS = """@media screen {
  table { display: block; width: max-content; max-width: 100%; overflow-x: auto; }
  td code, th code { white-space: nowrap; }
  :not(pre) > code { overflow-wrap: anywhere; }
  td :not(pre) > code, th :not(pre) > code { overflow-wrap: normal; }
}
@media screen and (max-width: 40rem) {
  th, td { min-width: 3.5em; } td.long { min-width: 12em; }
}
"""


@dataclass
class Section:
    stem: str
    title: str = ""
    summary: str = ""
    error: str | None = None  # one line: notebook, cell, error and the failing line
    stale: bool = False  # the notebook failed; its page is the previous build's
    #: where its worker's time went: "kernel" (start, or reset after the previous notebook),
    #: "execute", "export" (both editions' pages)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def page(self) -> str:
        return f"{self.stem}.html"


def describe(nb) -> tuple[str, str]:
    """Title (first heading) and one-line summary (first sentence after it) of a notebook."""
    title, summary = "", ""
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"\n\s*\n", cell.source):
            block = block.strip()
            if not title and block.startswith("#"):
                title = block.lstrip("#").strip().splitlines()[0]
            elif title and block and not block.startswith(("#", "|", "-", "*", "$", ">")):
                text = re.sub(r"[*`_]|\$[^$]*\$", "", " ".join(block.split()))
                summary = re.split(r"(?<=[。！？.!?])", text, maxsplit=1)[0]
                return title, summary
    return title, summary


def _page_exporter():
    """nbconvert's HTML exporter without its last pass, which re-parses the whole page with
    BeautifulSoup only to add alternative text to images and tabindex to cells (about a second
    a page); the handout template gives the plots their alternative text itself."""
    from nbconvert import HTMLExporter
    from nbconvert.exporters.templateexporter import TemplateExporter
    from nbconvert.filters.highlight import Highlight2HTML
    from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter

    class PageExporter(HTMLExporter):
        def from_notebook_node(self, nb, resources=None, **kw):
            resources = self._init_resources(resources)
            self.register_filter(
                "highlight_code", Highlight2HTML(pygments_lexer="ipython3", parent=self)
            )
            self.register_filter("svg_data_uri", svg_data_uri)
            self.register_filter(
                "filter_data_type",
                WidgetsDataTypeFilter(
                    notebook_metadata=self._nb_metadata, parent=self, resources=resources
                ),
            )
            return TemplateExporter.from_notebook_node(self, nb, resources, **kw)

    return PageExporter


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def answer_height(solution: list) -> int:
    """The height of the answer space for one run of solution cells, in millimetres printed:
    room for the teacher's solution written by hand (ANSWER_CHARS_PER_LINE characters a line of
    ANSWER_LINE_MM; each table or formula it shows counts as ANSWER_OUTPUT_LINES lines), within
    ANSWER_MM. A proof gets more room than a number to look up."""
    chars = sum(len(cell.source) for cell in solution if cell.cell_type == "markdown")
    shown = sum(
        1
        for cell in solution
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") in ("display_data", "execute_result")
    )
    lines = -(-chars // ANSWER_CHARS_PER_LINE) + ANSWER_OUTPUT_LINES * shown
    low, high = ANSWER_MM
    return max(low, min(high, ANSWER_HEAD_MM + ANSWER_LINE_MM * lines))


def _runs(cells: list) -> list[list]:
    """The runs of consecutive `solution` cells."""
    runs: list[list] = []
    inside = False
    for cell in cells:
        solution = SOLUTION in _tags(cell)
        if solution and not inside:
            runs.append([])
        if solution:
            runs[-1].append(cell)
        inside = solution
    return runs


def answer_spaces(nb) -> int:
    """Insert, before each run of `solution` cells, a cell tagged `answer-space`: where a student
    works (the student edition keeps it and drops the solutions; the teacher edition drops it),
    as high as `answer_height` of the run. Returns the number of runs."""
    import nbformat

    heights = [answer_height(run) for run in _runs(nb.cells)]
    cells, runs, inside = [], 0, False
    for cell in nb.cells:
        solution = SOLUTION in _tags(cell)
        if solution and not inside:
            runs += 1
            space = nbformat.v4.new_markdown_cell(
                f'<div class="answer-space" style="min-height: {heights[runs - 1]}mm">'
                "✍ 作答区：先写下你的预测或推导，再对照教师版的解答"
                "（或在 JupyterLab 里运行本页核对）。</div>"
            )
            space.metadata["tags"] = [ANSWER_SPACE]
            space.id = f"answer-space-{runs}"  # not a random id: two builds are byte-identical
            cells.append(space)
        inside = solution
        cells.append(cell)
    nb.cells = cells
    return runs


_EXPORTERS: dict[tuple[str, bool], Any] = {}


def exporter(edition: str, no_input: bool):
    """The page exporter of an edition, made once per process: making one compiles nbconvert's
    templates again (about 0.2 s a page)."""
    from traitlets.config import Config

    if edition not in EDITIONS:
        raise CostModelError(
            f"--edition: {edition!r} is not allowed; expected one of teacher, student"
        )
    key = (edition, bool(no_input))
    if key not in _EXPORTERS:
        config = Config()
        config.TagRemovePreprocessor.enabled = True
        config.TagRemovePreprocessor.remove_cell_tags = HIDDEN_CELLS | (
            {SOLUTION} if edition == "student" else {ANSWER_SPACE}
        )
        config.TagRemovePreprocessor.remove_input_tags = HIDDEN_INPUT
        # code colours as plain CSS colours: the default (JupyterLab's) style refers to variables
        # of JupyterLab's theme stylesheet, which the pages do not carry
        config.CSSHTMLHeaderPreprocessor.style = "default"
        made = _page_exporter()(
            config=config,
            template_name="handout",
            extra_template_basedirs=[str(TEMPLATE_DIR)],
            exclude_input=no_input,
            exclude_input_prompt=no_input,
            exclude_output_prompt=no_input,
            # plots are embedded by the exporter itself; embed_images re-parses the whole page
            # with BeautifulSoup to embed images of Markdown cells, which the notebooks lack
            embed_images=False,
        )
        made.log.setLevel("ERROR")  # not one "alternative text is missing" line per plot
        _EXPORTERS[key] = made
    return _EXPORTERS[key]


def export_html(nb, target: Path, no_input: bool, banner: str, edition: str = "teacher") -> None:
    """One self-contained page: images embedded, math typeset as MathML at build time (no
    script), the banner on top. nbconvert's TagRemovePreprocessor drops the parameters cells
    (and, in the student edition, the solutions; in the teacher edition, the answer spaces) and
    the code of the cells tagged `remove-input`."""
    import copy

    from costmodel.present import mathml

    page_exporter = exporter(edition, no_input)
    nb = copy.deepcopy(nb)
    answer_spaces(nb)
    formulas = mathml.typeset(nb)
    body, _ = page_exporter.from_notebook_node(
        nb,
        resources={
            "handout_banner": banner,
            "handout_screen_css": SCREEN_CSS,
            "metadata": {"name": nb.metadata.get("title", "")},
        },
    )
    body = body.replace(f'href="{CONVENTIONS_LINK}"', f'href="{CONVENTIONS_PAGE}"')
    target.write_text(formulas.restore(long_cells(body)), encoding="utf-8")


def long_cells(page: str) -> str:
    """Each table cell of prose (over LONG_CELL characters of text) marked `class="long"`: the
    print stylesheet lets a long word or formula there break anywhere, so a wide table fits the
    print width, while a short cell (a number, a name) keeps its words whole."""

    def mark(match: re.Match) -> str:
        text = html.unescape(_TAG.sub("", match[2]))
        if len(text) <= LONG_CELL:
            return match[0]
        return f'<td class="long"{match[1]}>{match[2]}</td>'

    return _CELL.sub(mark, page)


def conventions_html() -> str | None:
    """docs/conventions.md as a page of its own (None outside a checkout, where it is absent)."""
    source = suite.NOTEBOOKS / CONVENTIONS_LINK
    if not source.is_file():
        return None
    import mistune  # nbconvert's Markdown renderer, without importing nbconvert (no math there)

    body = long_cells(
        mistune.create_markdown(plugins=["table", "strikethrough"])(
            source.read_text(encoding="utf-8")
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">'
        "<title>Counting conventions</title><style>"
        f"body {{ font: 15px/1.6 {FONT_STACK}; max-width: 52rem; margin: 2rem auto; "
        "padding: 0 1rem; color: #1f2328; }"
        "table { border-collapse: collapse; } th, td { border: 1px solid #d0d7de; "
        "padding: 0.2em 0.5em; } code { background: #f0f2f4; } @page { size: A4; margin: 15mm; }"
        f"{SCREEN_CSS}</style></head><body><main>{body}</main></body></html>\n"
    )
