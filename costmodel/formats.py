"""One set of number formats for every layer: the notebooks, the report, the handouts' index and
the one-line error messages. Plain functions of a number (None, where a figure is undefined,
prints as "n/a"), and the forms in which text from a scenario or a file is shown (`printable`
for a terminal, `markdown_text` for Markdown and HTML)."""

from __future__ import annotations

import functools
import math
import re
from typing import Any

NA = "n/a"


def pct(x: float | None, digits: int = 2, grouped: bool = False) -> str:
    """A fraction as percent: 0.0585 -> 5.85%; `grouped`: thousands separated (16.74 -> 1,674%)."""
    if x is None:
        return NA
    return f"{100 * x:,.{digits}f}%" if grouped else f"{100 * x:.{digits}f}%"


def sci(x: float | None, digits: int = 3) -> str:
    """3.46e16 style, as the course writes large FLOP counts."""
    if x is None:
        return NA
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def sci4(x: float | None) -> str:
    """Four significant digits: 346.5 below 1e4, 4.1580e+16 above (the report's tables)."""
    return NA if x is None else f"{x:.4g}" if abs(x) < 1e4 else f"{x:.4e}"


def num(x: float | None, digits: int = 0) -> str:
    """Thousands separated: 2,310,000."""
    return NA if x is None else f"{x:,.{digits}f}"


def sig4(x: float) -> str:
    """Four significant digits, thousands separated: 1,234, 47.14, 0.5678 (a lever's seconds and
    micro batches)."""
    return f"{x:,.4g}"


def sig(x: float, digits: int = 4) -> str:
    """`digits` significant digits, no separator: 47.14, 0.3, 1.48e+14."""
    return f"{x:.{digits}g}"


def ratio(x: float, digits: int = 3) -> str:
    """A speedup or factor as the report writes it: 1.966x (ASCII x; `times` writes ×)."""
    return f"{x:.{digits}f}x"


def short(x: float) -> str:
    """As Python's general format writes a factor: 1.5, 0.85, 2."""
    return f"{x:g}"


def decimals(x: float, digits: int) -> str:
    """Exactly `digits` decimals, no separator: 1.27 (a factor, an efficiency)."""
    return f"{x:.{digits}f}"


def count(x: float) -> str:
    """A count that can be an average (tokens per sample, per step): whole numbers as 1,234, and
    a fraction below 1,000 with two decimals, so that 1.5 is not shown as 2."""
    return num(x) if float(x).is_integer() or abs(x) >= 1000 else num(x, 2)


def tflops(x: float | None, digits: int = 1) -> str:
    return NA if x is None else f"{x / 1e12:,.{digits}f} TFLOP/s"


def gb(x: float, digits: int = 1) -> str:
    return f"{x / 1e9:,.{digits}f} GB"


def times(x: float, digits: int = 2) -> str:
    return "∞" if x == float("inf") else f"{x:.{digits}f}×"


def seconds(x: float) -> str:
    return f"{x:,.1f} s"


def input_value(value: Any) -> str:
    """A scenario input as written in the report and in error messages: 3e9 as 3,000,000,000,
    1.48e14 as 1.48e+14, text as it is, a list (recompute_modules) as its items."""
    if isinstance(value, (list, tuple)):
        return ", ".join(input_value(item) for item in value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if abs(value) >= 1e12:
        return f"{value:.4g}"
    return num(value) if abs(value) >= 1000 else str(value)


def shown(value, width: int = 40) -> str:
    """``repr(value)`` cut to ``width`` characters, for one-line error messages: a huge number,
    string or list is never printed in full."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * width:
        if value.bit_length() > 10_000:  # str() refuses more than 4300 digits
            digits = math.floor(value.bit_length() * math.log10(2)) + 1
            return f"{'-' if value < 0 else ''}an integer of about {digits:,} digits"
        text = str(value)
        if len(text) > width:
            return f"{text[:width]}… ({len(text.lstrip('-')):,} digits)"
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= width else text[:width] + "…"


def limits(*bounds: float) -> list[str]:
    """Bounds as a reader writes them: 100,000,000 below 1e9, else 1e15, 1e-6 (all alike)."""
    if all(float(x).is_integer() and abs(x) < 1e9 for x in bounds):
        return [f"{int(x):,}" for x in bounds]
    texts = []
    for x in bounds:
        mantissa, exponent = f"{x:e}".split("e")
        texts.append(f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}")
    return texts


def human_count(n: int) -> str:
    if n == 0:
        return "0"
    return f"{n / 1e9:.2f}B" if n >= 1e8 else f"{n / 1e6:.2f}M"


def table_value(value: Any) -> str:
    if isinstance(value, float) and (abs(value) >= 1e6 or value != int(value)):
        return f"{value:.4g}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:,}"
    return "—" if value is None else str(value)


def tex_sci(x: float, digits: int = 3) -> str:
    """A number in LaTeX scientific notation: 2.31 \\times 10^{6}."""
    mantissa, exponent = sci(x, digits).split("e")
    return rf"{mantissa} \times 10^{{{exponent}}}"


def tex_num(x: float, digits: int = 0) -> str:
    """Thousands separated, for LaTeX (where a bare comma adds space): 2{,}310{,}000."""
    return num(x, digits).replace(",", "{,}")


def csv_cell(text: str) -> str:
    """A CSV field as a table shows it: whole numbers separated (2,048), other numbers with four
    significant digits, text as it is."""
    try:
        x = float(text)
    except ValueError:
        return text
    if math.isfinite(x) and x.is_integer() and abs(x) >= 1:
        return num(x)
    return f"{x:.4g}"


# ------------------------------------------------------------------ text from a scenario or a file

#: What a spreadsheet reads at the start of a cell as a formula (OWASP's list for CSV injection:
#: =, +, - and @ start one, DDE's `=cmd|...` among them; a tab or a carriage return before one).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_text(value: Any) -> str:
    """Text for a CSV cell (a scenario's name, a reason, a setting) that a spreadsheet shows as
    text and never runs as a formula: a cell that starts with one of FORMULA_START (after any
    spaces) gets a ' before it, as OWASP recommends. The csv writer quotes it where it has to
    (a comma, a quote, a line break). For text cells only: a number written by the program (a
    negative headroom) stays a number."""
    text = str(value)
    return "'" + text if text.lstrip(" ").startswith(FORMULA_START) else text


#: Characters a terminal or a page acts on instead of showing them: the C0 and C1 controls (ESC
#: starts the CSI and OSC sequences that clear a screen or add a hyperlink; BEL, backspace and
#: carriage return move or sound), DEL, lone surrogates (which no encoder writes), the line and
#: paragraph separators, and the bidirectional formatting characters (which reorder the text
#: around them).
_CONTROL = r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT_ESCAPES.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(value: Any) -> str:
    """Text as a terminal shows it, with nothing a terminal or a page acts on: each control
    character written as Python writes it in a string (ESC as \\x1b, a carriage return as \\r,
    a line break as \\n, a right-to-left override as \\u202e), everything else as it is."""
    text = str(value)
    if text.isascii() and text.isprintable():  # no ASCII control character, nothing else
        return text
    return _compiled(_CONTROL).sub(_escape, text)


@functools.cache
def _compiled(pattern: str) -> re.Pattern:
    """A pattern of this module, compiled when first used (a cold report needs neither for ASCII
    text in its text format)."""
    return re.compile(pattern)


#: Characters replaced by character references: HTML's five, and those that start Markdown
#: markup (emphasis, code, links, headings, tables, strikethrough, escapes) or TeX ($).
#: CommonMark treats a character reference as literal text, never as markup.
_ENTITIES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&#39;",
    **{c: f"&#{ord(c)};" for c in "\\`*_[]#|$~"},
}
#: What could start markup or a link: the characters above (but an _ between two ASCII letters
#: or digits, as in step_time, which CommonMark never reads as emphasis), and those an autolink
#: needs: the : of scheme://, the . of www.example or of a domain name (a dot before a letter,
#: or before a digit after anything but a digit, so that 3.6 stays as it is), an e-mail's @.
#: Written as character references they read the same, and no autolink pattern (GFM's www and
#: http ones, mistune's url plugin in nbconvert, marked's in JupyterLab, markdown-it's linkify)
#: finds them. GFM (cmark-gfm) looks for e-mail addresses in the text after it has read the
#: references, so an empty HTML comment after the @ parts the address (no element, nothing shown).
_MARKUP = (
    r"[&<>\"'\\`*\[\]#|$~@]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])"
    r"|:(?=/)|\.(?=[^\W\d_])|(?<!\d)\.(?=\d)"
)
_AT = "&#64;<!-- -->"


def _reference(match: re.Match) -> str:
    char = match.group()
    return _AT if char == "@" else _ENTITIES.get(char) or f"&#{ord(char)};"


def math_delimiter(value: str) -> bool:
    """Whether MathJax would typeset part of `value` as TeX ($, \\(, \\[, \\begin)."""
    return "$" in value or any(f"\\{c}" in value for c in "()[]") or "\\begin" in value


def _code_span(value: str) -> str:
    """A Markdown code span holding `value` literally (a fence longer than any run of
    backticks inside it)."""
    runs = [len(run) for run in re.findall(r"`+", value)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if value[:1] in ("`", " ") or value[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def markdown_text(value: Any, code: bool = False) -> str:
    """Text that comes from a scenario or a file (a name, a path), made inert for Markdown and
    HTML: it reads as written, and adds no markup, no link and no math.

    Line breaks become spaces (a title stays one line); other control characters are written as
    escapes (`printable`). Every character that could start markup or an autolink becomes a
    character reference, so no string can add HTML, a link or emphasis. Text holding a math
    delimiter ($, \\( ...) is shown as a code span instead: its content is literal for Markdown
    and HTML, no autolink is found in it, and MathJax skips code (a wrapping element with an
    ignore class would not survive nbconvert's renderer, which parses each raw tag on its own).
    `code=True` always gives a code span (monospace, for paths and keys)."""
    value = printable(re.sub(r"[^\S ]+", " ", str(value)))
    if code or math_delimiter(value):
        return _code_span(value)
    return _compiled(_MARKUP).sub(_reference, value)


def markdown_cell(value: Any) -> str:
    """`markdown_text` for a cell of a Markdown table: a | inside a code span escaped as \\|, as
    GFM reads it, so that a row keeps its number of columns."""
    return markdown_text(value).replace("|", "\\|")
