"""Issue 23 (8): the built pages read in Chinese. What a reader sees of a page (its paragraphs,
list items, table cells and headers, captions and headings; code, math, plots and scripts left
out) holds no English word but the technical terms and names of ALLOWED_WORDS and
ALLOWED_PHRASES: identifiers (a token with a digit, an underscore, a dot or a slash, or with
capitals inside it: `seq_len`, `H20`, `MFU`, `DeepSeek`) and the scenario's own name are not
words. The same text has no stray space from joined strings (a space between a full-width
punctuation mark and a Han character or another such mark, or between two Han characters) and one kind of quotation marks (“”, not "" or
「」). Built once for the course (both editions) and once for a team's scenario (teacher)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from costmodel.derive.activations.tables import RECOMPUTE_MODULES
from costmodel.inputs import scenario
from costmodel.publish import handouts

ROOT = Path(__file__).resolve().parents[2]
TEAM = ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml"

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
    "all-to-all",
    "all-gather",
    "all-reduce",
    "reduce-scatter",
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
    return out


def test_the_check_finds_english_sentences_spaces_and_quotes():
    page = (
        "<table><caption>The six levers, course order</caption><tr><td>structural</td>"
        "<td>yes</td><td>1.70×</td></tr></table>"
        "<p>本场景 all the top 10 layouts keep TP within a node。</p>"
        "<p>课程场景的 selective 重算（由模块推出） 给出系数 1.000</p>"
        '<p>典型 MFU 表「上述」一行，"引号"</p>'
    )
    found = problems(page)
    words = [w for what, _ in found if what.startswith("English") for w in eval(what[8:])]
    assert {"the", "six", "levers", "course", "order", "structural", "yes"} <= set(words)
    assert {"all", "top", "layouts", "keep", "within", "node"} <= set(words)
    assert [t for what, t in found if what == "stray space"] == [
        "课程场景的 selective 重算（由模块推出） 给出系数 1.000"
    ]
    assert len([1 for what, _ in found if what == "quotation marks"]) == 1


def test_the_check_passes_terms_identifiers_code_and_names():
    page = (
        "<h1>Course: Qwen3.6-35B-A3B on 40 x H20</h1>"
        "<p>把 full recompute 换成 selective recompute，micro batch = 2，"
        "<code>attention_kernel: flash</code> 与 <code>the code is not read</code>；"
        "MFU（Model FLOPs Utilization）、DeepSeek-V3、TP 1, PP 1、β(mk + kn + mn)。</p>"
        "<pre>any English at all</pre>"
    )
    assert problems(page, ("Course: Qwen3.6-35B-A3B on 40 x H20",)) == []


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{label: (folder, the scenario's name)}: the course, both editions; a team's, teacher."""
    root = tmp_path_factory.mktemp("chinese")
    _, course = handouts.build(out=root / "course", progress=False, edition="both")
    _, team = handouts.build(scenario_file=str(TEAM), out=root / "team", progress=False)
    return {
        "course": (course, scenario.resolve().name),
        "course student": (course / "student", scenario.resolve().name),
        "team": (team, scenario.resolve(TEAM).name),
    }


@pytest.mark.parametrize("label", ["course", "course student", "team"])
def test_the_pages_read_in_chinese(built, label):
    folder, name = built[label]
    pages = sorted(folder.glob("*.html"))
    assert len(pages) >= 11
    found = {
        page.name: problems(page.read_text(encoding="utf-8"), (name,))
        for page in pages
        if page.name != "conventions.html"  # docs/conventions.md: the project's English docs
    }
    found = {page: items for page, items in found.items() if items}
    assert not found, "\n".join(
        f"{page}: {what}: {text[:160]}" for page, items in found.items() for what, text in items
    )
