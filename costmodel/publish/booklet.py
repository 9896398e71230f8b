"""The printable booklet: the index and every section of one edition in one A4 PDF, printed by
headless Chromium (the Debian package `chromium`, driven through Playwright), with page numbers
in the footer and nothing cut: code and the cells of wide tables wrap, and plots, tables, display
math and answer spaces do not break across pages (the pages' print stylesheet). The conventions
document is its last part. Its text font is embedded as TrueType (costmodel.publish.fonts), not
as Chromium's Type 3 glyphs; its plots are SVG (the handouts' kernels draw them so).

The booklet is one HTML file assembled from the built pages (each page's <main>), each section
starting on a new page, printed once. Scenario text is data: the title is escaped, and the
browser prints with JavaScript off and every request but the booklet file itself aborted (the
pages embed their images as data: URIs, which make no request), so nothing in a page can load or
run anything. The PDF's dates are fixed and its /ID (when there is one) derived from its
content: the same pages give the same bytes.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
from pathlib import Path

from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.publish.fonts import font_css
from costmodel.publish.pages import CONVENTIONS_PAGE

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
FOOTER = (
    '<div style="font-size:8px;width:100%;text-align:center;color:#57606a;">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)
#: How long the browser may take to start, in seconds (COSTMODEL_CHROMIUM_TIMEOUT overrides it).
START_TIMEOUT = 60.0
#: The date written into every booklet (a PDF date, UTC): a build's bytes do not depend on when
#: it ran.
PDF_DATE = b"20000101000000"
_MAIN = re.compile(r"<main[^>]*>(.*)</main>", re.S)
_PDF_DATE = re.compile(rb"/(CreationDate|ModDate) \(D:(\d{14})([-+Z0-9']{0,7})\)")
_PDF_ID = re.compile(rb"/ID ?\[ ?<[0-9A-Fa-f]{1,128}> ?<[0-9A-Fa-f]{1,128}> ?\]")
_HEX = re.compile(rb"<[0-9A-Fa-f]{1,128}>")
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)
_LINK = re.compile(r'(<a\b[^>]*?)\shref="([^"]*)"')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def chromium() -> str:
    """The path of a Chromium executable, or CostModelError saying how to install one."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise CostModelError(
        "--pdf: no Chromium found (chromium, chromium-browser); expected the Debian package "
        "chromium (apt-get install chromium fonts-noto-cjk), or build without --pdf"
    )


def _anchor(page: str) -> str:
    return "booklet-" + page.removesuffix(".html")


def _booklet_links(body: str, pages: list[str]) -> str:
    """The links of a page as the booklet has them: one to a page in the booklet goes to its
    section, one within the page stays, one to a file beside the pages (not in the booklet) is
    text only; absolute links stay. A relative link would otherwise be printed as the address
    of the build's temporary folder (a build's PDF then depends on where it was built)."""

    def link(match: re.Match) -> str:
        target = html.unescape(match[2])
        if target.startswith("#") or _SCHEME.match(target):
            return match[0]
        page = target.split("#", 1)[0]
        if page in pages:
            return f'{match[1]} href="#{html.escape(_anchor(page))}"'
        return match[1]

    return _LINK.sub(link, body)


def booklet_html(pages: list[Path], title: str, fonts: str = "") -> str:
    """One HTML document: the stylesheets of the first page (the index) and of the last section
    (a notebook's page; the conventions page, a booklet's last part, brings none: its own would
    restyle the whole booklet), then `fonts` (fonts.font_css), then each page's <main>, each
    starting on a new printed page (a link to a page goes to its section)."""
    styled = [pages[0], *[p for p in pages[1:] if p.name != CONVENTIONS_PAGE][-1:]]
    styles = "\n".join(
        dict.fromkeys(s for page in styled for s in _STYLE.findall(page.read_text("utf-8")))
    )
    names = [page.name for page in pages]
    parts = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        match = _MAIN.search(text)
        body = match.group(1) if match else text.split("<body", 1)[-1].split(">", 1)[-1]
        body = _booklet_links(body.replace("</body>", "").replace("</html>", ""), names)
        anchor = html.escape(_anchor(page.name))
        parts.append(f'<section class="booklet-part" id="{anchor}">{body}</section>')
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>{styles}{fonts}"
        "<style>.booklet-part + .booklet-part { break-before: page; page-break-before: always; }"
        # the index's tables (the scenario's inputs: about 80 rows) may run on to the next page
        # (the sections' stylesheet keeps a table whole, which left the index a near-blank page)
        ".booklet-part:first-child table { break-inside: auto; page-break-inside: auto; }"
        ".handout-banner { display: none; }</style></head>"
        f"<body><main>{''.join(parts)}</main></body></html>"
    )


def reproducible(pdf: bytes) -> bytes:
    """The PDF with its creation and modification dates set to PDF_DATE (UTC) and its /ID, if
    it has one, derived from its content: the same pages give the same bytes. Each field is
    rewritten in place to the same length, so the cross-reference offsets stay valid."""

    def fixed_date(match: re.Match) -> bytes:
        zone = re.sub(rb"\d", b"0", match[3]).replace(b"-", b"+")
        return b"/" + match[1] + b" (D:" + PDF_DATE + zone + b")"

    def each_id(text: bytes, digest: bytes) -> bytes:  # <hex> <hex>, each the same length
        return _HEX.sub(lambda h: b"<" + digest[: len(h[0]) - 2] + b">", text)

    pdf = _PDF_DATE.sub(fixed_date, pdf)
    blank = _PDF_ID.sub(lambda m: each_id(m[0], b"0" * 128), pdf)
    digest = hashlib.sha256(blank).hexdigest().upper().encode() * 2
    return _PDF_ID.sub(lambda m: each_id(m[0], digest), pdf)


#: Run in the booklet's page before it is printed: every face of the document's fonts loaded,
#: the layout forced, and the font set waited for again (the layout may start a load of its
#: own). `document.fonts.ready` alone waits only for the loads already begun: a face no layout
#: had asked for yet was still loading when the print laid the page out, and Chromium printed
#: that text in a stand-in font; whether the layout had asked by then depended on timing, so on
#: a busy machine two builds' booklets could differ on a page
#: (tests/publish/test_booklet.py::test_a_face_the_layout_asks_for_late_is_loaded_before_printing).
SETTLE = """Promise.all(Array.from(document.fonts, face => face.load()))
  .then(() => document.body.getBoundingClientRect())
  .then(() => document.fonts.ready)
  .then(() => null)"""


def _only(url: str):
    """A route handler that lets the request for `url` through and aborts every other."""

    async def route(route) -> None:
        if route.request.url == url:
            await route.continue_()
        else:
            await route.abort("blockedbyclient")

    return route


async def _print_one(context, document: str, target: Path) -> Path:
    source = target.with_suffix(".booklet.html")
    partial = target.with_suffix(".pdf.tmp")
    try:
        source.write_text(document, encoding="utf-8")
        page = await context.new_page()
        await page.route("**/*", _only(source.as_uri()))  # nothing but the booklet loads
        # laid out for print from the start: loaded for the screen, the document is laid out
        # twice (about 1.5 s of CPU a booklet)
        await page.emulate_media(media="print")
        await page.goto(source.as_uri(), wait_until="load")
        # fonts and layout settled before printing: DevTools evaluates this with the page's
        # scripts off (SETTLE says why)
        await page.evaluate(SETTLE)
        pdf = await page.pdf(
            format="A4",
            print_background=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
            margin={"top": "14mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
        )
        await page.close()
        partial.write_bytes(reproducible(pdf))
        partial.replace(target)
        return target
    finally:
        source.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)


def start_timeout() -> float:
    """How long the browser may take to start: COSTMODEL_CHROMIUM_TIMEOUT (seconds), or
    START_TIMEOUT."""
    given = os.environ.get("COSTMODEL_CHROMIUM_TIMEOUT", "").strip()
    if not given:
        return START_TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise CostModelError(
            f"COSTMODEL_CHROMIUM_TIMEOUT: {shown(given)} is not allowed; expected seconds, a "
            "number above 0 and at most 3600"
        )
    return seconds


def _why(error: BaseException, timeout: float) -> str:
    """Why the browser did not start, in a few words: its exit, the last line it wrote."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    if isinstance(error, (PlaywrightTimeout, TimeoutError)):
        return f"no answer in {timeout:g} s"
    text = str(error)
    reasons = []
    exited = re.search(r"<process did exit: exitCode=(\w+), signal=(\w+)>", text)
    if exited:
        code, signal = exited.groups()
        reasons.append(f"exit status {code}" if code != "null" else f"killed by {signal}")
    said = re.findall(r"\]\[err\] (.*\S)", text)
    if said:
        reasons.append(f"its last message: {shown(said[-1], 160)}")
    return "; ".join(reasons) or shown(text.splitlines()[0] if text else type(error).__name__, 160)


class Printer:
    """One headless Chromium, started in a thread of its own as soon as the printer is made (the
    build makes it before the notebooks run, so the browser is up when the pages are, and checks
    with `ready` that it started before the first notebook runs), then handed the booklets: all
    print at the same time, each in a page of its own, in one browser and one context (a second
    browser or context costs more CPU than the booklets gain from it on two cores). Each page
    has a renderer process of its own, so printing them together shares no layout or font
    state; each waits for its own fonts (SETTLE). Close it whatever happens (a context
    manager)."""

    def __init__(self) -> None:
        import asyncio
        import threading

        executable = chromium()
        self._executable = executable
        self._timeout = start_timeout()
        self._loop = asyncio.new_event_loop()
        # Playwright's futures that nobody awaits any more (a Ctrl-C reaches the browser and its
        # driver too) would be reported on stderr as they are collected: a build says one line
        self._loop.set_exception_handler(lambda loop, context: None)
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="booklet-printer", daemon=True
        )
        self._thread.start()
        self._playwright = self._browser = None
        self._closed = False
        self._tmp = _browser_tmp()
        self._started = asyncio.run_coroutine_threadsafe(
            self._start(executable, self._tmp), self._loop
        )

    async def _start(self, executable: str, tmp: Path):
        from playwright.async_api import async_playwright

        env = {**os.environ, "TMPDIR": str(tmp)}
        # Playwright's driver makes the browser's profile and artifacts folders in its own
        # TMPDIR, which it takes from this process's environment when it starts: a Ctrl-C that
        # kills it before it removes them left them in the build's TMPDIR. Started under the
        # printer's folder, they go with it (`close`). Nothing else of this process reads TMPDIR
        # meanwhile (tempfile's folder is fixed: `_browser_tmp` asked for it; the workers set
        # their own), and it is put back as soon as the driver runs.
        saved = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = str(tmp)
        try:
            self._playwright = await async_playwright().start()
        finally:
            if saved is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = saved
        self._browser = await self._playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, env=env, timeout=self._timeout * 1000
        )
        # JavaScript off; a page that is not a booklet's (none should be) loads nothing
        context = await self._browser.new_context(offline=True, java_script_enabled=False)
        await context.route("**/*", lambda route: route.abort("blockedbyclient"))
        return context

    def ready(self) -> None:
        """Wait until the browser has started (at most `start_timeout()` seconds, and a few
        more for Playwright to say so). If it did not, close the printer (no browser, driver or
        temporary folder is left) and raise CostModelError, one line saying why."""
        try:
            self._started.result(self._timeout + 10)
            return
        except Exception as error:  # TimeoutError, Playwright's TargetClosedError, ...
            reason = _why(error, self._timeout)
        self.close()
        raise CostModelError(
            f"--pdf: Chromium at {shown(self._executable, 200)} did not start ({reason}); "
            "expected a Chromium that runs headless (the Debian package chromium; Ubuntu's "
            "chromium-browser needs its snap), or build without --pdf"
        )

    def print(self, jobs: list[tuple[list[Path], Path, str]]) -> list[Path]:
        """Print each job (its pages, the target PDF, a title) as one A4 booklet; each PDF is
        written atomically."""
        import asyncio

        self.ready()
        documents = [booklet_html(pages, title) for pages, _, title in jobs]
        # one font for every booklet of the build, with the characters of all of them
        embedded = font_css(documents)
        documents = [booklet_html(pages, title, embedded) for pages, _, title in jobs]

        async def print_all() -> list[Path]:
            context = await asyncio.wrap_future(self._started)
            printing = (_print_one(context, doc, job[1]) for doc, job in zip(documents, jobs))
            return list(await asyncio.gather(*printing))

        return asyncio.run_coroutine_threadsafe(print_all(), self._loop).result()

    def close(self, timeout: float = 5.0) -> None:
        """Close the browser and stop the thread; the browser's processes are killed if it does
        not close in time."""
        import asyncio

        async def stop() -> None:
            try:
                await asyncio.wrap_future(self._started)
            except BaseException:
                pass
            for closing in (self._browser, self._playwright):
                if closing is not None:
                    try:
                        await (closing.close() if closing is self._browser else closing.stop())
                    except BaseException:
                        pass

        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout)
        except BaseException:
            _kill_drivers()
        finally:  # the loop is stopped, not closed: a transport of a driver that a Ctrl-C
            # killed may still be collected later, and would then need it
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> Printer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _browser_tmp() -> Path:
    """A folder of the printer's own for the browser's temporary files (Chromium's, which a
    browser killed by a Ctrl-C leaves behind; the printer removes the folder). Its path is short:
    Chromium puts a Unix socket there, and a socket path over 107 bytes makes it abort. It
    records its owner (PID and start time); the folders that printers killed by SIGKILL left
    are removed first (only those whose process is gone)."""
    import tempfile

    from costmodel.publish.tempdirs import owned_tempdir, sweep

    base = tempfile.gettempdir()
    if len(base) > 40 and Path("/tmp").is_dir():
        base = "/tmp"
    sweep(base, "cmb-")
    return owned_tempdir("cmb-", base)


def _kill_drivers() -> None:
    """Kill Playwright's driver processes started by this process, and their browsers."""
    import psutil

    for child in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if "run-driver" not in " ".join(child.cmdline()):
                continue
            victims = [child, *child.children(recursive=True)]
        except psutil.Error:
            continue
        for victim in victims:
            try:
                victim.kill()
            except psutil.Error:
                pass


def write_pdfs(jobs: list[tuple[list[Path], Path, str]]) -> list[Path]:
    """Print each job (its pages, the target PDF, a title) as one A4 booklet, all at the same
    time in one browser; each PDF is written atomically."""
    with Printer() as printer:
        return printer.print(jobs)


def write_pdf(pages: list[Path], target: Path, title: str) -> Path:
    """Print the pages as one A4 booklet to `target` (written atomically)."""
    return write_pdfs([(pages, target, title)])[0]
