"""Math typeset at build time: TeX becomes MathML (latex2mathml), which Chromium, Firefox and
Safari display natively, so a handout page needs no MathJax (2.3 MB a page) and no script.

How a notebook's math reaches the page:

- a `text/latex` output (`display.eq`) gets a `text/html` twin holding the MathML, which the
  HTML exporter prefers;
- in a Markdown cell or a `text/markdown` output, every `$$…$$` and `$…$` outside code (fenced
  blocks and code spans) is replaced by a placeholder word, which Markdown leaves alone; after
  the export, `restore` puts the MathML in its place. (MathML written straight into the
  Markdown would have its text nodes read as Markdown: a `*` operator would start emphasis.)

Inline math follows the rule of Pandoc and Jupyter: `$` opens only before a non-space, closes
only after one, and not before a digit ($5 and $6 stay dollars).
"""

from __future__ import annotations

import functools
import html
import re
from typing import Any

from latex2mathml.converter import convert

_CODE_OR_MATH = re.compile(
    r"(?P<fence>^[ \t]*(?P<f>```|~~~)[^\n]*\n.*?^[ \t]*(?P=f)[ \t]*$)"
    r"|(?P<code>(?P<tick>`+).+?(?P=tick))"
    r"|\$\$(?P<display>.+?)\$\$"
    r"|(?<![\\$])\$(?P<inline>(?=\S)[^$\n]+?(?<=\S))\$(?!\d)",
    re.S | re.M,
)
_TOKEN = "CMMATH{:05d}X"
_TOKEN_RE = re.compile(r"CMMATH(\d{5})X")
#: An attribute's quoted value on the exported page: a heading's `id` and its anchor's `href`
#: carry the heading's text, placeholders included.
_ATTRIBUTE_RE = re.compile(r'(?<=[\s])([\w-]+=)"([^"<>]*CMMATH\d{5}X[^"<>]*)"')


@functools.lru_cache(maxsize=4096)
def mathml(tex: str, display: bool = False) -> str:
    """One TeX formula as a MathML element (block or inline); each formula is converted once
    per process (both editions of a page carry the same formulas)."""
    tex = tex.strip()
    if tex.startswith("\\displaystyle"):
        tex = tex[len("\\displaystyle") :]
    element = convert(tex, display="block" if display else "inline")
    # keep the TeX for copy and paste (and as a fallback description)
    return element.replace("<math ", f'<math alttext="{html.escape(tex, quote=True)}" ', 1)


class Formulas:
    """The formulas of one page: Markdown in, placeholders out; HTML in, MathML back."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.sources: list[str] = []  # the TeX of each item, for attribute values

    def _keep(self, element: str, tex: str) -> str:
        self.items.append(element)
        self.sources.append(tex)
        return _TOKEN.format(len(self.items) - 1)

    def markdown(self, text: str) -> str:
        """The Markdown with each formula outside code replaced by a placeholder."""

        def swap(match: re.Match) -> str:
            if match.group("fence") or match.group("code"):
                return match.group(0)
            if match.group("display") is not None:
                tex = match.group("display")
                return self._keep(mathml(tex, display=True), tex)
            tex = match.group("inline")
            return self._keep(mathml(tex), tex)

        return _CODE_OR_MATH.sub(swap, text)

    def restore(self, page: str) -> str:
        """The exported page with every placeholder replaced by its MathML; inside an attribute
        (a heading's `id`, its anchor's `href`) by the formula's TeX, spaces as hyphens and
        escaped, as the exporter writes the rest of the heading there (MathML inside a quoted
        value broke the heading: `Σsi2">3. …` on the page)."""

        def plain(match: re.Match) -> str:
            text = _TOKEN_RE.sub(
                lambda m: html.escape("-".join(self.sources[int(m.group(1))].split())),
                match.group(2),
            )
            return f'{match.group(1)}"{text}"'

        page = _ATTRIBUTE_RE.sub(plain, page)
        return _TOKEN_RE.sub(lambda m: self.items[int(m.group(1))], page)


def latex_output(latex: str) -> str:
    """A `text/latex` output ($$…$$, as `display.eq` writes it) as MathML."""
    body = latex.strip()
    if body.startswith("$$") and body.endswith("$$"):
        return mathml(body[2:-2], display=True)
    if body.startswith("$") and body.endswith("$"):
        return mathml(body[1:-1], display=True)
    return mathml(body, display=True)


def typeset(nb: Any) -> Formulas:
    """Replace the notebook's math (in place) for export; return the formulas for `restore`."""
    formulas = Formulas()
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = formulas.markdown(cell.source)
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/latex" in data and "text/html" not in data:
                data["text/html"] = latex_output(data["text/latex"])
            if "text/markdown" in data:
                data["text/markdown"] = formulas.markdown(data["text/markdown"])
    return formulas
