"""The booklet's text font: Noto Sans CJK SC (the Debian package fonts-noto-cjk), subset to the
characters a build prints and converted from CFF to TrueType outlines, embedded in the booklet
as @font-face data.

Why: Chromium's PDF writer (Skia) embeds only TrueType-outline fonts as fonts (CID TrueType);
a font with CFF outlines, as every Noto CJK face is (OpenType collections of CFF fonts), is
written as Type 3 glyph procedures: 345 of the 353 fonts of a course booklet were Type 3, which
print soft on some printers and lose their text on copy in some readers. The TrueType copy of the
face prints as two embedded CID TrueType fonts (regular and bold), whatever the characters.

The conversion (fontTools, which matplotlib brings) takes a few seconds a weight; its result is
kept in the user's cache folder, named by the font file and the characters, so a build of the
same pages does not convert again. The converted face keeps the dates of the installed one (its
'head' table's), not the time of the conversion: a booklet printed with an empty cache (a fresh
HOME, CI) has the same bytes as one printed with the cache a build before filled. Where the font
is not installed the booklet keeps the pages' own font stack (and Chromium's Type 3 fonts).
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
from pathlib import Path

#: The family name the booklet gives the converted face, first in its font stacks.
FAMILY = "CostModel Sans CJK"
#: The booklet's font stacks: a character the face lacks (ᵀ, for one) comes from DejaVu Sans,
#: a TrueType font (fonts-dejavu-core, fontconfig's default fonts), not from a CFF fallback.
STACK = f'"{FAMILY}", "DejaVu Sans", "Noto Sans CJK SC", sans-serif'
MONO_STACK = f'"DejaVu Sans Mono", "{FAMILY}", "DejaVu Sans", monospace'
#: Where Debian puts the faces, and the index of the Simplified Chinese face in each collection.
FONT_DIR = Path("/usr/share/fonts/opentype/noto")
WEIGHTS = {400: "NotoSansCJK-Regular.ttc", 700: "NotoSansCJK-Bold.ttc"}
SC_FACE = "Noto Sans CJK SC"
#: The conversion's version: a change to how fonts are converted makes new cache entries (2: the
#: subset keeps the face's own dates; a version 1 entry holds the time it was made).
VERSION = "2"
#: Always in the subset: what Chromium may print beyond the pages' text (page numbers, the
#: footer's slash, list bullets, ellipses).
ALWAYS = "".join(chr(c) for c in range(0x20, 0x7F)) + "•◦▪…–—·✍"
_TAGS = re.compile(r"<[^>]*>")
_STYLE = re.compile(r"<(style|script)[^>]*>.*?</\1>", re.S)


def printed_chars(documents: list[str]) -> str:
    """The characters the documents (HTML) show, plus ALWAYS, sorted."""
    chars = set(ALWAYS)
    for document in documents:
        chars.update(html.unescape(_TAGS.sub(" ", _STYLE.sub(" ", document))))
    return "".join(sorted(c for c in chars if c.isprintable() or c == " "))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "costmodel" / "fonts"


def _face_index(path: Path) -> int | None:
    """The index of the SC face in a collection, or None."""
    from fontTools.ttLib import TTCollection

    with TTCollection(str(path), lazy=True) as collection:
        for index, face in enumerate(collection.fonts):
            if face["name"].getDebugName(1) == SC_FACE:
                return index
    return None


def _to_truetype(font) -> None:
    """Replace the CFF outlines of `font` by quadratic TrueType outlines (fontTools' cu2qu)."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import newTable

    order = font.getGlyphOrder()
    glyphs = font.getGlyphSet()
    glyf = newTable("glyf")
    glyf.glyphOrder = order
    glyf.glyphs = {}
    for name in order:
        pen = TTGlyphPen(glyphs)
        glyphs[name].draw(Cu2QuPen(pen, 1.0, reverse_direction=True))
        glyf.glyphs[name] = pen.glyph()
    font["loca"] = newTable("loca")
    font["glyf"] = glyf
    for table in ("CFF ", "VORG"):
        if table in font:
            del font[table]
    font["head"].glyphDataFormat = 0
    maxp = font["maxp"]
    maxp.tableVersion = 0x00010000
    for key in (
        "maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
        "maxStackElements", "maxSizeOfInstructions", "maxComponentElements",
    ):  # fmt: skip
        setattr(maxp, key, 0)
    maxp.maxZones = 1
    font["post"].formatType = 3.0  # no glyph names
    font.sfntVersion = "\0\1\0\0"


def truetype_subset(path: Path, index: int, chars: str) -> bytes:
    """The face `index` of `path` with only the glyphs of `chars`, as a TrueType font."""
    import io

    from fontTools import subset
    from fontTools.ttLib import TTFont

    # the face's own dates kept: saved with the time of the conversion ('head' modified, and so
    # its checksum), a booklet printed with an empty font cache (a fresh HOME, CI) differed from
    # one printed with the subset a build before had kept
    font = TTFont(str(path), fontNumber=index, lazy=True, recalcTimestamp=False)
    options = subset.Options()
    options.notdef_outline = True
    options.name_IDs = ["*"]
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars)
    subsetter.subset(font)
    _to_truetype(font)
    out = io.BytesIO()
    font.save(out)
    return out.getvalue()


def _cached(path: Path, chars: str) -> bytes | None:
    """The converted subset of the SC face of `path`, from the cache or made (and kept there);
    None where the file holds no SC face."""
    stat = path.stat()
    key = hashlib.sha256(
        f"{VERSION}\0{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{chars}".encode()
    ).hexdigest()[:32]
    kept = cache_dir() / f"{key}.ttf"
    if kept.is_file():
        return kept.read_bytes()
    index = _face_index(path)
    if index is None:
        return None
    data = truetype_subset(path, index, chars)
    try:  # written atomically: a build beside this one reads a whole file or none
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(kept)
    except OSError:
        pass  # no cache folder (read-only home): convert again next time
    return data


def font_css(documents: list[str], font_dir: Path = FONT_DIR) -> str:
    """@font-face rules for FAMILY (regular and bold, data: URLs) covering every character the
    documents show, and the pages' font stacks with FAMILY first; "" where the faces are not
    installed."""
    chars = printed_chars(documents)
    rules = []
    for weight, name in WEIGHTS.items():
        path = font_dir / name
        if not path.is_file():
            continue
        data = _cached(path, chars)
        if data is None:
            continue
        rules.append(
            f'@font-face {{ font-family: "{FAMILY}"; font-weight: {weight}; font-style: normal; '
            f"src: url(data:font/ttf;base64,{base64.b64encode(data).decode()}); }}"
        )
    if not rules:
        return ""
    return (
        "<style>"
        + "\n".join(rules)
        + f":root {{ --font: {STACK}; --mono: {MONO_STACK}; }} body {{ font-family: {STACK}; }}"
        # formulas in the math font (DejaVu Math TeX Gyre, TrueType): inheriting the text's
        # stack, their upright letters (MFU) came out as Type 3 glyphs
        f'math {{ font-family: math, "{FAMILY}", "DejaVu Sans"; }}'
        "</style>"
    )
