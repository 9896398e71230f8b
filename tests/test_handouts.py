"""Handouts: the suite re-executed for a scenario, exported to offline HTML, checked in a real
browser (headless Chromium, no network)."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from conftest import missing
from headlines import section_headlines

from costmodel.evaluate.account import account as evaluate_account
from costmodel.inputs import scenario
from costmodel.present import handouts, suite

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_DIR = ROOT / "build" / "screenshots"


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.ipynb")}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("handouts") / "course"
    before = _digest(suite.NOTEBOOKS)
    sections, folder = handouts.build(out=out, progress=False)
    assert _digest(suite.NOTEBOOKS) == before, "the stored notebooks were modified"
    return sections, folder


def test_every_section_built(built):
    sections, folder = built
    assert [s.error for s in sections] == [None] * len(sections)
    names = sorted(p.name for p in folder.iterdir())
    assert names == sorted([handouts.MARKER, "index.html"] + [s.page for s in sections])
    assert json.loads((folder / handouts.MARKER).read_text(encoding="utf-8")) == {
        "written_by": "costmodel handouts",
        "scenario": scenario.resolve()["name"],
    }
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
    for page in folder.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        parser = _Resources()
        parser.feed(text)
        remote = [u for u in parser.urls if re.match(r"(https?:)?//", u)]
        assert not remote, f"{page.name}: {remote}"
        assert not re.search(r"url\(\s*['\"]?(https?:)?//", text), page.name
        assert not re.search(r"@import\s+['\"]?(url\()?\s*['\"]?https?://", text), page.name
        assert page.stat().st_size <= 3_000_000, f"{page.name}: {page.stat().st_size} bytes"


def test_cjk_font_stack_and_print_css(built):
    _, folder = built
    for page in folder.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "Noto Sans CJK SC" in text, page.name
        assert "@page" in text and "size: A4" in text, page.name


#: A scenario name that would run script in every page if it were inserted unescaped.
HOSTILE = (
    'Team <img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    "*bold* $x$ [link](javascript:window.__pwned=3)"
)


@pytest.fixture(scope="module")
def readers(tmp_path_factory):
    """The readers' edition (no code) for a team with a hostile scenario name."""
    out = tmp_path_factory.mktemp("readers") / "team"
    overrides = {"step_time": 90, "name": HOSTILE}
    sections, folder = handouts.build(out=out, no_input=True, progress=False, overrides=overrides)
    return sections, folder, overrides


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
    assert "STALE" in index and 'href="99_flaky.html"' in index
    account = evaluate_account(scenario.resolve(overrides={"step_time": 90}))
    assert f"{100 * account['mfu']:.2f}%" in (out / good.with_suffix(".html").name).read_text(
        encoding="utf-8"
    )  # the good page is this build's

    (out / "99_flaky.html").unlink()  # no previous page: the section is listed as failed
    sections, _ = handouts.build(out=out, progress=False)
    assert not next(s for s in sections if s.stem == "99_flaky").stale
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "FAILED" in index and not (out / "99_flaky.html").exists()


def test_two_builds_are_byte_identical(built, tmp_path):
    _, first = built
    _, second = handouts.build(out=tmp_path / "again", progress=False)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


# ------------------------------------------------------------------ in a real browser


def _browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) and playwright are needed")
    return sync_playwright


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


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
                page.wait_for_function(
                    "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                    timeout=30_000,
                )
                page.evaluate("() => MathJax.startup.promise")
                typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
                assert typeset > 0, f"{page_file.name}: no typeset math"
            visible = page.evaluate(
                "() => { const c = document.body.cloneNode(true);"
                " c.querySelectorAll('.jp-InputArea, script, style, mjx-container')"
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
            if page_file.name != "index.html":
                page.wait_for_function(
                    "() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                    timeout=30_000,
                )
                page.evaluate("() => MathJax.startup.promise")
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
