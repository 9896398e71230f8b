"""`make lab`: a scratch copy of the notebooks opened in JupyterLab, checked in a real browser
(JupyterLab served locally, driven by headless Chromium)."""

import hashlib
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import missing

from costmodel.present import lab, suite

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_DIR = ROOT / "build" / "screenshots"


def _digest() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(suite.NOTEBOOKS.iterdir())
        if p.suffix in (".py", ".ipynb")
    }


def test_scratch_copy_is_unpaired_and_collapses_the_rendering_cells(tmp_path):
    before = _digest()
    copies = lab.scratch_copy(tmp_path / "lab")
    assert _digest() == before  # the sources and the stored notebooks are untouched
    assert [c.name for c in copies] == [p.with_suffix(".ipynb").name for p in suite.sources()]
    hidden = 0
    for copy in copies:
        nb = nbformat.read(copy, as_version=4)
        assert "jupytext" not in nb.metadata  # not paired: saving writes this copy only
        for cell in nb.cells:
            tagged = lab.HIDDEN_INPUT in cell.metadata.get("tags", [])
            collapsed = cell.metadata.get("jupyter", {}).get("source_hidden", False)
            assert collapsed == (tagged and cell.cell_type == "code"), cell.source[:80]
            hidden += collapsed
    assert hidden > 0


def test_lab_refuses_the_sources_folder(capsys):
    assert lab.main(["--dir", str(suite.NOTEBOOKS), "--print-command"]) == 2
    assert "holds the notebooks' sources" in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_opens_01_as_prose_with_the_code_collapsed(tmp_path):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or CHROMIUM is None:
        missing("headless Chromium (Debian package chromium) and playwright are needed")
    folder = tmp_path / "lab"
    copies = lab.scratch_copy(folder)
    first = nbformat.read(copies[0], as_version=4)
    collapsed = sum(
        1 for c in first.cells if c.metadata.get("jupyter", {}).get("source_hidden", False)
    )
    port, token = _free_port(), "costmodel-test"
    command = lab.lab_command(
        folder,
        copies[0],
        [
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--IdentityProvider.token={token}",
            "--ServerApp.disable_check_xsrf=True",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
        ],
    )
    server = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api?token={token}", timeout=2)
                break
            except OSError:
                assert server.poll() is None, "jupyter lab exited"
                assert time.monotonic() < deadline, "jupyter lab did not start"
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/{copies[0].name}?token={token}")
            page.wait_for_selector(".jp-NotebookPanel .jp-MarkdownCell", timeout=60_000)
            page.wait_for_timeout(1500)
            title = page.inner_text(".jp-NotebookPanel .jp-MarkdownCell >> nth=0")
            assert title.strip().startswith("01"), title[:80]
            shown = page.locator(".jp-NotebookPanel .jp-InputPlaceholder").count()
            assert shown == collapsed, (shown, collapsed)
            SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT_DIR / "lab.png"))
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(autouse=True)
def _sources_untouched():
    before = _digest()
    yield
    assert _digest() == before, "a lab test wrote the notebooks' sources"
