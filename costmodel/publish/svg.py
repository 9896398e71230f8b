"""A plot's SVG as a handout page embeds it: compacted and written into the <img> as a data: URI
of its text (not base64).

matplotlib writes SVG for a reader of the file: a metadata block, a comment with each glyph's
text, six decimals to every number (a millionth of a point), one path command a line, every
element indented, and each point of a scatter styled on its own. The page's plots were two
thirds of 08's 472 KB (over the 400 KB a page may have). Compacted, the same drawing (to a tenth
of a point) takes about half the bytes it took as base64.
"""

from __future__ import annotations

import re
from urllib.parse import quote

#: What no reader sees: matplotlib's metadata block, comments (each glyph's text: the text is
#: drawn as paths), the XML declaration and the DOCTYPE.
_UNSEEN = re.compile(r"<metadata>.*?</metadata>|<!--.*?-->|<\?xml[^>]*\?>|<!DOCTYPE[^>]*>", re.S)
#: A number with more than one decimal outside a style (an opacity or a line width stays as it
#: is) and outside a scale or a matrix (a glyph's is about 0.016): a coordinate or a shift,
#: rounded to a tenth of a point (35 micrometres printed, under a dot of a 600-dpi printer; a
#: glyph's outline, drawn scaled down, far less).
_NUMBER = re.compile(r'( style="[^"]*"|scale\([^)]*\)|matrix\([^)]*\))|(?<![\w.#-])-?\d+\.\d{2,}')
#: A path's data, and the space around its commands, which SVG does not need.
_PATH_DATA = re.compile(r' d="([^"]*)"')
_COMMAND_SPACE = re.compile(r" ?([MLHVCSQTAZmlhvcsqtaz]) ?")
#: A group of <use> elements only (the points of a plot, the glyphs of a label).
_USES = re.compile(r"<g([^>]*)>((?:<use [^>]*/>)+)</g>")
_STYLE = re.compile(r' style="([^"]*)"')
#: An element's id, and a reference to one (`href="#id"`, `url(#id)`).
_ID = re.compile(r' id="([^"]+)"')
_NAMED = re.compile(r'( id="|#)([^"\')\s]+)(?=["\')])')
#: What the data: URI keeps as it is: what a URI may hold, less what a double-quoted HTML
#: attribute cannot (", &, <, >) and what a URI gives a meaning of its own (%, #).
_URI_SAFE = " !$'()*+,-./:;=?@[]^_`{|}~"


def _tenth(match: re.Match) -> str:
    if match[1]:
        return match[1]
    text = f"{float(match[0]):.1f}".removesuffix(".0")
    return "0" if text == "-0" else text


def _tight_path(match: re.Match) -> str:
    return ' d="' + _COMMAND_SPACE.sub(r"\1", match[1]).strip() + '"'


def _shared_style(match: re.Match) -> str:
    """A group of <use> elements that all have one style: the style on the group instead (what
    a <use> draws inherits it either way)."""
    head, uses = match[1], match[2]
    styles = _STYLE.findall(uses)
    if "style=" in head or len(styles) != uses.count("<use ") or len(set(styles)) != 1:
        return match[0]
    return f'<g{head} style="{styles[0]}">{_STYLE.sub("", uses)}</g>'


def _short_ids(svg: str) -> str:
    """Each id that something refers to renamed to a short one, in order (matplotlib's are
    hashes of ten characters, and a glyph's is its font's name: `DejaVuSans-74`, once per
    character drawn); an id nothing refers to (a group's name: `patch_3`) dropped. An <img>'s
    SVG is a document of its own: its ids meet no other."""
    referred = {name for start, name in _NAMED.findall(svg) if start == "#"}
    kept = [name for name in dict.fromkeys(_ID.findall(svg)) if name in referred]
    short = {name: f"i{n:x}" for n, name in enumerate(kept)}
    svg = _ID.sub(lambda m: m[0] if m[1] in referred else "", svg)
    return _NAMED.sub(lambda m: m[1] + short.get(m[2], m[2]), svg)


def compact_svg(svg: str) -> str:
    """The same drawing in fewer bytes: without what no reader sees, numbers to a tenth of a
    point, paths without the space around their commands, no indentation or line breaks, a
    style shared by a group of points written once, `href` for SVG 1.1's `xlink:href`, short
    ids (_short_ids)."""
    svg = _NUMBER.sub(_tenth, _UNSEEN.sub("", svg))
    svg = re.sub(r">\s+<", "><", re.sub(r"\s*\n\s*", " ", svg)).strip()
    svg = _USES.sub(_shared_style, _PATH_DATA.sub(_tight_path, svg))
    return _short_ids(svg.replace(" xlink:href=", " href="))


def svg_data_uri(svg: str) -> str:
    """The plot as the src of an <img>: compact_svg's text percent-encoded where a URI or the
    HTML attribute needs it (_URI_SAFE: nothing there needs HTML escaping), its double quotes
    made single where it has none of its own (matplotlib quotes with double quotes): about a
    tenth more bytes than the text, where base64 made them four thirds."""
    svg = compact_svg(svg)
    if "'" not in svg:
        svg = svg.replace('"', "'")
    return "data:image/svg+xml," + quote(svg, safe=_URI_SAFE)
