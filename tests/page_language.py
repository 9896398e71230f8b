"""What a reader sees of a built page, and whether it reads in Chinese (issue 23, item 8): shared
by tests/publish/test_pages_chinese.py (the built pages) and tests/present/test_words.py (the
Chinese names the pages get from the library).

The rule: a page's paragraphs, list items, table cells and headers, captions and headings (code,
math, plots and scripts left out) hold no English word but the technical terms and names of
ALLOWED_WORDS and ALLOWED_PHRASES and the identifiers of IDENTIFIERS; a token with a digit, an
underscore, a dot or a slash, or with capitals inside it (`seq_len`, `H20`, `MFU`, `DeepSeek`)
is an identifier, not a word, and a single letter is a variable. The same text has no stray space
from joined strings (a space between a full-width punctuation mark and a Han character or another
such mark, or between two Han characters), one kind of quotation marks (“”, not "" or 「」),
and no Markdown emphasis left unrendered (`**` shows where a bold span's closing marker follows
a full-width mark and precedes a letter).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from costmodel.derive.activations.tables import RECOMPUTE_MODULES

#: The elements whose text a reader reads as prose or as a table.
BLOCKS = {"p", "li", "td", "th", "caption", "h1", "h2", "h3", "h4", "h5", "h6", "dt", "dd"}
#: What is not prose: code, math, plots, scripts (their text is left out; a code span or a formula
#: is read as a placeholder that is neither a word nor a space).
SKIPPED = {"code", "pre", "kbd", "samp", "math", "script", "style", "svg"}
CODE_MARK = "\u2060"  # a word joiner: no letter, no space

#: Multi-word terms and names, removed before the words are read.
ALLOWED_PHRASES = (
    "Model FLOPs Utilization",
    "Hardware FLOPs Utilization",
    "Hugging Face",
    "Transformer Engine",
    "AMD Instinct",
    "gated DeltaNet",
    "gated-delta",
    "first-fit decreasing",
    "tensor core",
    "memory-bound",
    "log-softmax",
    "cross-entropy",
    "top-k",
)
#: Single words a Chinese text on training infrastructure writes in English: terms of the trade,
#: names of products and people, units. Nothing else in English may reach a page.
ALLOWED_WORDS = set(
    """
    attention batch batching causal chunked combine config dense dispatch down eager embedding
    epoch expert experts fused flash full gate gather grouped head heads hidden kernel key layer
    layers logits loss mask math micro norm pad packed padded padding packing permute profile
    profiler query rank recompute roofline routed router scatter selective seq seqlen shared size
    slots softmax stage straggler tile token tokens transformer unpermute up varlen vocab
    none null true false min bmm sdpa
    amdahl gamma llama qwen zipf megatron nvidia torch torchtitan transformers costmodel
    """.split()
)
#: Identifiers a page writes as plain text (a claims table's HTML has no code spans): the
#: recompute modules (Megatron-LM's names: `layernorm`, `moe`, `mlp`).
IDENTIFIERS = set(RECOMPUTE_MODULES)
#: English words of two letters: "in", "of", "is", "no" are English; "mk", "kn" are math (and a
#: single letter is a variable).
SHORT_WORDS = set("an as at be by do if in is it no of on or so to we".split())

_TOKEN = re.compile(r"[A-Za-z0-9_./'’^-]+")
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff"
_FULL_WIDTH = "（）：；，。、！？“”‘’《》【】"
_STRAY_SPACE = re.compile(
    rf"[{_FULL_WIDTH}] (?=[{_HAN}{_FULL_WIDTH}])|(?<=[{_HAN}{_FULL_WIDTH}]) [{_FULL_WIDTH}]"
    rf"|[{_HAN}] [{_HAN}]"
)
#: Markdown's bold left as it was written (CommonMark's flanking rules), not a power (`s**2`).
_BOLD_LEFT = re.compile(r"(?<![\w*])\*\*(?=\S)")
_OTHER_QUOTES = re.compile(rf"[「」『』]|\"(?=[{_HAN}])|(?<=[{_HAN}])\"")


class _Text(HTMLParser):
    """The text of each block element, as a reader sees it (whitespace collapsed)."""

    def __init__(self):
        super().__init__()
        self.blocks: list[str] = []
        self.open: list[int] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in SKIPPED:
            if tag in ("code", "math") and not self.skip and self.open:
                self.blocks[self.open[-1]] += CODE_MARK
            self.skip += 1
        elif tag in BLOCKS:
            self.blocks.append("")
            self.open.append(len(self.blocks) - 1)

    def handle_endtag(self, tag):
        if tag in SKIPPED:
            self.skip = max(0, self.skip - 1)
        elif tag in BLOCKS and self.open:
            self.open.pop()

    def handle_data(self, data):
        if self.open and not self.skip:
            self.blocks[self.open[-1]] += data


def blocks(page: str) -> list[str]:
    parser = _Text()
    parser.feed(page)
    return [t for t in (" ".join(b.split()) for b in parser.blocks) if t]


def _is_identifier(token: str) -> bool:
    if re.search(r"[0-9_./^]", token):
        return True
    capitals = sum(c.isupper() for c in token)
    return capitals >= 2 or any(c.isupper() for c in token[1:])


def english(text: str, names: tuple[str, ...] = ()) -> list[str]:
    """The English words of `text` that are not allowed (see the module's docstring); `names`
    (a scenario's name) are not read."""
    for phrase in (*names, *ALLOWED_PHRASES):
        text = text.replace(phrase, " ")
    found = []
    for token in _TOKEN.findall(text):
        token = token.strip("-'’")
        if not re.search("[A-Za-z]", token) or _is_identifier(token):
            continue
        for word in re.split(r"[-'’]", token.lower()):
            if len(word) == 1:
                continue
            if len(word) == 2:
                if word in SHORT_WORDS:
                    found.append(word)
            elif word not in ALLOWED_WORDS and word not in IDENTIFIERS:
                found.append(word)
    return found


def problems(page: str, names: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(what, the block's text) for each block with an English word, a stray space or a quotation
    mark other than “”."""
    out = []
    for text in blocks(page):
        words = english(text, names)
        if words:
            out.append((f"English {words}", text))
        if _STRAY_SPACE.search(text.replace(CODE_MARK, "x")):
            out.append(("stray space", text))
        if _OTHER_QUOTES.search(text):
            out.append(("quotation marks", text))
        if _BOLD_LEFT.search(text):
            out.append(("unrendered emphasis", text))
    return out
