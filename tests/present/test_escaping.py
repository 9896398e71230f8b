"""A scenario's text is inert everywhere (issue 18, item 7).

A table of hostile names (terminal escapes, bidirectional overrides, HTML, Markdown syntax, TeX,
URLs and e-mail addresses) goes through every output that shows scenario or file text: the
report as text, Markdown and JSON, `costmodel gemms` and `costmodel params` as text, the
one-line error messages, the notebooks' computed Markdown and tables (rendered by nbconvert's
Markdown renderer, mistune, as the handouts render them), and one real handout build. Each
output shows the text as written, with control characters escaped (\\x1b, \\r, \\u202e), and
adds no markup, no link and no math of its own.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hostile_names import HANDOUT_NAME_SHOWN, READERS_SHOWN
from markdown_pages import handout_html

from costmodel.cli import main
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate.gemms import gemm_table
from costmodel.inputs import models, scenario
from costmodel.present import display, report
from costmodel.present.gemms import render_gemms
from costmodel.present.params import params_text

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "scenarios" / "configs" / "llama-3.1-70b.json"
#: A layout on which the Llama config is a possible run (the course's 40 x H20 is too slow).
LLAMA_RUN = {"num_gpus": 512, "samples_per_step": 512, "gpu": "H100"}

#: What a terminal or a page acts on instead of showing it (this test's own list): C0 and C1
#: controls but the line break that ends a line of output, DEL, the line and paragraph
#: separators and the bidirectional formatting characters.
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")

#: (id, name, as text output shows it, as Markdown shows it: line breaks become spaces).
TERMINAL = [
    ("csi", "Team\x1b[2J\x1b[1;31mred", r"Team\x1b[2J\x1b[1;31mred", r"Team\x1b[2J\x1b[1;31mred"),
    (
        "osc8-hyperlink",
        "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07",
        r"\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07",
        r"\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07",
    ),
    ("bel-bs-cr", "ok\x07\x08\x08\rEVIL", r"ok\x07\x08\x08\rEVIL", r"ok\x07\x08\x08 EVIL"),
    ("c1-nul-del", "a\x9b2J\x00b\x7fc\x85d", r"a\x9b2J\x00b\x7fc\x85d", r"a\x9b2J\x00b\x7fc d"),
    (
        "bidi",
        "abc\u202edcba \u2066x\u2069 \u200fz",
        r"abc\u202edcba \u2066x\u2069 \u200fz",
        r"abc\u202edcba \u2066x\u2069 \u200fz",
    ),
    (
        "line-breaks",
        "line one\nline two\u2028three",
        r"line one\nline two\u2028three",
        "line one line two three",
    ),
]
#: Names a terminal shows as they are, but Markdown would read as markup, a link or math.
MARKUP = [
    (case, name, name, name)
    for case, name in [
        ("html", "<img src=x onerror=alert(1)><script>alert(2)</script>"),
        ("table", "a | b || c \\| d"),
        ("link-image", "[x](https://evil.example/x) ![i](x.png) <https://evil.example/y>"),
        ("heading-emphasis", "# h *e* _u_ **b** ~~s~~ `c` > q"),
        ("tex", "$x^2$ and \\(y\\) $$z$$"),
        ("urls", "see https://evil.example/x and www.evil.example and a@b.co <b>x</b> | y"),
        ("mail-schemes", "mailto:a@b.co ftp://evil.example/f xmpp:a@b.co WWW.EVIL.EXAMPLE"),
        ("entities", "&amp; &lt;b&gt; &#64; \\* x"),
        ("underscores", "__init__ step_time _x_"),
    ]
]
ALL = TERMINAL + MARKUP


def _ids(cases):
    return [case[0] for case in cases]


def _account(name: str) -> dict:
    return account(scenario.resolve(overrides={"name": name}))


def _math(text: str) -> bool:
    return "$" in text or "\\(" in text or "\\[" in text


def _autolinkable(markdown: str) -> bool:
    """Whether Markdown source, outside its code spans, holds what an autolinker starts from
    (mistune, which the tests render with, links only http(s)://): a scheme's :// or a www. as
    written (GFM, marked in JupyterLab), or an e-mail address in a run of text as read, its
    character references read (GFM looks for those after reading them)."""
    source = re.sub(r"(`+).*?\1", "", markdown)
    if re.search(r"://|www\.", source, flags=re.I):
        return True
    runs = re.split(r"<!--.*?-->|<[^>]*>", source)
    return any(re.search(r"[\w.+-]@[\w-]+\.\w", html.unescape(run)) for run in runs)


class _Page(HTMLParser):
    """Rendered HTML read back: its tags, link targets, text (references read), and the text
    inside <code> (which MathJax skips) apart."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags, self.hrefs, self.text, self.code = [], [], [], []
        self._code = self._skip = 0
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attrs = dict(attrs)
        if "href" in attrs or "src" in attrs:
            self.hrefs.append(attrs.get("href") or attrs.get("src"))
        self._code += tag == "code"
        self._skip += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._code -= tag == "code" and self._code > 0
        self._skip -= tag in ("script", "style") and self._skip > 0

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if self._code:
                self.code.append(data)

    @property
    def plain(self) -> str:
        return "".join(self.text)


def rendered(markdown: str) -> _Page:
    """Markdown rendered as the handouts render an output, parsed back."""
    return _Page(handout_html(markdown))


# ------------------------------------------------------------------ the report


@pytest.mark.parametrize(("case", "name", "text", "md"), TERMINAL, ids=_ids(TERMINAL))
def test_report_shows_control_characters_escaped(case, name, text, md):
    """`costmodel report` in every format prints no control character of the name: text and
    Markdown show it escaped, JSON as json.dumps writes it (ASCII only, the name read back
    exactly)."""
    a = _account(name)
    out = report.render(a, "text")
    assert not CONTROL.search(out), case
    lines = out.splitlines()
    assert lines[0] == f"Cost account: {text}" and lines[1] == "=" * len(lines[0])
    assert any(line.split() == ["name", *text.split()] for line in lines), case
    out = report.render(a, "markdown")
    assert not CONTROL.search(out), case
    assert rendered(out.split("\n", 1)[0]).plain.strip() == f"Cost account: {md}"
    out = report.render(a, "json")
    assert out.isascii() and json.loads(out)["scenario"]["name"] == name


@pytest.mark.parametrize(("case", "name", "text", "md"), ALL, ids=_ids(ALL))
def test_report_markdown_adds_no_markup_link_or_math(case, name, text, md):
    """The Markdown report, rendered: only its own headings and tables (every row three cells),
    no link, image, emphasis or raw HTML; the name reads as written; math only inside code."""
    out = report.render(_account(name), "markdown")
    page = rendered(out)
    assert set(page.tags) <= {"h1", "h2", "table", "thead", "tbody", "tr", "th", "td", "code"}, (
        sorted(set(page.tags))
    )
    assert not page.hrefs
    for table in re.findall(r"<table>.*?</table>", _html(out), flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
        assert all(len(re.findall(r"<t[hd]\b", row)) == 3 for row in rows), case
    title = rendered(out.split("\n", 1)[0])
    assert title.plain.strip() == f"Cost account: {md}"
    name_row = re.search(r"<td>name</td>\s*<td[^>]*>(.*?)</td>", _html(out), flags=re.S)
    assert name_row and _Page(name_row.group(1)).plain == md
    outside_code = "".join(t for t in page.text if t not in page.code)
    assert not _math(outside_code), case
    assert not _autolinkable(out), case


def _html(markdown: str) -> str:
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(markdown)


# ------------------------------------------------------------------ file text: gemms, params

#: A config file's name (the model's name in `params`, `gemms` and the report) with escapes.
FILE_STEM = "cfg\x1b[2J\x1b]8;;https:\x07L\x1b]8;;\x07\u202ecod\r"
FILE_STEM_SHOWN = r"cfg\x1b[2J\x1b]8;;https:\x07L\x1b]8;;\x07\u202ecod\r"


@pytest.fixture
def hostile_config(tmp_path) -> Path:
    path = tmp_path / f"{FILE_STEM}.json"
    shutil.copy(LLAMA, path)
    return path


def test_params_text_shows_file_text_escaped(hostile_config):
    out = params_text(models.load_shape(str(hostile_config)))
    assert not CONTROL.search(out)
    assert out.splitlines()[0] == f"model {FILE_STEM_SHOWN} (llama)"


def test_gemms_text_shows_file_text_escaped(hostile_config):
    sc = scenario.resolve(overrides={"model": str(hostile_config), **LLAMA_RUN})
    out = render_gemms(gemm_table(sc))
    assert not CONTROL.search(out)
    assert f"config of {FILE_STEM_SHOWN}" in out


def test_report_shows_file_text_escaped(hostile_config):
    """The model's path and the lengths file's path reach the report's inputs: escaped."""
    lengths = hostile_config.with_name(f"len{FILE_STEM}.txt")
    lengths.write_text("20000\n30000\n", encoding="utf-8")
    sc = scenario.resolve(
        overrides={"model": str(hostile_config), "sequence_lengths": str(lengths), **LLAMA_RUN}
    )
    a = account(sc)
    for fmt in ("text", "markdown", "json"):
        assert not CONTROL.search(report.render(a, fmt)), fmt
    text = report.render(a, "text")
    assert f"{FILE_STEM_SHOWN}.json" in text and f"len{FILE_STEM_SHOWN}.txt" in text


# ------------------------------------------------------------------ one-line errors


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(
            lambda d: ["report", "--scenario", str(d / f"{FILE_STEM}.yaml")],
            id="missing-scenario-file",
        ),
        pytest.param(lambda d: ["params", str(d / "bad.json")], id="config-model-type"),
        pytest.param(
            lambda d: ["report", "--set", f"model={d / 'bad.json'}"], id="scenario-model-type"
        ),
    ],
)
def test_error_line_shows_control_characters_escaped(tmp_path, capsys, args):
    config = json.loads(LLAMA.read_text(encoding="utf-8"))
    config["model_type"] = FILE_STEM
    (tmp_path / "bad.json").write_text(json.dumps(config), encoding="utf-8")
    assert main(args(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith("costmodel: error: ") and err.count("\n") == 1
    assert not CONTROL.search(err)
    assert "cfg\\x1b[2J" in err and "\\u202e" in err


# ------------------------------------------------------------------ the notebooks' display helpers


@pytest.mark.parametrize(("case", "name", "text", "md"), ALL, ids=_ids(ALL))
def test_notebook_markdown_reads_as_written_and_adds_no_link(case, name, text, md):
    """A notebook's computed sentence quoting the name (as every notebook's first one does),
    rendered as the handouts render it: the name reads as written (control characters escaped),
    adds no tag but the sentence's own (code when it holds math), and links nowhere."""
    markdown = f"场景：**{display.text(name)}**（1 × H20）"
    assert not CONTROL.search(markdown)
    page = rendered(markdown)
    assert page.plain.strip() == f"场景：{md}（1 × H20）"
    assert set(page.tags) <= {"p", "strong", "code"} and not page.hrefs, page.tags
    assert not _math("".join(t for t in page.text if t not in page.code)), case
    assert not _autolinkable(markdown), case


@pytest.mark.parametrize(("case", "name", "text", "md"), TERMINAL, ids=_ids(TERMINAL))
def test_notebook_table_shows_control_characters_escaped(monkeypatch, case, name, text, md):
    shown = []
    monkeypatch.setattr(display, "display", lambda data, raw: shown.append(data))
    display.table([[name, "1"]], ["scenario", name], caption=name)
    (data,) = shown
    for mime in ("text/html", "text/plain"):
        assert not CONTROL.search(data[mime]), mime
    page = _Page(data["text/html"])
    assert page.plain == f"{text}scenario{text}{text}1" and "img" not in page.tags
    assert data["text/plain"].splitlines()[0] == text


# ------------------------------------------------------------------ a real handout page

BANNER = r'<div class="handout-banner[^"]*">(.*?)</div>'


@pytest.fixture(scope="module")
def hostile_handouts(hostile_readers):
    """A real build (the readers' edition, with its booklet) whose scenario name holds
    HANDOUT_NAME (tests/conftest.py: once per test run, shared with test_handouts)."""
    sections, folder, _ = hostile_readers
    return sections, folder


def test_handout_pages_link_nowhere_and_show_the_name_as_written(hostile_handouts):
    """Every page of a real build (the index and each section): no link or image to anything
    in the name, no control character, and the name as written: on the index, and on a
    section page both in the banner and in the section's first sentence."""
    sections, folder = hostile_handouts
    assert [s.error for s in sections] == [None] * len(sections)
    links, controls, absent = {}, [], []
    for path in [folder / "index.html"] + [folder / s.page for s in sections]:
        source = path.read_text(encoding="utf-8")
        page = _Page(source)
        links[path.name] = [h for h in page.hrefs if re.search(r"evil|a@b|mailto", h)]
        if "\x1b" in source or "\u202e" in source or "<b>x</b>" in source:
            controls.append(path.name)
        shown = [page]
        if path.name != "index.html":
            banner = re.search(BANNER, source, flags=re.S)
            shown = [_Page(banner.group(1)), _Page(source.replace(banner.group(0), ""))]
        if not all(HANDOUT_NAME_SHOWN in part.plain for part in shown):
            absent.append(path.name)
    assert not any(links.values()), links
    assert not controls, f"raw control characters or HTML of the name in {controls}"
    assert not absent, f"the name is not shown as written (banner and text) in {absent}"


def test_the_booklet_title_is_the_name_as_written(hostile_handouts):
    """The PDF's title (its metadata, which a terminal's pdfinfo prints) shows the name as the
    pages do, control characters escaped."""
    from pypdf import PdfReader

    _, folder = hostile_handouts
    title = PdfReader(folder / "booklet.pdf").metadata.title
    assert title == f"{READERS_SHOWN} (teacher)" and HANDOUT_NAME_SHOWN in title
