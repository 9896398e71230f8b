"""The PDF booklet: scenario text is inert in it (escaped, printed with JavaScript off and every
request but the booklet's own aborted), the same pages give the same bytes, and a Chromium that
does not start is one line before any notebook runs."""

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
import uuid
from html.parser import HTMLParser
from pathlib import Path

import pdf_text
import psutil
import pytest
from conftest import missing
from hang import hang_limit

from costmodel.publish import booklet

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Scenario names a hostile user tried (issue 18): each printed a local file or ran a script.
HOSTILE_NAMES = [
    '</title><iframe src="file:///etc/hostname"></iframe><!--',
    "</title><script>document.write('SCRIPT-RAN')</script><!--",
    '<img src="file:///etc/hostname">',
]


class _Head(HTMLParser):
    """The <title> text and every tag of a document."""

    def __init__(self):
        super().__init__()
        self.tags, self.title, self._in_title = [], "", False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False if tag == "title" else self._in_title

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def _page(folder: Path, body: str) -> Path:
    page = folder / "page.html"
    page.write_text(
        f'<!DOCTYPE html><html lang="zh-CN"><head><meta charset="utf-8"></head>'
        f"<body><main><h1>一页 booklet-text</h1>{body}</main></body></html>",
        encoding="utf-8",
    )
    return page


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_booklet_title_is_the_name_as_text(tmp_path, name):
    head = _Head()
    head.feed(booklet.booklet_html([_page(tmp_path, "<p>x</p>")], name))
    assert head.title == name
    assert not {"iframe", "script", "img"} & set(head.tags), head.tags


def _printed_text(pdf: Path) -> str:
    return pdf_text.text(pdf)


def _need_chromium():
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing("playwright is needed")
    if CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) is needed")


def test_booklet_prints_nothing_a_page_loads_or_runs(tmp_path):
    """A real print of a page (and a title) holding an <iframe> of a local file, an image of it,
    a stylesheet and a <script> that would write text: the PDF has the page's own text only."""
    _need_chromium()
    secret = tmp_path / "secret.txt"
    secret.write_text("LOCAL-FILE-CONTENT", encoding="utf-8")
    body = (
        f'<iframe src="{secret.as_uri()}"></iframe><object data="{secret.as_uri()}"></object>'
        f'<link rel="stylesheet" href="{secret.as_uri()}">'
        "<script>document.body.insertAdjacentText('beforeend', 'SCRIPT-RAN')</script>"
        "<p>data-image <img src='data:image/gif;base64,R0lGODlhAQABAAAAACw=' width=10></p>"
    )
    title = f'</title><iframe src="{secret.as_uri()}"></iframe><!--'
    with booklet.Printer() as printer:
        [pdf] = printer.print([([_page(tmp_path, body)], tmp_path / "b.pdf", title)])
    text = _printed_text(pdf)
    assert "booklet-text" in text and "data-image" in text, text
    assert "LOCAL-FILE-CONTENT" not in text and "SCRIPT-RAN" not in text, text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.pdf", "page.html", "secret.txt"]


#: A face no page of the booklet uses elsewhere: where it is printed, the PDF embeds it.
LATE_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")


def test_a_face_the_layout_asks_for_late_is_loaded_before_printing(tmp_path):
    """The page's web fonts are all loaded, and the layout settled, before it is printed: a
    face the layout had not asked for when the print waited for `document.fonts.ready` (here:
    text in a `content-visibility: auto` block far down, laid out only by the print) was
    still loading as the page printed, and the text came out in a fallback font (a Type 3 font
    of its own). The same race on a busy machine made two builds' booklets differ on a page."""
    import base64

    from pypdf import PdfReader

    _need_chromium()
    if not LATE_FONT.is_file():
        missing("DejaVu Sans Mono (Debian package fonts-dejavu-core) is needed")
    face = base64.b64encode(LATE_FONT.read_bytes()).decode()
    style = (
        f"<style>@font-face {{ font-family: LateFace; src: url(data:font/ttf;base64,{face}); }}"
        ".late { font-family: LateFace, sans-serif; content-visibility: auto; }</style>"
    )
    page = tmp_path / "page.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta charset="utf-8">{style}</head><body><main>'
        '<p>early text</p><div style="height: 3000px"></div><p class="late">late text</p>'
        "</main></body></html>",
        encoding="utf-8",
    )
    with booklet.Printer() as printer:
        [pdf] = printer.print([([page], tmp_path / "b.pdf", "t")])
    fonts = [
        str(font.get_object().get("/BaseFont"))
        for sheet in PdfReader(pdf).pages
        for font in (sheet.get("/Resources") or {}).get("/Font", {}).values()
    ]
    assert any(name.endswith("+DejaVuSansMono") for name in fonts), fonts
    assert "None" not in fonts, fonts  # no Type 3 font: nothing printed in a stand-in
    assert "late text" in _printed_text(pdf)


LINKS = (
    '<p><a href="page.html">this page</a> <a href="other.html#x">a page beside it</a> '
    '<a href="#top">an anchor</a> <a href="https://example.org/">a site</a></p>'
)


def test_booklet_links_go_to_sections_and_never_to_the_build_folder(tmp_path):
    document = booklet.booklet_html([_page(tmp_path, LINKS)], "t")
    assert '<section class="booklet-part" id="booklet-page">' in document
    assert '<a href="#booklet-page">this page</a>' in document
    assert "<a>a page beside it</a>" in document
    assert '<a href="#top">' in document and '<a href="https://example.org/">' in document


def test_the_same_pages_print_to_the_same_bytes(tmp_path, monkeypatch):
    """The same pages printed seconds apart from two folders (two builds, two --out folders),
    each by a build with a fresh HOME (an empty font cache, as in CI: the font is converted
    again), give byte-identical PDFs (their dates fixed, the font's own too, no link to the
    folder), which still read (pypdf, strict)."""
    from pypdf import PdfReader

    _need_chromium()
    pdfs = []
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    for build in ("one", "two"):
        (tmp_path / build / "home").mkdir(parents=True)
        monkeypatch.setenv("HOME", str(tmp_path / build / "home"))
        page = _page(tmp_path / build, "<p>中文段落 text</p>" + LINKS)
        with booklet.Printer() as printer:
            pdfs += printer.print([([page], tmp_path / build / "booklet.pdf", "同一本")])
        assert list((tmp_path / build / "home").rglob("*.ttf")), "the font was not converted"
        time.sleep(1.1)  # Chromium dates a PDF to the second, the font tool a font
    first, second = pdfs
    assert first.read_bytes() == second.read_bytes()
    assert b"file:" not in first.read_bytes()
    reader = PdfReader(first, strict=True)
    assert reader.metadata.creation_date.year == 2000 and reader.metadata.title == "同一本"
    assert "中文段落" in unicodedata.normalize("NFKC", _printed_text(first))


def test_the_converted_font_keeps_the_faces_dates(monkeypatch):
    """The booklet's font, converted at two different times (the font tool's clock:
    SOURCE_DATE_EPOCH), has the same bytes: it was saved with the time of its conversion, so a
    booklet printed with an empty font cache (a fresh HOME, CI) differed from one printed with
    the cache warm."""
    from costmodel.publish import fonts

    path = fonts.FONT_DIR / fonts.WEIGHTS[400]
    if not path.is_file():
        missing("the font Noto Sans CJK (Debian package fonts-noto-cjk) is needed")
    index = fonts._face_index(path)
    made = []
    for epoch in ("1000000000", "2000000000"):
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
        made.append(fonts.truetype_subset(path, index, "MFU 中文"))
    assert made[0] == made[1]


def _minimal_pdf(title: str, created: str, pdf_id: str) -> bytes:
    """A one-page PDF with an Info dictionary and a trailer /ID, its xref offsets right."""
    objects = [
        f"<</Title ({title})\n/CreationDate (D:{created})\n/ModDate (D:{created})>>",
        "<</Type /Catalog /Pages 3 0 R>>",
        "<</Type /Pages /Kids [4 0 R] /Count 1>>",
        "<</Type /Page /Parent 3 0 R /MediaBox [0 0 200 200]>>",
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (
        f"trailer\n<</Size {len(objects) + 1}\n/Root 2 0 R\n/Info 1 0 R\n"
        f"/ID [<{pdf_id}> <{pdf_id}>]>>\nstartxref\n{xref}\n%%EOF\n"
    ).encode()
    return out


def test_reproducible_derives_the_id_in_place():
    """A PDF with an /ID (Chromium writes one in some versions): dates and /ID rewritten to the
    same length, the /ID derived from the content, the cross-reference table still right."""
    from pypdf import PdfReader

    one = _minimal_pdf("a", "20261201103155+01'00'", "1F" * 16)
    again = _minimal_pdf("a", "20271231235959-05'30'", "2E" * 16)
    other = _minimal_pdf("b", "20261201103155+01'00'", "1F" * 16)
    assert PdfReader(io.BytesIO(one), strict=True).metadata.title == "a"
    fixed = booklet.reproducible(one)
    assert len(fixed) == len(one) and fixed == booklet.reproducible(again)
    assert booklet.reproducible(other) != fixed
    reader = PdfReader(io.BytesIO(fixed), strict=True)
    assert reader.metadata.creation_date.year == 2000 and reader.metadata.title == "a"
    assert reader.pages[0].mediabox.width == 200  # found through the xref offsets
    pdf_id = reader.trailer["/ID"][0]
    assert len(pdf_id) == 16 and pdf_id not in (bytes.fromhex("1F" * 16), bytes(16))


# ------------------------------------------------------------------ a Chromium that does not start


def _fake_chromium(folder: Path, case: str) -> Path:
    folder.mkdir()
    if case == "memory limit":
        if CHROMIUM is None or shutil.which("prlimit") is None:
            missing("headless Chromium and prlimit (util-linux) are needed")
        script = f'exec prlimit --as=1000000000 "{CHROMIUM}" "$@"'
    elif case == "hangs":
        script = "exec sleep 600"
    else:  # Ubuntu's chromium-browser without its snap
        script = (
            "echo \"Command '/usr/bin/chromium-browser' requires the chromium snap to be "
            'installed." >&2\nexit 1'
        )
    fake = folder / "chromium"
    fake.write_text(f"#!/bin/sh\n{script}\n", encoding="utf-8")
    fake.chmod(0o755)
    return fake


def _marked(mark: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get("COSTMODEL_TEST_RUN") == mark:
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("case", ["snap stub", "hangs", "memory limit"])
def test_a_chromium_that_does_not_start_is_one_line_before_any_notebook(tmp_path, case):
    """`handouts --pdf` with a Chromium that exits, hangs (COSTMODEL_CHROMIUM_TIMEOUT=3) or is
    killed under a memory limit: one line, exit 2, no notebook ran (no output folder), no
    browser, driver or kernel left, no temporary folder."""
    fake = _fake_chromium(tmp_path / "bin", case)
    mark = uuid.uuid4().hex
    tmp = Path(tempfile.mkdtemp(prefix="cmt-", dir="/tmp"))  # short: the printer's folder too
    env = {
        **os.environ,
        "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
        "TMPDIR": str(tmp),
        "COSTMODEL_CHROMIUM_TIMEOUT": "3",
        "COSTMODEL_TEST_RUN": mark,
    }
    try:
        result = subprocess.run(
            [sys.executable, "-m", "costmodel", "handouts", "--out", str(tmp_path / "out")]
            + ["--pdf"],
            capture_output=True,
            text=True,
            env=env,
            timeout=hang_limit(12),  # refused at the browser's start: seconds
        )
        left_in_tmp = sorted(p.name for p in tmp.iterdir())
        alive = [p.name() for p in psutil.wait_procs(_marked(mark), timeout=hang_limit(1))[1]]
    finally:
        for process in _marked(mark):  # what a failed run left: not for the next test
            with contextlib.suppress(psutil.Error):
                process.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    [line] = result.stderr.splitlines()
    assert line.startswith(f"costmodel: error: --pdf: Chromium at '{fake}' did not start ("), line
    assert "expected" in line and result.returncode == 2, result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]  # no output folder
    assert left_in_tmp == []
    assert alive == []


def test_the_drivers_temporary_folders_go_with_the_printer(tmp_path, monkeypatch):
    """Playwright's driver makes the browser's profile and artifacts folders under its own
    TMPDIR: under the build's, a Ctrl-C that killed it early left them there (caught once under
    load by tests/publish/test_handouts_safety.py). The driver starts under the printer's
    folder, which the printer removes; this process's TMPDIR is put back at once."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    with booklet.Printer() as printer:
        printer.ready()
        driver_dirs = set()
        for child in psutil.Process().children(recursive=True):
            try:
                environ = child.environ()
            except (psutil.Error, OSError):
                continue
            if "PW_LANG_NAME" in environ:  # Playwright's driver (and the browser it starts)
                driver_dirs.add(environ.get("TMPDIR"))
        assert driver_dirs == {str(printer._tmp)}
        assert os.environ["TMPDIR"] == str(tmp_path)
    assert list(tmp_path.iterdir()) == []
    assert not printer._tmp.exists()
