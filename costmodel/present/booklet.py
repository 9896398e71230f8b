"""The printable booklet: the index and every section of one edition in one A4 PDF, printed by
headless Chromium (the Debian package `chromium`, driven through Playwright), with page numbers
in the footer and nothing cut: code wraps, and plots, tables and display math do not break
across pages (the pages' print stylesheet).

The booklet is one HTML file assembled from the built pages (each page's <main>), each section
starting on a new page, printed once.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from costmodel.errors import CostModelError

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
_MAIN = re.compile(r"<main[^>]*>(.*)</main>", re.S)
_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)


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


def booklet_html(pages: list[Path], title: str) -> str:
    """One HTML document: the first page's stylesheets, then each page's <main>, each starting
    on a new printed page."""
    first = pages[0].read_text(encoding="utf-8")
    styles = "\n".join(
        dict.fromkeys(_STYLE.findall(first) + _STYLE.findall(pages[-1].read_text("utf-8")))
    )
    parts = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        match = _MAIN.search(text)
        body = match.group(1) if match else text.split("<body", 1)[-1].split(">", 1)[-1]
        body = body.replace("</body>", "").replace("</html>", "")
        parts.append(f'<section class="booklet-part">{body}</section>')
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8">'
        f"<title>{title}</title>{styles}"
        "<style>.booklet-part + .booklet-part { break-before: page; page-break-before: always; }"
        ".handout-banner { display: none; }</style></head>"
        f"<body><main>{''.join(parts)}</main></body></html>"
    )


async def _print_one(context, pages: list[Path], target: Path, title: str) -> Path:
    source = target.with_suffix(".booklet.html")
    partial = target.with_suffix(".pdf.tmp")
    try:
        source.write_text(booklet_html(pages, title), encoding="utf-8")
        page = await context.new_page()
        # laid out for print from the start: loaded for the screen, the document is laid out
        # twice (about 1.5 s of CPU a booklet)
        await page.emulate_media(media="print")
        await page.goto(source.as_uri(), wait_until="load")
        await page.pdf(
            path=str(partial),
            format="A4",
            print_background=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
            margin={"top": "14mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
        )
        await page.close()
        partial.replace(target)
        return target
    finally:
        source.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)


class Printer:
    """One headless Chromium, started in a thread of its own as soon as the printer is made (the
    build makes it before the notebooks run, so the browser is up when the pages are), then
    handed the booklets: all print at the same time, each in a page of its own, in one browser
    and one context (a second browser or context costs more CPU than the booklets gain from it
    on two cores). Close it whatever happens (a context manager)."""

    def __init__(self) -> None:
        import asyncio
        import threading

        executable = chromium()
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
        import os

        from playwright.async_api import async_playwright

        env = {**os.environ, "TMPDIR": str(tmp)}
        self._playwright = await async_playwright().start()
        self._browser = await self._playwright.chromium.launch(
            executable_path=executable, args=CHROMIUM_ARGS, env=env
        )
        return await self._browser.new_context(offline=True)

    def print(self, jobs: list[tuple[list[Path], Path, str]]) -> list[Path]:
        """Print each job (its pages, the target PDF, a title) as one A4 booklet; each PDF is
        written atomically."""
        import asyncio

        async def print_all() -> list[Path]:
            context = await asyncio.wrap_future(self._started)
            return list(await asyncio.gather(*(_print_one(context, *job) for job in jobs)))

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

    from costmodel.present.tempdirs import owned_tempdir, sweep

    base = tempfile.gettempdir()
    if len(base) > 40 and Path("/tmp").is_dir():
        base = "/tmp"
    sweep(base, "cmb-")
    return owned_tempdir("cmb-", base)


def _kill_drivers() -> None:
    """Kill Playwright's driver processes started by this process, and their browsers."""
    import os

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
