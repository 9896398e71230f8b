"""`make lab`: a scratch copy of the notebooks opened in JupyterLab, checked in a real browser
(JupyterLab served locally, driven by headless Chromium)."""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from conftest import missing
from hang import hang_limit, hang_limit_ms

from costmodel.publish import lab, suite

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_DIR = ROOT / "build" / "screenshots"


def _wait_until_serving(port: int, token: str, process, seconds: float) -> None:
    """Wait until Jupyter's API answers on `port` (the process must not exit meanwhile)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(
                f"http://127.0.0.1:{port}/api?token={token}", timeout=hang_limit(0.1)
            )
            return
        except OSError:
            assert process.poll() is None, "jupyter lab exited"
            assert time.monotonic() < deadline, "jupyter lab did not start"
            time.sleep(0.2)


def _digest() -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(suite.NOTEBOOKS.iterdir())
        if p.suffix in (".py", ".ipynb")
    }


def test_scratch_copy_is_unpaired_and_collapses_the_rendering_cells(tmp_path):
    before = _digest()
    copies = lab.scratch_copy(tmp_path / "lab").notebooks
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


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    "given,said",
    [
        (suite.NOTEBOOKS, "is the notebooks folder"),
        (ROOT / "tests", "is one of the project's sources"),  # make test collected them
        (ROOT / "tests" / "lab", "is inside one of the project's sources"),
        (ROOT / "costmodel" / "lab", "is inside the costmodel package"),
        (ROOT, "contains the project's sources"),
        ("link", "is a symbolic link"),
        (".", "is the working directory"),
    ],
)
def test_lab_refuses_what_handouts_out_refuses(tmp_path, monkeypatch, capsys, given, said):
    """`lab --dir` refuses the places `handouts --out` refuses (output.check_place): `--dir
    tests` wrote the notebooks into the project's tests, which `make test` then collected."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    watched = [ROOT, ROOT / "tests", ROOT / "costmodel", suite.NOTEBOOKS, tmp_path / "real"]
    before = [_listing(folder) for folder in watched]
    assert lab.main(["--dir", str(given), "--print-command"]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("costmodel: error: --dir: ") and said in line, line
    assert captured.out == ""
    assert [_listing(folder) for folder in watched] == before


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("link", [".settings", ".settings/@jupyterlab"])
def test_lab_writes_nothing_through_a_symbolic_link(tmp_path, capsys, link):
    """A symbolic link where Lab's settings go (`--dir D` with D/.settings a link elsewhere):
    the lab wrote its settings through it, outside D, and Lab would write there too. One
    line, nothing written; and the lab's own writer never follows a link in D."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.txt").write_bytes(b"keep me\n")
    folder = tmp_path / "lab"
    (folder / link).parent.mkdir(parents=True)
    (folder / link).symlink_to(outside)
    assert lab.main(["--dir", str(folder), "--print-command"]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"costmodel: error: --dir: '{folder / link}' is a symbolic link"), line
    assert captured.out == ""
    assert _tree(outside) == {"mine.txt": b"keep me\n"}
    assert not list(folder.glob("*.ipynb"))
    name = f"{link}/apputils-extension/notification.jupyterlab-settings"
    assert lab._write_ours(folder, name, b"{}\n", {}) is False  # kept: not written
    assert _tree(outside) == {"mine.txt": b"keep me\n"}


@pytest.mark.parametrize("case", ["nested", "a link", "another shape", "too large", "not UTF-8"])
def test_a_record_the_lab_did_not_write_is_one_line_and_kept(tmp_path, capsys, case):
    """A `.costmodel-lab.json` the lab did not write (a nested one raised RecursionError; one
    of another shape was silently replaced): one line, and it is left byte for byte (a link
    stays a link to what it names), with nothing written beside it."""
    folder = tmp_path / "lab"
    folder.mkdir()
    record = folder / lab.MANIFEST
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(b'{"written": {}}\n')
    if case == "a link":
        record.symlink_to(elsewhere)
    else:
        record.write_bytes(
            {
                "nested": b"[" * 200_000 + b"]" * 200_000,
                "another shape": b'{"written": ["01_mfu_hfu.ipynb"]}\n',
                "too large": b'{"written": {}}' + b" " * lab.MAX_RECORD_BYTES,
                "not UTF-8": b'{"written": {"\xff": "x"}}',
            }[case]
        )
    data = record.read_bytes()
    assert lab.main(["--dir", str(folder), "--print-command"]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith(f"costmodel: error: --dir: '{record}' is not the record"), line
    assert "remove it" in line and captured.out == ""
    assert record.is_symlink() == (case == "a link") and record.read_bytes() == data
    assert elsewhere.read_bytes() == b'{"written": {}}\n'
    assert _listing(folder) == [lab.MANIFEST]


#: A sitecustomize that sends the process a signal in its first moments: while `nbformat` is
#: imported (the lab's imports take about a second), or at the first line of main.
SIGNAL_AT = """
import os, signal, sys

AT, SIGNUM = os.environ["LAB_SIGNAL_AT"], getattr(signal, os.environ["LAB_SIGNAL"])


class Hook:
    def find_spec(self, name, path=None, target=None):
        if name == "nbformat":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIGNUM)
        return None


def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "main":
        if frame.f_globals.get("__name__") == "__main__":
            sys.setprofile(None)
            os.kill(os.getpid(), SIGNUM)


if AT == "import":
    sys.meta_path.insert(0, Hook())
else:
    sys.setprofile(profile)
"""


@pytest.mark.parametrize("at", ["import", "main"])
@pytest.mark.parametrize(
    "name,said,code", [("SIGINT", "interrupted", 130), ("SIGTERM", "terminated", 143)]
)
def test_a_signal_in_the_first_moments_of_make_lab_is_one_line(tmp_path, at, name, said, code):
    """Ctrl-C (or SIGTERM) while `make lab` imports what it needs, or as its main begins: one
    line and 128 + the signal's number (the command line's handlers, installed first), not a
    traceback; no notebook is written."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SIGNAL_AT, encoding="utf-8")
    paths = [str(site), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    result = subprocess.run(
        [sys.executable, "-m", "costmodel.publish.lab", "--dir", str(tmp_path / "lab")]
        + ["--print-command"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "LAB_SIGNAL_AT": at, "LAB_SIGNAL": name},
        timeout=hang_limit(2),  # the lab's imports and its copy: about 2 s idle
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert (result.returncode, result.stderr, result.stdout) == (code, f"costmodel: {said}\n", "")
    assert not list(tmp_path.glob("lab/*"))


def _saved_by_lab(path: Path, text: str) -> bytes:
    """Edit the first code cell of a copy and save it as JupyterLab does (JSON, indent 1)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code")
    cell["source"] = [text]
    data = (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8")
    path.write_bytes(data)
    return data


def test_a_second_lab_keeps_the_readers_work(tmp_path, capsys):
    """Edits the reader saved (a notebook, a Lab setting) are kept byte for byte and named; a
    notebook the reader deleted comes back; the reader's own files stay."""
    folder = tmp_path / "lab"
    assert lab.main(["--dir", str(folder), "--print-command"]) == 0
    capsys.readouterr()
    edited, deleted = sorted(folder.glob("*.ipynb"))[1:3]
    saved = _saved_by_lab(edited, "overrides = {'step_time': 90}  # mine")
    settings = folder / ".settings" / next(iter(lab.SETTINGS))
    settings.write_text('{"fetchNews": "true"}\n', encoding="utf-8")  # a setting changed in Lab
    (folder / "my_notes.txt").write_text("读者的笔记", encoding="utf-8")
    deleted.unlink()

    assert lab.main(["--dir", str(folder), "--print-command"]) == 0
    out = capsys.readouterr().out
    assert edited.read_bytes() == saved  # the reader's edit, byte for byte
    assert settings.read_text(encoding="utf-8") == '{"fetchNews": "true"}\n'
    assert (folder / "my_notes.txt").read_text(encoding="utf-8") == "读者的笔记"
    assert deleted.is_file()
    [line] = [x for x in out.splitlines() if x.startswith("kept")]
    assert edited.name in line and settings.name in line, line
    assert deleted.name not in line, line


def test_a_copy_the_lab_wrote_and_nobody_changed_is_refreshed(tmp_path, capsys):
    """Whether the reader changed a copy is decided by its content (the sha256 the lab
    recorded), not by its time: an earlier copy of the lab's own is replaced."""
    folder = tmp_path / "lab"
    stale = lab.scratch_copy(folder).notebooks[3]
    fresh = stale.read_bytes()
    record = json.loads((folder / lab.MANIFEST).read_text(encoding="utf-8"))
    stale.write_bytes(b'{"cells": [], "note": "an earlier copy"}\n')
    record["written"][stale.name] = hashlib.sha256(stale.read_bytes()).hexdigest()
    (folder / lab.MANIFEST).write_text(json.dumps(record), encoding="utf-8")
    os.utime(stale, (1, 1))
    assert lab.main(["--dir", str(folder), "--print-command"]) == 0
    assert stale.read_bytes() == fresh
    assert "kept" not in capsys.readouterr().out


def test_lab_dir_keeps_a_notebook_it_did_not_write(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    name = suite.sources()[0].with_suffix(".ipynb").name
    (folder / name).write_bytes(b"the reader's own notebook\n")
    assert lab.main(["--dir", str(folder), "--print-command"]) == 0
    assert (folder / name).read_bytes() == b"the reader's own notebook\n"
    assert name in next(x for x in capsys.readouterr().out.splitlines() if x.startswith("kept"))


def _unwritable(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes anywhere a mode allows: /sys refuses a new folder
        return Path("/sys/costmodel-lab")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    return locked / "lab"


@pytest.mark.parametrize("case", ["file", "under a file", "symlink loop", "unwritable"])
def test_lab_dir_that_cannot_be_a_folder_is_one_line(tmp_path, capsys, case):
    afile = tmp_path / "notes.txt"
    afile.write_bytes(b"keep me\n")
    (tmp_path / "loop").symlink_to("loop")
    given = {
        "file": afile,
        "under a file": afile / "lab",
        "symlink loop": tmp_path / "loop" / "lab",
        "unwritable": _unwritable(tmp_path),
    }[case]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert lab.main(["--dir", str(given), "--print-command"]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("costmodel: error: --dir: ") and "expected" in line, line
    assert captured.out == ""
    assert (
        afile.read_bytes() == b"keep me\n" and sorted(p.name for p in tmp_path.iterdir()) == before
    )


def _lab_environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER_", "XDG_"))}
    (home / "tmp").mkdir(parents=True)
    return {**env, "HOME": str(home), "TMPDIR": str(home / "tmp")}


def test_lab_stopped_without_a_terminal_leaves_no_keys(tmp_path):
    """`make lab` under setsid, stdin not a terminal (CI, nohup), stopped by SIGINT: Lab, its
    kernel and every token and kernel-key file it wrote are gone."""
    home, port, token = tmp_path / "home", _free_port(), "costmodel-test"
    lab_process = subprocess.Popen(
        [sys.executable, "-m", "costmodel.publish.lab", "--dir", str(tmp_path / "lab")]
        + ["--no-browser", f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=_lab_environment(home),
        cwd=tmp_path,
    )
    try:
        _wait_until_serving(port, token, lab_process, hang_limit(8))  # Lab starts in seconds
        start = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/kernels?token={token}", data=b"{}", method="POST"
        )
        urllib.request.urlopen(start, timeout=hang_limit(2))
        keys = [p for p in tmp_path.rglob("*") if p.name.startswith(("jpserver-", "kernel-"))]
        assert keys, "the lab wrote no token or kernel file: the test no longer sees them"
        processes = [psutil.Process(lab_process.pid)]
        processes += processes[0].children(recursive=True)
        lab_process.send_signal(signal.SIGINT)
        # Lab and its kernel stop within a few seconds idle (issue 32: 20 s was not enough on a
        # busy machine)
        lab_process.wait(timeout=hang_limit(4))
        _, alive = psutil.wait_procs(processes, timeout=hang_limit(1))
    finally:
        if lab_process.poll() is None:
            os.killpg(lab_process.pid, signal.SIGKILL)
    assert alive == [], [p.pid for p in alive]
    left = [
        p
        for p in tmp_path.rglob("*")
        if p.name.startswith(("jpserver-", "kernel-", "jupyter_cookie_secret", "costmodel-lab-"))
    ]
    assert left == [], left


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
    copies = lab.scratch_copy(folder).notebooks
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
    log = tmp_path / "lab.log"
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        _wait_until_serving(port, token, server, hang_limit(8))
        # the URL the server prints for the reader (the token it came with shown as "...")
        printed = re.findall(rf"http://127\.0\.0\.1:{port}/\S*", log.read_text())
        assert printed, log.read_text()[-2000:]
        url = printed[0].replace("token=...", f"token={token}")
        assert urllib.parse.urlsplit(url).path == f"/lab/tree/{copies[0].name}", printed[0]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1200, "height": 1600})
            page.goto(url)
            page.wait_for_selector(".jp-NotebookPanel .jp-MarkdownCell", timeout=hang_limit_ms(6))
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
            server.wait(timeout=hang_limit(1))
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(autouse=True)
def _sources_untouched():
    before = _digest()
    yield
    assert _digest() == before, "a lab test wrote the notebooks' sources"
