"""Handouts never delete what they did not write: the output-folder rules, the atomic swap under
injected faults and crashes, and interrupts (Ctrl-C, twice, SIGTERM) that leave nothing behind."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import missing

from costmodel.errors import CostModelError
from costmodel.present import handouts, suite

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "costmodel", "handouts", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(folder.rglob("*"))
    }


def assert_refused(result, *fragments):
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("costmodel: error: --out: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# ------------------------------------------------------------------ which folders are refused


def test_existing_folder_of_someone_else_is_left_alone(tmp_path):
    user = tmp_path / "mine"
    (user / "sub").mkdir(parents=True)
    (user / "important.txt").write_text("keep me")
    (user / "sub" / "thesis.tex").write_text("\\section{keep}")
    before = snapshot(user)
    assert_refused(
        run("--out", str(user), cwd=tmp_path),
        str(user),
        "was not written by costmodel handouts",
        handouts.MARKER,
    )
    assert snapshot(user) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary sibling


def test_existing_file_is_not_turned_into_a_folder(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    assert_refused(run("--out", str(path), cwd=tmp_path), "exists and is not a folder")
    assert path.read_text() == "keep me"


@pytest.mark.parametrize(
    "out,message",
    [
        (".", "is the working directory"),
        ("..", "contains the working directory"),
        ("/", "contains the working directory"),
    ],
)
def test_working_directory_and_above_are_refused(tmp_path, out, message):
    cwd = tmp_path / "work"
    cwd.mkdir()
    (cwd / "data.csv").write_text("1,2\n")
    assert_refused(run("--out", out, cwd=cwd), message)
    assert (cwd / "data.csv").read_text() == "1,2\n"


def test_home_is_refused(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    env = {**os.environ, "HOME": str(home)}
    assert_refused(run("--out", "~", cwd=tmp_path, env=env), str(home), "not written by")
    assert (home / ".bashrc").exists()


@pytest.mark.parametrize(
    "out,message",
    [
        (suite.NOTEBOOKS, "is the notebooks folder"),
        (suite.NOTEBOOKS / "new", "is inside the notebooks folder"),
        (Path(handouts.__file__).parent / "new", "is inside the costmodel package"),
        (ROOT, "contains the project's sources"),
        (ROOT / "tests" / "new", "is inside one of the project's sources"),
        (ROOT / "README.md", "is one of the project's sources"),
    ],
)
def test_project_sources_are_refused(tmp_path, out, message):
    watched = out if out.is_dir() else out.parent  # inside the repository, never /tmp itself
    before = {p.name for p in watched.iterdir()}
    assert_refused(run("--out", str(out), cwd=tmp_path), message)
    assert {p.name for p in watched.iterdir()} == before


def test_symbolic_link_is_refused(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert_refused(run("--out", "link", cwd=tmp_path), "is a symbolic link")


def test_default_output_name_is_a_safe_folder_name():
    assert handouts.default_out(None) == "handouts/course"
    assert handouts.default_out("scenarios/example-team.yaml") == "handouts/example-team"
    assert handouts.default_out("..yaml") == "handouts/scenario"
    assert handouts.default_out("/x/.yaml") == "handouts/yaml"
    assert handouts.default_out("a b/../c d?.yaml") == "handouts/c-d"


def test_scenario_named_dotdot_does_not_touch_the_handouts_tree(tmp_path):
    (tmp_path / "handouts" / "other").mkdir(parents=True)
    (tmp_path / "handouts" / "other" / "page.html").write_text("theirs")
    (tmp_path / "..yaml").write_text("step_time: -1\n")  # refused before any notebook runs
    result = run("--scenario", "..yaml", cwd=tmp_path)
    assert result.returncode == 2 and "step_time" in result.stderr
    assert (tmp_path / "handouts" / "other" / "page.html").read_text() == "theirs"
    with pytest.raises(CostModelError, match="not written by costmodel handouts"):
        handouts.check_output(tmp_path / "handouts")


def _as_nobody() -> list[str]:
    """A command prefix that drops root (root writes into read-only folders)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to test a read-only folder as root")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_read_only_parent_fails_before_any_work():
    top = Path(tempfile.mkdtemp())
    try:
        top.chmod(0o755)
        (top / "ro").mkdir(mode=0o555)
        (top / "ro").chmod(0o555)
        start = time.perf_counter()
        result = subprocess.run(
            _as_nobody()
            + [sys.executable, "-m", "costmodel", "handouts", "--out", str(top / "ro" / "x")],
            capture_output=True,
            text=True,
            cwd=top,
            timeout=60,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert time.perf_counter() - start < 20  # no notebook ran
        assert_refused(result, str(top / "ro" / "x"), "cannot be written", "Permission denied")
        assert list((top / "ro").iterdir()) == []
    finally:
        (top / "ro").chmod(0o755)
        shutil.rmtree(top)


def test_marked_or_empty_folder_is_accepted(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert handouts.check_output(empty) == empty.resolve()
    marked = tmp_path / "marked"
    marked.mkdir()
    (marked / "old.html").write_text("old")
    (marked / handouts.MARKER).write_text("{}")
    assert handouts.check_output(marked) == marked.resolve()


# ------------------------------------------------------------------ the atomic swap


def _folder(path: Path, label: str) -> Path:
    path.mkdir()
    (path / "index.html").write_text(label)
    (path / handouts.MARKER).write_text(json.dumps({"scenario": label}))
    return path


def _state(out: Path) -> str | None:
    """'old' or 'new' if out is that complete folder, None if out is missing."""
    if not out.exists():
        return None
    assert sorted(p.name for p in out.iterdir()) == sorted([handouts.MARKER, "index.html"])
    return (out / "index.html").read_text()


class Fault(Exception):
    pass


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
@pytest.mark.parametrize("step", ["before-swap", "between-renames", "after-swap"])
def test_swap_fault_leaves_old_or_new(tmp_path, monkeypatch, exchange, step):
    """An exception (an interrupt) at any step: out is the old or the new complete folder."""
    out = _folder(tmp_path / "out", "old")
    built = _folder(tmp_path / ".out.tmp-1", "new")
    if not exchange:
        monkeypatch.setattr(handouts, "_exchange", lambda a, b: False)

    def fault(at):
        if at == step:
            raise Fault(at)

    monkeypatch.setattr(handouts, "_fault", fault)
    reached = step != "between-renames" or not exchange
    if reached:
        with pytest.raises(Fault):
            handouts._replace_dir(built, out)
    else:
        handouts._replace_dir(built, out)
    assert _state(out) == ("old" if step != "after-swap" and reached else "new")
    leftovers = {p.name for p in tmp_path.iterdir()} - {"out", ".out.tmp-1"}
    assert not leftovers, leftovers


CRASH = """
import os, sys
from pathlib import Path
from costmodel.present import handouts
step, exchange, built, out = sys.argv[1], sys.argv[2] == "1", Path(sys.argv[3]), Path(sys.argv[4])
if not exchange:
    handouts._exchange = lambda a, b: False
def fault(at):
    if at == step:
        os._exit(9)  # a crash: no clean-up, no finally
handouts._fault = fault
handouts._replace_dir(built, out)
"""


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
@pytest.mark.parametrize("step", ["before-swap", "between-renames", "after-swap"])
def test_swap_crash_is_recovered(tmp_path, exchange, step):
    """A crash at any step (no clean-up runs): out is the old or the new complete folder, or,
    between the two renames of the fallback, the old one is put back by the next build."""
    out = _folder(tmp_path / "out", "old")
    built = _folder(tmp_path / ".out.tmp-1", "new")
    subprocess.run(
        [sys.executable, "-c", CRASH, step, "1" if exchange else "0", str(built), str(out)],
        check=False,
        timeout=60,
    )
    state = _state(out)
    if step == "between-renames" and not exchange:
        assert state is None and _state(handouts._aside(out)) == "old"
        handouts.recover(out)
    else:
        handouts.recover(out)  # what the next build does first
    expected = "new" if step == "after-swap" or (step == "between-renames" and exchange) else "old"
    assert _state(out) == expected
    assert not handouts._aside(out).exists()


# ------------------------------------------------------------------ interrupts


def _browser(proc: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in proc.children(recursive=True):
        try:
            if "chrom" in child.name():
                found.append(child)
        except psutil.Error:
            pass
    return found


def _kernels(proc: psutil.Process) -> list[psutil.Process]:
    found = []
    for child in proc.children(recursive=True):
        try:
            if "ipykernel" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(
    "how,code", [("ctrl-c", 130), ("ctrl-c twice", 130), ("sigterm", 143), ("ctrl-c --pdf", 130)]
)
def test_interrupt_stops_everything(tmp_path, how, code):
    """Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it), two of them
    0.3 s apart, and SIGTERM to the build alone: exit within seconds with one line, and no
    worker, kernel, temporary folder or kernel connection file left. With --pdf the browser
    has started too (the Ctrl-C reaches it and its driver as well): none of them is left, and
    nothing but the one line is said."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "site" / "handouts"
    env = {**os.environ, "TMPDIR": str(tmp)}
    pdf = ["--edition", "both", "--pdf"] if how.endswith("--pdf") else []
    if pdf and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        missing("headless Chromium (Debian package chromium) is needed for --pdf")
    proc = subprocess.Popen(
        [sys.executable, "-m", "costmodel", "handouts", "--out", str(out), *pdf],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
        # as a terminal's foreground job: Ctrl-C not ignored. A test run started in the
        # background (`nohup make test &`) inherits SIGINT ignored, and Python then installs no
        # KeyboardInterrupt handler in the child: the build would never see the Ctrl-C.
        preexec_fn=_interruptible,
    )
    parent = psutil.Process(proc.pid)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None and len(_kernels(parent)) < 2:
        time.sleep(0.2)
    assert len(_kernels(parent)) >= 2, "no kernels started"
    # with --pdf, the browser started with the build: wait until it has been seen with its
    # helper processes (the set changes while /usr/bin/chromium, a shell script, starts it)
    seen = 0
    while time.monotonic() < deadline and proc.poll() is None and pdf and seen < 3:
        seen = max(seen, len(_browser(parent)))
        time.sleep(0.2)
    if proc.poll() is not None:
        pytest.fail(f"the build ended before the interrupt: {proc.returncode} {proc.stderr.read()}")
    time.sleep(0.5 if pdf else 0)
    started = parent.children(recursive=True)
    assert any(tmp.iterdir())  # the build's temporary folder, where connection files live
    sent = time.monotonic()
    if how == "sigterm":
        proc.send_signal(signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)
        if how == "ctrl-c twice":
            time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    elapsed = time.monotonic() - sent
    assert proc.returncode == code, stderr
    assert elapsed < 10, f"took {elapsed:.1f} s"
    assert stderr.count("\n") == 1 and stderr.startswith("costmodel: "), stderr
    assert "Traceback" not in stderr and stdout == ""
    time.sleep(0.3)
    alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [p.cmdline() for p in alive]
    assert list(tmp.rglob("*")) == [], list(tmp.rglob("*"))  # connection files included
    assert not out.exists()
    # no half-built sibling (the parent is made only once the scenario is accepted)
    assert not out.parent.exists() or [p.name for p in out.parent.iterdir()] == []


SWALLOWED = """
import os, signal, sys, time
from costmodel import cli
from costmodel.evaluate import account as module
real, signum = module.account, getattr(signal, sys.argv[1])
def account(sc):
    try:  # as mpmath's from_float, which every sympy.Float(float) calls: a bare except
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler runs here and raises; the exception is swallowed
    except:  # noqa: E722
        pass
    return real(sc)
module.account = account
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("name,code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_swallowed_interrupt_still_stops_the_build(tmp_path, name, code):
    """A Ctrl-C (or SIGTERM) whose exception a library swallows is not lost: the build stops at
    its next step with the one line, and writes nothing. (CI saw the build finish with status 0
    after a Ctrl-C that landed in mpmath's bare `except:` while the account was computed.)"""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "site" / "handouts"
    result = subprocess.run(
        [sys.executable, "-c", SWALLOWED, name, "handouts", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(tmp)},
        timeout=120,
        preexec_fn=_interruptible,
    )
    assert result.returncode == code, result.stderr
    word = "interrupted" if name == "SIGINT" else "terminated"
    assert result.stderr.startswith(f"costmodel: {word}; no handouts written"), result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp.rglob("*")) == [], list(tmp.rglob("*"))
    assert not out.parent.exists()


def test_ctrl_c_outside_a_build_is_one_line(tmp_path):
    """A Ctrl-C in any command (here while `report` computes): one line, status 130."""
    script = SWALLOWED.replace(
        "    except:  # noqa: E722\n        pass\n", "    finally:\n        pass\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "SIGINT", "report"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        preexec_fn=_interruptible,
    )
    assert (result.returncode, result.stderr, result.stdout) == (
        130,
        "costmodel: interrupted\n",
        "",
    )
