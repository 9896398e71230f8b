"""Chinese typography for Markdown: no line break inside a Chinese paragraph.

HTML and JupyterLab render a line break inside a paragraph as a space, which in Chinese text is
a stray gap between two characters ("两者分母相同， 差别"). `join_breaks` joins such breaks:

- between two CJK characters, or next to CJK punctuation (，。：）…): nothing in between;
- between a CJK character and a Latin letter, digit or mark: one space, the convention the
  sources follow when they mix scripts on one line ("是 MFU 的");
- a break with no CJK character on either side is left alone (an English paragraph).

Only breaks inside a paragraph or a list item's text are joined: a line that starts a new block
(a blank line, a heading, a list item, a table row, a quote, a fence, display math) keeps its
break, and nothing inside a fenced code block or a $$ block changes.
"""

from __future__ import annotations

import re

#: CJK ideographs, kana, Hangul and the full-width forms.
_CJK = (
    "\u2e80-\u2fff\u3040-\u30ff\u3100-\u312f\u3200-\u32ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff"
)
#: CJK punctuation: the CJK symbols block, full-width forms, and the curly quotes and dashes
#: Chinese text uses.
_CJK_PUNCT = "\u3000-\u303f\uff00-\uffef\u2018\u2019\u201c\u201d\u2014\u2026\u00b7"
CJK = re.compile(f"[{_CJK}]")
CJK_PUNCT = re.compile(f"[{_CJK_PUNCT}]")
ANY_CJK = re.compile(f"[{_CJK}{_CJK_PUNCT}]")
#: A line that starts a block of its own (its break before it is kept).
_BLOCK_START = re.compile(r"\s*(#{1,6}\s|[-*+]\s|\d+[.)]\s|\||>|```|~~~|\$\$|<)")
#: A break between two CJK-side characters (for the check in tests and pages).
CJK_BREAK = re.compile(f"[{_CJK}{_CJK_PUNCT}][ \\t]*\\n[ \\t]*[{_CJK}{_CJK_PUNCT}]")


def _glue(left: str, right: str) -> str | None:
    """What replaces the break between the last character of one line and the first of the
    next: '' or ' ', or None to keep the break (no CJK on either side)."""
    a, b = left[-1:], right[:1]
    if not (ANY_CJK.match(a) or ANY_CJK.match(b)):
        return None
    if CJK_PUNCT.match(a) or CJK_PUNCT.match(b) or (CJK.match(a) and CJK.match(b)):
        return ""
    return " "


def join_breaks(markdown: str) -> str:
    """The Markdown with every line break inside a Chinese paragraph joined (see module)."""
    out: list[str] = []
    fence = None  # the fence string while inside a code block, or "$$"
    for line in markdown.split("\n"):
        stripped = line.strip()
        if fence:
            out.append(line)
            if stripped.startswith(fence) or (fence == "$$" and stripped.endswith("$$")):
                fence = None
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            out.append(line)
            continue
        if stripped.startswith("$$") and not (len(stripped) > 2 and stripped.endswith("$$")):
            fence = "$$"
            out.append(line)
            continue
        previous = out[-1] if out else ""
        joinable = (
            out
            and previous.strip()
            and stripped
            and not _BLOCK_START.match(line)
            and not previous.strip().startswith(("#", "|", "$$", "```", "~~~"))
            and not previous.endswith("  ")  # a hard break, written on purpose
        )
        glue = _glue(previous.rstrip(), stripped) if joinable else None
        if glue is None:
            out.append(line)
        else:
            out[-1] = previous.rstrip() + glue + stripped
    return "\n".join(out)


def cjk_breaks(text: str) -> list[str]:
    """The line breaks between CJK characters left in `text` (each with its neighbours)."""
    return [m.group(0) for m in CJK_BREAK.finditer(text)]
