"""Handouts: the suite re-executed for a scenario, exported to offline HTML, checked in a real
browser (headless Chromium, no network)."""

import html
import json
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pdf_text
import psutil
import pytest
from conftest import missing
from hang import hang_limit
from headlines import section_headlines
from hostile_names import HOSTILE

from costmodel.evaluate.account.account import account as evaluate_account
from costmodel.inputs import scenario
from costmodel.publish import handouts, output, suite
from costmodel.publish import index as index_page
from costmodel.publish import pages as handout_pages
from costmodel.publish.booklet import CHROMIUM_ARGS
from costmodel.publish.manifest import MARKER

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_DIR = ROOT / "build" / "screenshots"


@pytest.fixture(scope="module")
def built(course_handouts):
    """The course's build, both editions with booklets (tests/conftest.py: once per test run)."""
    sections, folder, timings = course_handouts
    TIMINGS.clear()
    TIMINGS.update(timings)
    return sections, folder


#: Where the course build's time went (filled by the `built` fixture).
TIMINGS: dict[str, float] = {}


def test_build_says_where_its_time_went(built):
    """The phases add up to the total; every notebook's worker reports its execution and its
    export, and only the first notebook of a worker waits for a kernel to start."""
    sections, _ = built
    assert set(TIMINGS) == {"start", "notebooks", "pages", "booklets", "total"}
    phases = sum(TIMINGS[k] for k in ("start", "notebooks", "pages", "booklets"))
    assert 0 < phases <= TIMINGS["total"] < phases + 5
    assert TIMINGS["booklets"] > 0 and TIMINGS["notebooks"] > 0
    for section in sections:
        assert set(section.seconds) == {"kernel", "execute", "export"}, section.stem
        assert section.seconds["execute"] > 0 and section.seconds["export"] > 0


def _pages(folder: Path) -> list[Path]:
    """Every HTML page of both editions."""
    return sorted(folder.glob("*.html")) + sorted((folder / "student").glob("*.html"))


def test_every_section_built(built):
    sections, folder = built
    assert [s.error for s in sections] == [None] * len(sections)
    names = sorted(p.name for p in folder.iterdir())
    pages = ["index.html", "booklet.pdf", handout_pages.CONVENTIONS_PAGE] + [
        s.page for s in sections
    ]
    assert names == sorted([MARKER, "student"] + pages)
    assert sorted(p.name for p in (folder / "student").iterdir()) == sorted([MARKER] + pages)
    for edition_folder, builds in ((folder, ["student"]), (folder / "student", [])):
        manifest = json.loads((edition_folder / MARKER).read_text(encoding="utf-8"))
        assert manifest["written_by"] == "costmodel handouts" and manifest["scenario_file"] is None
        assert manifest["scenario"] == scenario.resolve()["name"]
        listed = sorted(f["path"] for f in manifest["files"])
        assert listed == sorted(pages) and manifest["builds"] == builds  # each a build of its own
    assert output.check_output(folder) == folder  # a rebuild may replace it
    assert len(sections) == len(suite.sources())


def test_index_lists_inputs_headlines_and_sections(built):
    sections, folder = built
    page = (folder / "index.html").read_text(encoding="utf-8")
    account = evaluate_account(scenario.resolve())
    assert f"{100 * account['mfu']:.2f}%" in page and f"{100 * account['hfu']:.2f}%" in page
    assert f"{100 * account['padding']['waste_fraction']:.1f}%" in page
    for s in sections:
        assert f'href="{s.page}"' in page and s.title and s.title in page
    assert "<code>seq_len</code>" in page


def _cards(page: str) -> dict[str, str]:
    """The index's headline cards: {label: value}, as the reader sees them."""
    found = re.findall(r'<div class="card"><div class="v">(.*?)</div><div>(.*?)</div></div>', page)
    return {html.unescape(label): html.unescape(value) for value, label in found}


def _index(overrides: dict | None = None) -> tuple[str, dict]:
    sc = scenario.resolve(overrides=overrides)
    account = evaluate_account(sc)
    return index_page.index_html(sc, account, []), account


def test_index_cards_show_the_predicted_step_beside_the_measured_one():
    """Issue 20 (5): the cards show the step-time model's prediction beside the measured step
    and the unexplained remainder; a negative remainder is said plainly."""
    page, account = _index()
    t = account["time"]
    cards = _cards(page)
    assert cards["单步耗时（实测）"] == "120.0 s"
    assert cards["单步耗时（模型预测）"] == f"{t['predicted_seconds']:,.1f} s"
    unexplained = cards["未解释部分（实测 − 预测）"]
    assert unexplained == (
        f"{t['unexplained_seconds']:,.1f} s ({100 * t['unexplained_share']:.1f}%)"
    )
    assert cards["MFU"] == f"{100 * account['mfu']:.2f}%"
    fast = _cards(_index({"step_time": 30})[0])  # the model predicts about 35 s
    negative = [label for label in fast if label.startswith("未解释部分")]
    assert negative and "模型预测的一步比实测的长" in negative[0], fast
    assert "不可能" not in negative[0]  # the report's words: by how much, not impossible
    assert fast[negative[0]].startswith("-")


def test_index_cards_say_predicted_when_step_time_is_null():
    """Issue 20 (2): with step_time null the step and the MFU are the model's, and say so."""
    page, account = _index({"step_time": None})
    cards = _cards(page)
    predicted = f"{account['time']['predicted_seconds']:,.1f} s"
    assert cards["单步耗时（预测值：step_time 为空）"] == predicted
    assert cards["MFU（单步耗时为预测值）"] == f"{100 * account['mfu']:.2f}%"
    assert cards["HFU（单步耗时为预测值）"] == f"{100 * account['hfu']:.2f}%"
    assert not any(label.startswith(("单步耗时（实测）", "未解释部分")) for label in cards)
    sc = scenario.resolve(overrides={"step_time": None})
    assert "（单步耗时为预测值）" in index_page.banner(sc, account, {"step_time": None}, "teacher")


class _Resources(HTMLParser):
    """Collects every URL that the page would load (not links in prose)."""

    def __init__(self):
        super().__init__()
        self.urls = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "img", "iframe", "audio", "video", "source", "embed"):
            self.urls.append(attrs.get("src") or "")
        if tag == "link":
            self.urls.append(attrs.get("href") or "")
        if tag == "object":
            self.urls.append(attrs.get("data") or "")


def test_pages_reference_no_remote_resource_and_fit(built):
    _, folder = built
    for page in _pages(folder):
        text = page.read_text(encoding="utf-8")
        parser = _Resources()
        parser.feed(text)
        remote = [u for u in parser.urls if re.match(r"(https?:)?//", u)]
        assert not remote, f"{page.name}: {remote}"
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", text), page.name
        assert not re.search(r"@import\s+['\"]?(url\()?\s*['\"]?https?://", text), page.name
        assert page.stat().st_size <= 400_000, f"{page}: {page.stat().st_size} bytes"
        assert "<script" not in text, f"{page}: a script (the math is MathML, typeset at build)"


def test_cjk_font_stack_and_print_css(built):
    _, folder = built
    for page in _pages(folder):
        text = page.read_text(encoding="utf-8")
        assert "Noto Sans CJK SC" in text, page.name
        assert "@page" in text and "size: A4" in text, page.name


def test_every_css_variable_a_page_uses_is_defined_there(built):
    """The pages carry no theme stylesheet: a colour given as an undefined variable is no colour
    (code showed no highlighting while the highlighter referred to JupyterLab's variables)."""
    _, folder = built
    for page in _pages(folder):
        text = page.read_text(encoding="utf-8")
        styles = "".join(re.findall(r"<style[^>]*>(.*?)</style>", text, re.S))
        used = set(re.findall(r"var\((--[\w-]+)", styles))
        defined = set(re.findall(r"(--[\w-]+)\s*:", styles))
        assert used <= defined, f"{page.name}: {sorted(used - defined)[:5]}"
        if 'class="highlight' in text:  # code shown: its keywords have a colour of their own
            assert re.search(r"\.highlight \.k \{[^}]*color: #", styles), page.name


@pytest.fixture(scope="module")
def readers(hostile_readers):
    """The readers' edition (no code) for a team with a hostile scenario name, HOSTILE in it
    (tests/conftest.py: once per test run, shared with tests/present/test_escaping.py)."""
    return hostile_readers


def test_no_input_hides_code(readers):
    sections, folder, overrides = readers
    assert [s.error for s in sections] == [None] * len(sections)
    page = (folder / sections[0].page).read_text(encoding="utf-8")
    body = re.sub(r"<(script|style)\b.*?</\1>", "", page.split("<body", 1)[1], flags=re.S)
    assert "jp-InputArea-editor" not in body and "jp-InputPrompt" not in body
    assert "scenario_file" not in body and "import" not in body
    assert 'class="jp-OutputArea' in body  # the outputs are still there
    account = evaluate_account(scenario.resolve(overrides=overrides))
    assert f"{100 * account['mfu']:.2f}%" in (folder / "index.html").read_text(encoding="utf-8")


def test_bad_scenario_fails_before_any_notebook(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "costmodel",
            "handouts",
            "--out",
            str(tmp_path / "x"),
            "--set",
            "seq_len=-1",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "costmodel: error: seq_len: -1 is not allowed; "
        "expected a positive integer up to 100,000,000"
    )
    assert not (tmp_path / "x").exists()


def test_failing_notebook_is_named_and_keeps_its_previous_page(tmp_path, monkeypatch):
    """A notebook that fails: the command names it, the other pages are written, and the page
    of the previous build for that section is kept, marked stale on the index."""
    good = suite.sources()[0].with_suffix(".ipynb")
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy(good, folder / good.name)
    shutil.copy(good, folder / "99_flaky.ipynb")
    (folder / "99_flaky.py").write_text("# placeholder source\n")
    (folder / good.with_suffix(".py").name).write_text("# placeholder source\n")
    monkeypatch.setattr(suite, "NOTEBOOKS", folder)
    out = tmp_path / "out"
    sections, built_folder = handouts.build(out=out, progress=False)
    assert [s.error for s in sections] == [None, None]
    previous = (out / "99_flaky.html").read_bytes()

    bad = nbformat.read(good, as_version=4)
    bad.cells = bad.cells[:2] + [nbformat.v4.new_code_cell("x = 1\ny = x / 0  # boom\n")]
    nbformat.write(bad, folder / "99_flaky.ipynb")
    sections, built_folder = handouts.build(out=out, progress=False, overrides={"step_time": 90})
    flaky = next(s for s in sections if s.stem == "99_flaky")
    assert flaky.error.startswith("99_flaky: cell ")
    assert "ZeroDivisionError" in flaky.error and "y = x / 0" in flaky.error
    assert flaky.stale and (out / "99_flaky.html").read_bytes() == previous
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "未更新" in index and 'href="99_flaky.html"' in index
    account = evaluate_account(scenario.resolve(overrides={"step_time": 90}))
    assert f"{100 * account['mfu']:.2f}%" in (out / good.with_suffix(".html").name).read_text(
        encoding="utf-8"
    )  # the good page is this build's

    assert "99_flaky.html" in [  # the stale page is a file this build wrote there
        f["path"] for f in json.loads((out / MARKER).read_text())["files"]
    ]
    fresh = tmp_path / "fresh"  # no previous page: the section is listed as failed
    sections, _ = handouts.build(out=fresh, progress=False)
    assert not next(s for s in sections if s.stem == "99_flaky").stale
    index = (fresh / "index.html").read_text(encoding="utf-8")
    assert "失败" in index and not (fresh / "99_flaky.html").exists()


def test_two_builds_are_byte_identical(built, tmp_path):
    """Every file of both editions: pages, booklets (their PDF dates fixed) and manifests."""
    _, first = built
    _, second = handouts.build(out=tmp_path / "again", progress=False, edition="both", pdf=True)
    for sub in ("", "student"):
        names = sorted(p.name for p in (first / sub).iterdir() if p.is_file())
        assert names == sorted(p.name for p in (second / sub).iterdir() if p.is_file())
        assert "booklet.pdf" in names
        # every file that differs named at once (the manifest sorts first and names none)
        differ = [
            n for n in names if (first / sub / n).read_bytes() != (second / sub / n).read_bytes()
        ]
        assert differ == [], f"{sub or 'teacher'}: {differ}"


# ------------------------------------------------------------------ in a real browser


def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) and playwright are needed")
    return sync_playwright


#: The lines each cell of the index's plan table takes, but the layout's (which may wrap):
#: the distinct tops of its text's line boxes ("计算" once took two lines, a character each).
PLAN_CELL_LINES = """() => {
  const table = document.querySelector('table.plan');
  if (!table) return null;
  return Array.from(table.querySelectorAll('tr')).flatMap(row =>
    Array.from(row.cells).filter((cell, i) => i !== 1).map(cell => {
      const range = document.createRange();
      range.selectNodeContents(cell);
      return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size;
    }));
}"""


def test_handouts_in_headless_chromium(built):
    sync_playwright = _browser()
    sections, folder = built
    account = evaluate_account(scenario.resolve())
    headlines = section_headlines(account)
    headlines["index"] = f"{100 * account['mfu']:.2f}%"
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(offline=True, viewport={"width": 1000, "height": 1400})
        requests, failed = [], []
        context.on("request", lambda r: requests.append(r.url))
        context.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
        for page_file in [folder / "index.html"] + [folder / s.page for s in sections]:
            page = context.new_page()
            page.goto(page_file.as_uri())
            if page_file.name != "index.html":
                # MathML laid out by the browser itself: a fraction is taller than a line
                typeset = page.evaluate("() => document.querySelectorAll('math').length")
                assert typeset > 0, f"{page_file.name}: no typeset math"
                fraction = page.evaluate(
                    "() => { const f = document.querySelector('mfrac');"
                    " return f ? f.getBoundingClientRect().height : null; }"
                )
                assert fraction is None or fraction > 20, f"{page_file.name}: {fraction}"
            visible = page.evaluate(
                "() => { const c = document.body.cloneNode(true);"
                " c.querySelectorAll('.jp-InputArea, script, style, math')"
                ".forEach(e => e.remove()); return c.innerText; }"
            )
            raw = re.findall(r"\$\$?[^$\n]{1,80}\$|\\frac|\\mathrm|\\left", visible)
            assert not raw, f"{page_file.name}: raw TeX visible: {raw[:3]}"
            images = page.evaluate(
                "() => Array.from(document.images).map(i => [i.complete, i.naturalWidth])"
            )
            assert all(ok and width > 0 for ok, width in images), f"{page_file.name}: {images}"
            key = page_file.name[:2] if page_file.name[:2].isdigit() else "index"
            main_text = page.evaluate(  # the page's own text, without the banner
                "() => { const c = document.body.cloneNode(true);"
                " c.querySelectorAll('.handout-banner').forEach(e => e.remove());"
                " return c.innerText; }"
            )
            assert headlines[key] in main_text, f"{page_file.name}: {headlines[key]} not shown"
            if page_file.name == "index.html":  # the plan's figures each on one line
                page.set_viewport_size({"width": 700, "height": 1400})  # a narrow window
                lines = page.evaluate(PLAN_CELL_LINES)
                page.set_viewport_size({"width": 1000, "height": 1400})
                assert lines and max(lines) == 1, f"index: plan cells over lines {lines}"
            if page_file.name.startswith("03"):
                page.screenshot(path=str(SCREENSHOT_DIR / "handout.png"), full_page=False)
            page.close()
        browser.close()
    leaving = [u for u in requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert not leaving, leaving
    assert not failed, failed


def test_hostile_scenario_name_runs_no_script(readers):
    """The scenario name is shown as text on every page; none of the markup in it runs."""
    sync_playwright = _browser()
    sections, folder, _ = readers
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(offline=True)
        requests, dialogs = [], []
        context.on("request", lambda r: requests.append(r.url))
        for page_file in [folder / "index.html"] + [folder / s.page for s in sections]:
            page = context.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(page_file.as_uri())
            assert page.evaluate("() => window.__pwned") is None, page_file.name
            hostile = page.evaluate(
                '() => document.querySelectorAll(\'img[src="x"], a[href^="javascript"]\').length'
            )
            assert hostile == 0, page_file.name
            text = page.evaluate("() => document.body.innerText")
            assert 'onerror="window.__pwned=1"' in text, f"{page_file.name}: name not shown"
            if page_file.name in ("index.html", sections[0].page):  # as written, math included
                body = page.evaluate(
                    "() => { const c = document.body.cloneNode(true);"
                    " c.querySelectorAll('.handout-banner').forEach(e => e.remove());"
                    " return c.innerText; }"
                )
                assert HOSTILE in body, f"{page_file.name}: name not shown as written"
            page.close()
        browser.close()
    assert not dialogs, dialogs
    leaving = [u for u in requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
    assert not leaving and not any(u.endswith("/x") for u in requests), requests


# ------------------------------------------------------------------ editions, booklet, typography


def _solution_runs(nb) -> list[list]:
    """The runs of consecutive cells tagged `solution` in a notebook."""
    runs, inside = [], False
    for cell in nb.cells:
        solution = handout_pages.SOLUTION in cell.metadata.get("tags", [])
        if solution and not inside:
            runs.append([])
        if solution:
            runs[-1].append(cell)
        inside = solution
    return runs


def _marker(cell) -> str:
    """A line of a solution cell that its page shows: a Markdown line (less a heading's # or a
    list item's marker, which the page shows as markup), or a code line."""
    lines = [line.strip().lstrip("#").strip() for line in cell.source.splitlines()]
    lines = [re.sub(r"^(?:[-*+]|\d+\.)\s+", "", line) for line in lines]
    lines = [line for line in lines if len(line) > 12]
    return lines[0] if lines else ""


def test_student_edition_has_answer_spaces_and_no_solutions(built):
    sections, folder = built
    total = 0
    for s in sections:
        nb = nbformat.read(suite.NOTEBOOKS / f"{s.stem}.ipynb", as_version=4)
        runs = _solution_runs(nb)
        teacher = html.unescape((folder / s.page).read_text(encoding="utf-8"))
        student = html.unescape((folder / "student" / s.page).read_text(encoding="utf-8"))
        assert student.count('class="answer-space"') == len(runs), s.stem
        assert 'class="answer-space"' not in teacher, s.stem
        for run in runs:
            for cell in run:
                marker = _marker(cell)
                plain = not re.search(r"[$*`_\[\]<>]", marker)  # no math, markup or code
                if cell.cell_type == "markdown" and marker and plain:
                    assert marker in teacher, f"{s.stem}: {marker!r} missing in the teacher's"
                    assert marker not in student, f"{s.stem}: {marker!r} shown to students"
        total += len(runs)
    assert total >= len(sections)  # every notebook asks the reader something
    for edition, index in (
        ("teacher", folder / "index.html"),
        ("student", folder / "student" / "index.html"),
    ):
        text = index.read_text(encoding="utf-8")
        assert handout_pages.EDITION_NAMES[edition] in text


def test_parameters_cells_are_hidden_and_the_banner_names_the_inputs(built):
    sections, folder = built
    for page in _pages(folder):
        if page.name in ("index.html", handout_pages.CONVENTIONS_PAGE):
            continue
        text = html.unescape(page.read_text(encoding="utf-8"))
        assert "scenario_file = None" not in text and "overrides = {}" not in text, page
        assert "Restart Kernel" not in text, page  # the notes for JupyterLab readers (lab-only)
        assert "输入：课程场景" in text, page


def test_booklets_have_every_section_numbered_pages_and_embedded_fonts(built):
    from pypdf import PdfReader

    sections, folder = built
    account = evaluate_account(scenario.resolve())
    headlines = section_headlines(account)
    for edition_folder in (folder, folder / "student"):
        reader = PdfReader(edition_folder / "booklet.pdf")
        pages = pdf_text.page_texts(edition_folder / "booklet.pdf")
        assert len(pages) > len(sections), edition_folder
        text = "\n".join(pages)
        for s in sections:
            assert headlines[s.stem[:2]] in text, f"{edition_folder.name}: {s.stem} headline"
            assert s.title.split()[0] in text
        # page numbers in the footer: "n / total" on every page
        assert all(f"{i} / {len(pages)}" in p for i, p in enumerate(pages, 1))
        fonts = {}
        for page in reader.pages:
            for font in (page.get("/Resources") or {}).get("/Font", {}).values():
                font = font.get_object()
                descriptor = font.get("/FontDescriptor")
                if descriptor is None and "/DescendantFonts" in font:
                    descriptor = font["/DescendantFonts"][0].get_object().get("/FontDescriptor")
                descriptor = descriptor.get_object() if descriptor else {}
                # a Type 3 font carries its glyphs in the PDF (/CharProcs); the others embed
                # a font program in their descriptor
                embedded = font.get("/Subtype") == "/Type3" and "/CharProcs" in font
                embedded |= any(k in descriptor for k in ("/FontFile", "/FontFile2", "/FontFile3"))
                fonts[f"{font.get('/BaseFont')} {font.indirect_reference}"] = embedded
        assert fonts and all(fonts.values()), fonts


def _browsers() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "run-driver" in " ".join(child.cmdline()) or "chrom" in child.name()
    ]


def test_printer_leaves_no_browser_behind(tmp_path):
    """The build starts the booklet printer before the notebooks run: closed unused (a build
    that fails first), or after printing, no driver or browser process is left."""
    from costmodel.publish import booklet

    if not CHROMIUM:
        missing("headless Chromium (Debian package chromium) is needed")
    printer = booklet.Printer()
    printer.close()
    assert _browsers() == []
    page = tmp_path / "p.html"
    page.write_text("<html><body><main><h1>一页</h1><p>1 / 1</p></main></body></html>")
    with booklet.Printer() as printer:
        deadline = time.monotonic() + hang_limit(2)
        while not _browsers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _browsers() != []  # started at once, before anything is printed
        [pdf] = printer.print([([page], tmp_path / "b.pdf", "t")])
    assert pdf.read_bytes().startswith(b"%PDF") and _browsers() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.pdf", "p.html"]


class _Paragraphs(HTMLParser):
    """The text of paragraphs, list items and table cells, outside code."""

    def __init__(self):
        super().__init__()
        self.depth, self.code, self.texts = 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag in ("p", "li", "td", "th"):
            self.depth += 1
            self.texts.append("")
        if tag in ("pre", "code", "math", "style", "script"):
            self.code += 1

    def handle_endtag(self, tag):
        if tag in ("p", "li", "td", "th"):
            self.depth -= 1
        if tag in ("pre", "code", "math", "style", "script"):
            self.code -= 1

    def handle_data(self, data):
        if self.depth > 0 and self.code == 0:
            self.texts[-1] += data


def test_no_line_break_inside_a_chinese_paragraph_of_the_pages(built):
    from costmodel.present.typography import cjk_breaks

    _, folder = built
    for page in _pages(folder):
        parser = _Paragraphs()
        parser.feed(page.read_text(encoding="utf-8"))
        found = [b for text in parser.texts for b in cjk_breaks(text)]
        assert not found, f"{page}: {found[:3]}"


def test_the_conventions_link_works_in_the_pages(built):
    """The notebooks link docs/conventions.md; a page links the copy beside it."""
    sections, folder = built
    for edition_folder in (folder, folder / "student"):
        assert "Megatron-LM" in (edition_folder / handout_pages.CONVENTIONS_PAGE).read_text("utf-8")
        for s in sections:
            text = (edition_folder / s.page).read_text(encoding="utf-8")
            assert handout_pages.CONVENTIONS_LINK not in text, s.page
    linked = [
        s
        for s in sections
        if handout_pages.CONVENTIONS_PAGE in (folder / s.page).read_text("utf-8")
    ]
    assert linked, "no page links the conventions"
