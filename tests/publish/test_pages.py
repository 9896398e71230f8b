"""costmodel.publish.pages: one notebook exported as an offline page."""

import re
from html.parser import HTMLParser

import nbformat
import pytest

from costmodel.publish import pages, suite

_MATH_HEADING = re.compile(r"^#+ .*\$", re.M)


class _Headings(HTMLParser):
    """Each heading's id and its text (MathML's text included)."""

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.headings: list[tuple[str, str]] = []
        self.broken: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and ("<" in value or ">" in value):
                self.broken.append(f"{tag} {name}={value[:80]}")
        if re.fullmatch(r"h[1-6]", tag):
            self.open.append(dict(attrs).get("id", ""))
            self.headings.append((self.open[-1], ""))

    def handle_endtag(self, tag):
        if re.fullmatch(r"h[1-6]", tag) and self.open:
            self.open.pop()

    def handle_data(self, data):
        if self.open:
            hid, text = self.headings[-1]
            self.headings[-1] = (hid, text + data)


def _with_math_headings():
    return [
        path
        for path in sorted(suite.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
        if any(
            _MATH_HEADING.search(cell.source)
            for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "markdown"
        )
    ]


def test_some_stored_notebook_has_math_in_a_heading():
    assert _with_math_headings(), "the page check below would check nothing"


@pytest.mark.parametrize("path", _with_math_headings(), ids=lambda p: p.stem[:2])
def test_headings_with_math_are_intact_on_the_page(path, tmp_path):
    """A heading with a formula keeps its id, its anchor and its text (04's §3 showed
    `Σsi2">3. 注意力项：…` when the MathML landed inside the id)."""
    nb = nbformat.read(path, as_version=4)
    target = tmp_path / "page.html"
    pages.export_html(nb, target, no_input=False, banner="", edition="teacher")
    parser = _Headings()
    parser.feed(target.read_text(encoding="utf-8"))
    assert parser.broken == []
    for hid, text in parser.headings:
        assert '">' not in text and "CMMATH" not in text and "CMMATH" not in hid, (hid, text)
