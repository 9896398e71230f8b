"""Handouts never delete what they did not write: the output-folder rules (a folder is replaced
only when it is exactly what its manifest lists), the atomic swap under injected faults and
crashes, a folder that changes during the build, file systems where a folder cannot be replaced,
interrupts (Ctrl-C, twice, SIGTERM, SIGHUP) that leave nothing behind, and what killed builds
left, removed."""

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NamedTuple

import psutil
import pytest
from conftest import KERNEL_CONFIG, missing
from hang import hang_limit

from costmodel.errors import CostModelError
from costmodel.publish import handouts, output, suite, swap, workers
from costmodel.publish.manifest import MARKER, write_manifest

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd, env=None, timeout=hang_limit(12)):  # refused, or one notebook: seconds
    return subprocess.run(
        [sys.executable, "-m", "costmodel", "handouts", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def in_process(*args, cwd, env=None) -> Result:
    """`costmodel handouts ARGS` run as `run` runs it, in this process (`cli.main`, which
    `python -m costmodel` calls), from `cwd` and with `env`'s variables changed: a refusal says
    and leaves what a new process would, without a second of its own to start and import."""
    from costmodel import cli

    out, err = io.StringIO(), io.StringIO()
    here, saved = os.getcwd(), dict(os.environ)
    try:
        os.chdir(cwd)
        os.environ.update(env or {})
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["handouts", *args])
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved)
    return Result(code, out.getvalue(), err.getvalue())


def kernel_marks(folder: Path) -> tuple[dict[str, str], Path]:
    """(an environment, a folder): each kernel started with that environment leaves a file in
    that folder as it starts (an IPython start-up file in its own IPYTHONDIR, which any user
    may read and write), so a test sees that a build did no work, whatever the time it took."""
    ipython, started = folder / "ipython", folder / "started"
    startup = ipython / "profile_default" / "startup"
    startup.mkdir(parents=True)
    started.mkdir()
    (ipython / "profile_default" / "ipython_kernel_config.py").write_text(KERNEL_CONFIG)
    mark = f"import os\nopen(os.path.join({str(started)!r}, str(os.getpid())), 'w').close()\n"
    (startup / "00-mark.py").write_text(mark)
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o777 if path.is_dir() else 0o644)
    return {**os.environ, "IPYTHONDIR": str(ipython)}, started


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
        in_process("--out", str(user), cwd=tmp_path),
        str(user),
        "was not written by costmodel handouts",
        MARKER,
    )
    assert snapshot(user) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary sibling


def test_existing_file_is_not_turned_into_a_folder(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("keep me")
    assert_refused(in_process("--out", str(path), cwd=tmp_path), "exists and is not a folder")
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
    assert_refused(in_process("--out", out, cwd=cwd), message)
    assert (cwd / "data.csv").read_text() == "1,2\n"


def test_home_is_refused(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# mine\n")
    env = {**os.environ, "HOME": str(home)}
    assert_refused(in_process("--out", "~", cwd=tmp_path, env=env), str(home), "not written by")
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
    assert_refused(in_process("--out", str(out), cwd=tmp_path), message)
    assert {p.name for p in watched.iterdir()} == before


def test_symbolic_link_is_refused(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    assert_refused(in_process("--out", "link", cwd=tmp_path), "is a symbolic link")


def test_symbolic_link_loop_is_one_line(tmp_path, monkeypatch, capsys):
    """`--out loop/x` where `loop` links to itself: Path.resolve raised RuntimeError (a
    traceback); one line now, the check `lab --dir` shares (output.check_place)."""
    from costmodel import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop").symlink_to("loop")
    assert cli.main(["handouts", "--out", "loop/x"]) == 2
    assert capsys.readouterr().err == (
        "costmodel: error: --out: 'loop/x' is a symbolic link loop; expected a folder path\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop"]


def test_default_output_name_is_a_safe_folder_name():
    """Letters of any script are kept (方案一 and 方案二 are two folders, not both `scenario`);
    separators, spaces, control and format characters become `-`; no leading dot; bounded."""
    assert output.default_out(None) == "handouts/course"
    assert output.default_out("scenarios/example-team.yaml") == "handouts/example-team"
    assert output.default_out("..yaml") == "handouts/scenario"
    assert output.default_out("/x/.yaml") == "handouts/yaml"
    assert output.default_out("a b/../c d?.yaml") == "handouts/c-d"
    names = [output.default_out(f"{n}.yaml") for n in ("方案一", "方案二", "团队", "équipe")]
    assert names == ["handouts/方案一", "handouts/方案二", "handouts/团队", "handouts/équipe"]
    assert output.default_out("a\u202e\nb\x1b[31m.yaml") == "handouts/a-b-31m"
    long = output.default_out("长" * 200 + ".yaml").removeprefix("handouts/")
    assert long == "长" * 33 and len(long.encode()) <= output.MAX_DEFAULT_NAME


def test_scenario_named_dotdot_does_not_touch_the_handouts_tree(tmp_path):
    (tmp_path / "handouts" / "other").mkdir(parents=True)
    (tmp_path / "handouts" / "other" / "page.html").write_text("theirs")
    (tmp_path / "..yaml").write_text("step_time: -1\n")  # refused before any notebook runs
    result = in_process("--scenario", "..yaml", cwd=tmp_path)
    assert result.returncode == 2 and "step_time" in result.stderr
    assert (tmp_path / "handouts" / "other" / "page.html").read_text() == "theirs"
    with pytest.raises(CostModelError, match="not written by costmodel handouts"):
        output.check_output(tmp_path / "handouts")


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
        env, started = kernel_marks(top / "marks")
        result = subprocess.run(
            _as_nobody()
            + [sys.executable, "-m", "costmodel", "handouts", "--out", str(top / "ro" / "x")],
            capture_output=True,
            text=True,
            cwd=top,
            timeout=hang_limit(1),
            env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
        )
        assert list(started.iterdir()) == []  # no kernel started: no notebook ran
        assert_refused(result, str(top / "ro" / "x"), "cannot be written", "Permission denied")
        assert list((top / "ro").iterdir()) == []
    finally:
        (top / "ro").chmod(0o755)
        shutil.rmtree(top)


def test_empty_folder_or_one_its_manifest_lists_is_accepted(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert output.check_output(empty) == empty.resolve()
    marked = tmp_path / "marked"
    marked.mkdir()
    (marked / "old.html").write_text("old")
    write_manifest(marked)
    assert output.check_output(marked) == marked.resolve()


# ------------------------------------------------------------------ ownership by manifest

#: The quickest notebook: a build of it alone (both editions) takes a few seconds.
SMALL_NOTEBOOK = "09_"


def _small_suite(folder: Path) -> Path:
    """A notebooks folder holding one notebook of the course (source and executed copy)."""
    folder.mkdir()
    source = next(p for p in suite.sources() if p.name.startswith(SMALL_NOTEBOOK))
    for path in (source, source.with_suffix(".ipynb")):
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(notebooks folder, a complete build of it: both editions, the course's scenario)."""
    top = tmp_path_factory.mktemp("small")
    notebooks = _small_suite(top / "notebooks")
    env, started = kernel_marks(top / "marks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(suite, "NOTEBOOKS", notebooks)
        patch.setenv("IPYTHONDIR", env["IPYTHONDIR"])
        sections, folder = handouts.build(out=top / "built", progress=False, edition="both")
    assert [s.error for s in sections] == [None]
    assert list(started.iterdir()) != []  # the mark the refused builds must not leave
    return notebooks, folder


@pytest.fixture
def previous(small, tmp_path, monkeypatch):
    """A copy of the small build, as a reader has it: site/handouts; the suite is the small one."""
    notebooks, folder = small
    monkeypatch.setattr(suite, "NOTEBOOKS", notebooks)
    (tmp_path / "site").mkdir()
    return Path(shutil.copytree(folder, tmp_path / "site" / "handouts"))


def _rebuild(out: Path, **kw):
    return handouts.build(out=out, progress=False, edition="both", **kw)


def _manifest(folder: Path) -> dict:
    return json.loads((folder / MARKER).read_text(encoding="utf-8"))


def test_manifest_lists_every_file_the_build_wrote(small):
    """Each edition's folder: every file in it (size and sha256), the nested build by name."""
    _, folder = small
    for edition_folder, builds in ((folder, ["student"]), (folder / "student", [])):
        manifest = _manifest(edition_folder)
        on_disk = sorted(
            p.relative_to(edition_folder).as_posix()
            for p in edition_folder.rglob("*")
            if p.is_file()
            and p.name != MARKER
            and p.relative_to(edition_folder).parts[0] not in builds
        )
        assert [f["path"] for f in manifest["files"]] == on_disk
        for f in manifest["files"]:
            data = (edition_folder / f["path"]).read_bytes()
            assert f["size"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest()
        assert manifest["builds"] == builds and manifest["scenario_file"] is None
    before = (folder / MARKER).read_bytes()
    write_manifest(folder, None, _manifest(folder)["scenario"], ["student"])
    assert (folder / MARKER).read_bytes() == before  # deterministic


def _add_notes(out: Path) -> None:
    (out / "my_notes.txt").write_text("my own notes\n")


ALTERATIONS = {
    "a reader's file": (_add_notes, "holds my_notes.txt, which costmodel handouts did not write"),
    "a file in student/": (
        lambda out: (out / "student" / "answers.md").write_text("mine"),
        "holds student/answers.md, which costmodel handouts did not write",
    ),
    "an empty folder": (
        lambda out: (out / "drafts").mkdir(),
        "holds drafts/, which costmodel handouts did not write",
    ),
    "a page changed": (
        lambda out: (out / "index.html").write_text("<p>my edit</p>"),
        "holds index.html, which was changed after costmodel handouts wrote it",
    ),
    "a page removed": (
        lambda out: (out / "student" / "index.html").unlink(),
        "lacks student/index.html, which costmodel handouts wrote there",
    ),
    "an empty manifest": (
        lambda out: (out / MARKER).write_text(""),
        f"holds {MARKER}, which is not a manifest costmodel handouts wrote",
    ),
    "a manifest of {}": (
        lambda out: (out / MARKER).write_text("{}"),
        f"holds {MARKER}, which is not a manifest costmodel handouts wrote",
    ),
    "an altered manifest": (
        lambda out: (out / MARKER).write_text(
            (out / MARKER).read_text().replace('"size": ', '"size": 1', 1)
        ),
        f"holds {MARKER}, which is not a manifest costmodel handouts wrote",
    ),
    "an altered student manifest": (
        lambda out: (out / "student" / MARKER).write_text("{}"),
        f"holds student/{MARKER}, which is not a manifest costmodel handouts wrote",
    ),
    "a marker of the old format": (
        lambda out: (out / MARKER).write_text(
            json.dumps({"written_by": "costmodel handouts", "scenario": "x"})
        ),
        f"holds {MARKER} of an older costmodel handouts, which lists no files",
    ),
}


@pytest.mark.parametrize("alteration", list(ALTERATIONS))
def test_a_folder_that_is_not_exactly_its_manifest_is_kept(previous, alteration):
    """A reader's file in a previous build (or a page changed or removed, or a manifest that is
    not one): the rebuild refuses, naming the first file at fault, and touches nothing."""
    alter, message = ALTERATIONS[alteration]
    alter(previous)
    before = snapshot(previous)
    with pytest.raises(CostModelError, match=re.escape(message)):
        _rebuild(previous)
    assert snapshot(previous) == before
    assert sorted(p.name for p in previous.parent.iterdir()) == ["handouts"]


def test_a_readers_file_is_refused_in_one_line(previous):
    _add_notes(previous)
    before = snapshot(previous)
    assert_refused(
        in_process("--out", str(previous), cwd=previous.parent),
        f"'{previous}' holds my_notes.txt, which costmodel handouts did not write",
    )
    assert snapshot(previous) == before


def test_unchanged_folder_and_its_student_folder_are_rebuilt(previous):
    """A folder exactly as its manifest lists is replaced; DIR/student/ is a build of its own:
    `--out DIR/student` rebuilds it, and DIR still checks afterwards."""
    before = (previous / "student" / "index.html").read_bytes()
    sections, _ = handouts.build(
        out=previous / "student", progress=False, edition="student", overrides={"step_time": 90}
    )
    assert [s.error for s in sections] == [None]
    assert (previous / "student" / "index.html").read_bytes() != before  # step_time=90 shown
    assert output.check_output(previous) == previous
    _rebuild(previous)
    assert output.check_output(previous) == previous
    assert sorted(p.name for p in previous.parent.iterdir()) == ["handouts"]


def _attributes(path: Path) -> tuple[str, int, int]:
    found = path.stat()
    return oct(stat.S_IMODE(found.st_mode)), found.st_uid, found.st_gid


def test_an_empty_folder_made_for_the_handouts_keeps_its_mode_owner_and_group(previous):
    """An empty folder someone made for the handouts, shared with a group (setgid, nothing for
    others, another owner as root can make it): the swap put a new folder in its place with
    the builder's owner and mode 0o755. The build takes its mode, owner and group, and so does
    the next rebuild."""
    shared = previous.parent / "shared"
    shared.mkdir()
    ids = (4321, 5432) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    os.chown(shared, *ids)
    shared.chmod(0o2770)
    made = _attributes(shared)
    assert made == ("0o2770", *ids)
    for _ in range(2):  # the empty folder, then the build that replaced it
        sections, _ = _rebuild(shared)
        assert [s.error for s in sections] == [None]
        assert (shared / "index.html").is_file() and _attributes(shared) == made


def test_folder_left_aside_mid_swap_is_checked_before_anything_is_deleted(previous):
    """`.DIR.old` (where a crash between the two renames of a swap leaves the previous build) is
    removed or put back only if its manifest checks: here a reader's file is in it."""
    aside = swap.aside(previous)
    shutil.copytree(previous, aside)
    _add_notes(aside)
    (aside / MARKER).write_text("{}")  # even with a marker, it proves nothing
    before = snapshot(aside), snapshot(previous)
    with pytest.raises(CostModelError, match=re.escape(f"'{aside}'")):
        _rebuild(previous)
    with pytest.raises(CostModelError, match="remove it yourself"):
        swap.recover(previous)
    assert (snapshot(aside), snapshot(previous)) == before


def _scenario_files(top: Path) -> tuple[Path, Path]:
    for team in ("a", "b"):
        (top / team).mkdir()
        (top / team / "run.yaml").write_text(f"name: team {team}\nstep_time: 90\n")
    return top / "a" / "run.yaml", top / "b" / "run.yaml"


def test_a_folder_of_another_scenario_is_refused(small, tmp_path, monkeypatch):
    """a/run.yaml and b/run.yaml share the default folder handouts/run: the second build is
    refused there (one line, --out suggested), and the first one's pages are kept."""
    monkeypatch.setattr(suite, "NOTEBOOKS", small[0])
    monkeypatch.chdir(tmp_path)
    first, second = _scenario_files(tmp_path)
    out = Path(output.default_out("a/run.yaml"))
    assert out == Path(output.default_out("b/run.yaml")) == Path("handouts/run")
    handouts.build("a/run.yaml", out=out, progress=False)
    before = snapshot(out)
    with pytest.raises(CostModelError, match=re.escape(f"another scenario ('{first.resolve()}')")):
        handouts.build("b/run.yaml", out=out, progress=False)
    with pytest.raises(CostModelError, match="another scenario"):
        handouts.build(None, out=out, progress=False)  # the course's scenario
    assert_refused(
        in_process("--scenario", "b/run.yaml", cwd=tmp_path),
        f"this build is of '{second.resolve()}'",
        "choose its own folder with --out",
    )
    assert snapshot(out) == before
    assert _manifest(out)["scenario_file"] == str(first.resolve())
    assert output.check_output(out, "a/run.yaml") == out.resolve()  # the same one: rebuilt


def test_empty_out_is_refused(tmp_path):
    """`--out ''` is not the default folder: refused before the scenario is even read."""
    assert_refused(
        in_process("--out", "", "--set", "seq_len=-1", cwd=tmp_path), "'' is not allowed"
    )
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the swap checks again


def _during_notebooks(monkeypatch, action) -> None:
    """Run `action` while the build's notebooks run (after the folder was checked)."""
    real = workers.run_all

    def run_all(*args, **kw):
        result = real(*args, **kw)
        action()
        return result

    monkeypatch.setattr(workers, "run_all", run_all)


def _kept_beside(out: Path) -> Path:
    beside = out.with_name(f"{out.name}.new")
    assert output.check_output(beside) == beside  # a complete build, its manifest checks
    assert (beside / "index.html").is_file() and (beside / "student" / "index.html").is_file()
    return beside


def test_folder_that_appears_during_the_build_is_kept(previous, monkeypatch):
    """--out did not exist when the build began; a reader made it meanwhile: it is left as it
    is, the new build is put beside it and named in the error."""
    out = previous.with_name("fresh")

    def appear():
        (out / "sub").mkdir(parents=True)
        (out / "sub" / "thesis.tex").write_text("\\section{keep}")

    _during_notebooks(monkeypatch, appear)
    with pytest.raises(CostModelError, match=re.escape(f"'{out}' appeared while the build ran")):
        _rebuild(out)
    assert snapshot(out) == {"sub": b"<dir>", "sub/thesis.tex": b"\\section{keep}"}
    _kept_beside(out)


def test_empty_folder_that_appears_during_the_build_is_not_replaced(previous, monkeypatch):
    """rename() silently replaces an empty folder: the swap never does."""
    out = previous.with_name("fresh")
    _during_notebooks(monkeypatch, out.mkdir)
    with pytest.raises(CostModelError, match=re.escape(f"'{out}.new'")):
        _rebuild(out)
    assert out.is_dir() and list(out.iterdir()) == []
    _kept_beside(out)


def test_file_added_during_the_build_is_kept(previous, monkeypatch):
    """A reader adds a file to the previous build while the new one runs: the previous build is
    left as it is, the new one put beside it."""
    _during_notebooks(monkeypatch, lambda: _add_notes(previous))
    expected = {**snapshot(previous), "my_notes.txt": b"my own notes\n"}
    with pytest.raises(CostModelError, match="changed while the build ran .it holds my_notes"):
        _rebuild(previous)
    assert snapshot(previous) == expected
    _kept_beside(previous)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_file_added_in_the_last_moment_is_not_deleted(previous, monkeypatch, exchange):
    """A file added after the check, just before the swap: the previous folder is checked again
    before it is deleted, put back, and the new build put beside it."""
    built = Path(shutil.copytree(previous, previous.with_name(".handouts.tmp-1")))
    (built / "index.html").write_text("new")
    before = snapshot(previous)
    if not exchange:
        monkeypatch.setattr(swap, "exchange", lambda a, b: False)

    def fault(at):
        if at == "before-swap":
            _add_notes(previous)

    monkeypatch.setattr(swap, "fault", fault)
    with pytest.raises(CostModelError, match=re.escape(f"new handouts are in '{previous}.new'")):
        swap.replace_dir(built, previous)
    assert snapshot(previous) == {**before, "my_notes.txt": b"my own notes\n"}
    assert (previous.with_name("handouts.new") / "index.html").read_text() == "new"
    assert sorted(p.name for p in previous.parent.iterdir()) == ["handouts", "handouts.new"]


# ------------------------------------------------------------------ folders that cannot be replaced


def test_name_too_long_is_one_line(tmp_path):
    """A name over 255 bytes, or one whose hidden `.NAME.tmp-XXXXXXXX` sibling is: one line."""
    for name in ("a" * 300, "b" * 245):
        assert_refused(in_process("--out", name, cwd=tmp_path), "File name too long")
    assert list(tmp_path.iterdir()) == []


def _mount_tmpfs(path: Path, size: str = "4m") -> None:
    """A tmpfs at `path` (root, and a container that lets it mount)."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        missing("mount and umount (util-linux) are needed")
    path.mkdir(exist_ok=True)
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:  # not root, or no CAP_SYS_ADMIN: the injected faults cover it
        pytest.skip(f"mounting a tmpfs is not permitted here: {made.stderr.strip()}")


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False, capture_output=True)


def test_mount_point_is_refused_before_any_work(tmp_path):
    """A mount point cannot be renamed (EBUSY): refused before any notebook runs."""
    out = tmp_path / "mounted"
    _mount_tmpfs(out)
    env, started = kernel_marks(tmp_path / "marks")
    try:
        assert_refused(run("--out", str(out), cwd=tmp_path, env=env), "is a mount point")
        assert list(started.iterdir()) == []  # no kernel started
        assert list(out.iterdir()) == []
        assert sorted(p.name for p in tmp_path.iterdir()) == ["marks", "mounted"]
    finally:
        _umount(out)


def test_full_disk_is_refused_before_any_work(tmp_path):
    """A file system with no space left: refused by the probe, before any notebook runs."""
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "64k")
    try:
        with open(disk / "filler", "wb", buffering=0) as filler:
            with pytest.raises(OSError):
                while True:
                    filler.write(b"\0" * 4096)
                    filler.flush()
        assert_refused(
            in_process("--out", str(disk / "out"), cwd=tmp_path), "No space left on device"
        )
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    finally:
        _umount(disk)


def _chattr(flag: str, path: Path) -> None:
    if shutil.which("chattr") is None:
        missing("chattr (e2fsprogs) is needed")
    made = subprocess.run(["chattr", flag, str(path)], capture_output=True, text=True)
    if made.returncode != 0:  # a file system without inode flags, or not root
        pytest.skip(f"chattr {flag} is not possible here: {made.stderr.strip()}")


@pytest.mark.parametrize("pinned", [".", "index.html"], ids=["folder", "page"])
def test_immutable_previous_build_is_refused_before_any_work(previous, pinned):
    """An immutable previous build (or a page in it) cannot be replaced (EPERM): refused first."""
    _chattr("+i", previous / pinned)
    env, started = kernel_marks(previous.parent.parent / "marks")
    try:
        before = snapshot(previous)
        assert_refused(run("--out", str(previous), cwd=previous.parent, env=env), "immutable")
        assert list(started.iterdir()) == []  # no kernel started
        assert snapshot(previous) == before
        assert sorted(p.name for p in previous.parent.iterdir()) == ["handouts"]
    finally:
        subprocess.run(["chattr", "-i", str(previous / pinned)], check=False)


@pytest.mark.parametrize(
    "code",
    [errno.EBUSY, errno.EPERM, errno.ENOSPC, errno.ENAMETOOLONG],
    ids=["mount-point", "immutable", "full-disk", "name-too-long"],
)
def test_swap_that_fails_is_one_line(previous, monkeypatch, code):
    """The error of each, injected at the swap (where no probe can reach it first): one line,
    status 2, the previous build as it was, nothing left beside it."""
    before = snapshot(previous)

    def fault(at):
        if at == "before-swap":
            raise OSError(code, os.strerror(code), str(previous))

    monkeypatch.setattr(swap, "fault", fault)
    result = in_process("--edition", "both", "--out", str(previous), cwd=previous.parent)
    assert_refused(result, f"'{previous}' cannot be written: {os.strerror(code)}")
    assert snapshot(previous) == before
    assert sorted(p.name for p in previous.parent.iterdir()) == ["handouts"]


# ------------------------------------------------------------------ the atomic swap


def _folder(path: Path, label: str) -> Path:
    path.mkdir()
    (path / "index.html").write_text(label)
    write_manifest(path, name=label)
    return path


def _state(out: Path) -> str | None:
    """'old' or 'new' if out is that complete folder, None if out is missing."""
    if not out.exists():
        return None
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "index.html"])
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
        monkeypatch.setattr(swap, "exchange", lambda a, b: False)

    def fault(at):
        if at == step:
            raise Fault(at)

    monkeypatch.setattr(swap, "fault", fault)
    reached = step != "between-renames" or not exchange
    if reached:
        with pytest.raises(Fault):
            swap.replace_dir(built, out)
    else:
        swap.replace_dir(built, out)
    assert _state(out) == ("old" if step != "after-swap" and reached else "new")
    leftovers = {p.name for p in tmp_path.iterdir()} - {"out", ".out.tmp-1"}
    assert not leftovers, leftovers


CRASH = """
import os, sys
from pathlib import Path
from costmodel.publish import swap
step, exchange, built, out = sys.argv[1], sys.argv[2] == "1", Path(sys.argv[3]), Path(sys.argv[4])
if not exchange:
    swap.exchange = lambda a, b: False
def fault(at):
    if at == step:
        os._exit(9)  # a crash: no clean-up, no finally
swap.fault = fault
swap.replace_dir(built, out)
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
        timeout=hang_limit(1),
    )
    state = _state(out)
    if step == "between-renames" and not exchange:
        assert state is None and _state(swap.aside(out)) == "old"
        swap.recover(out)
    else:
        swap.recover(out)  # what the next build does first
    expected = "new" if step == "after-swap" or (step == "between-renames" and exchange) else "old"
    assert _state(out) == expected
    assert not swap.aside(out).exists()


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
    "how,code",
    [
        ("ctrl-c", 130),
        ("ctrl-c twice", 130),
        ("sigterm", 143),
        ("sighup", 129),
        ("ctrl-c --pdf", 130),
    ],
)
def test_interrupt_stops_everything(tmp_path, how, code):
    """Ctrl-C (SIGINT to the whole foreground group, as a terminal sends it), two of them
    0.3 s apart, and SIGTERM or SIGHUP to the build alone: exit within seconds with one line, no
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
    deadline = time.monotonic() + hang_limit(9)  # the kernels start in seconds
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
    if how in ("sigterm", "sighup"):
        proc.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGHUP)
    else:
        os.killpg(proc.pid, signal.SIGINT)
        if how == "ctrl-c twice":
            time.sleep(0.3)
            os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=hang_limit(1))  # it stops within a second idle
    assert proc.returncode == code, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("costmodel: "), stderr
    assert "Traceback" not in stderr and stdout == ""
    time.sleep(0.3)
    alive = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, [p.cmdline() for p in alive]
    assert list(tmp.rglob("*")) == [], list(tmp.rglob("*"))  # connection files included
    assert not out.exists()
    # no half-built sibling (the parent is made only once the scenario is accepted)
    assert not out.parent.exists() or [p.name for p in out.parent.iterdir()] == []


#: The Ctrl-C stress test: builds interrupted at spread moments, so many at a time.
STRESS_RUNS, STRESS_AT_ONCE = 20, 4


def _start_build(tmp_path: Path, n: int) -> tuple[subprocess.Popen, Path, Path]:
    """A `costmodel handouts` of its own (TMPDIR, output folder), as a terminal's foreground
    job in a session of its own."""
    tmp = tmp_path / f"tmp-{n}"
    tmp.mkdir()
    out = tmp_path / f"site-{n}" / "handouts"
    proc = subprocess.Popen(
        [sys.executable, "-m", "costmodel", "handouts", "--jobs", "1", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
        cwd=tmp_path,
        start_new_session=True,
        preexec_fn=_interruptible,
    )
    return proc, tmp, out


def _ctrl_c(group: int) -> None:
    try:
        os.killpg(group, signal.SIGINT)
    except ProcessLookupError:
        pass


def test_ctrl_c_at_any_moment_of_a_build_exits_130_every_time(tmp_path):
    """STRESS_RUNS builds, STRESS_AT_ONCE at a time (a loaded machine, as under pytest-xdist),
    each sent a Ctrl-C (SIGINT to its process group, as a terminal does) at its own moment from
    0 to about 5 s after its handlers are installed: while it imports, checks the scenario,
    starts its worker and kernel, runs notebooks; every other one a second Ctrl-C 0.03 to 0.33 s
    after the first, while it stops. Every one exits 130 with its one line, leaves
    no process and no temporary file, and writes nothing. Its workers and kernels are never in
    its process group (a process-group signal from them, or to them, cannot reach it)."""
    delays = [0.26 * n for n in range(STRESS_RUNS)]
    for first in range(0, STRESS_RUNS, STRESS_AT_ONCE):
        batch = [(n, *_start_build(tmp_path, n)) for n in range(first, first + STRESS_AT_ONCE)]
        begun = time.monotonic()
        for _, proc, _, _ in batch:
            # the command's handlers are in (SIGINT has Python's own from its first moment)
            while not _catches(proc.pid, signal.SIGTERM) and time.monotonic() < begun + 30:
                time.sleep(0.005)
        begun = time.monotonic()
        started, seconds = {}, []
        for n, proc, _, _ in sorted(batch, key=lambda run: delays[run[0]]):
            time.sleep(max(0.0, begun + delays[n] - time.monotonic()))
            children = psutil.Process(proc.pid).children(recursive=True)
            for child in children:
                # a worker leaves the group in its first instructions after the fork (Popen's
                # start_new_session: setsid before exec); on a loaded machine the listing can
                # catch it before that, still the build's image: it must be gone from the group
                # a moment later (it failed once under load, caught in that window)
                for _ in range(50):
                    try:
                        group = os.getpgid(child.pid)
                    except OSError:
                        break
                    if group != proc.pid:
                        break
                    time.sleep(0.01)
                else:
                    raise AssertionError(f"run {n}: {child.cmdline()} is in the build's group")
            started[n] = children
            os.killpg(proc.pid, signal.SIGINT)
            if n % 2:  # a second Ctrl-C, at its own moment of the build's stop
                second = threading.Timer(0.03 * (n % 11 + 1), _ctrl_c, (proc.pid,))
                second.start()
                seconds.append(second)
        for second in seconds:  # before any build is reaped: its group id is not reused
            second.join()
        for n, proc, tmp, out in batch:
            stdout, stderr = proc.communicate(timeout=hang_limit(1))
            said = f"run {n} (Ctrl-C at {delays[n]:.2f} s): {proc.returncode} {stderr!r}"
            assert proc.returncode == 130, said
            assert stderr.startswith("costmodel: interrupted") and stderr.count("\n") == 1, said
            assert stdout == "", said
            alive = [p for p in started[n] if p.is_running() and p.status() != "zombie"]
            for _ in range(20):  # a process that was ending as the build exited
                if not alive:
                    break
                time.sleep(0.1)
                alive = [p for p in alive if p.is_running() and p.status() != "zombie"]
            assert not alive, (said, [p.cmdline() for p in alive])
            # nor one started after the Ctrl-C (a kernel whose worker was listed before it)
            late = [
                p.info["cmdline"]
                for p in psutil.process_iter(["cmdline"])
                if any(str(tmp) in part for part in p.info["cmdline"] or [])
            ]
            assert not late, (said, late)
            assert list(tmp.rglob("*")) == [], (said, list(tmp.rglob("*")))
            assert not out.exists(), said


SWALLOWED = """
import os, signal, sys, time
from costmodel import cli
from costmodel.evaluate.account import account as module
real, signum = module.account, getattr(signal, sys.argv[1])
def account(sc, **options):
    try:  # as mpmath's from_float, which every sympy.Float(float) calls: a bare except
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler runs here and raises; the exception is swallowed
    except:  # noqa: E722
        pass
    return real(sc, **options)
module.account = account
sys.exit(cli.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("name,code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
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
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    assert result.returncode == code, result.stderr
    word = {"SIGINT": "interrupted", "SIGTERM": "terminated", "SIGHUP": "hung up"}[name]
    assert result.stderr.startswith(f"costmodel: {word}; no handouts written"), result.stderr
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert list(tmp.rglob("*")) == [], list(tmp.rglob("*"))
    assert not out.parent.exists()


@pytest.mark.parametrize(
    "name,line,code",
    [("SIGINT", "interrupted", 130), ("SIGTERM", "terminated", 143), ("SIGHUP", "hung up", 129)],
)
def test_ctrl_c_outside_a_build_is_one_line(tmp_path, name, line, code):
    """A Ctrl-C, SIGTERM or SIGHUP in any command (here while `report` computes): one line,
    status 128 + the signal's number."""
    script = SWALLOWED.replace(
        "    except:  # noqa: E722\n        pass\n", "    finally:\n        pass\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, name, "report"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    assert (result.returncode, result.stderr, result.stdout) == (code, f"costmodel: {line}\n", "")


def _catches(pid: int, signum: int) -> bool:
    """The process has a handler of its own for `signum` (SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(re.search(r"^SigCgt:\s*([0-9a-f]+)", status, re.M)[1], 16)
    return bool(caught >> (signum - 1) & 1)


@pytest.mark.parametrize(
    "name,line,code", [("SIGTERM", "terminated", 143), ("SIGHUP", "hung up", 129)]
)
def test_signal_while_the_command_imports_gets_its_line(tmp_path, name, line, code):
    """SIGTERM (or SIGHUP) in the first moments, while `costmodel report` is still importing
    what it needs: one line and 128 + the signal's number, as Ctrl-C, not a silent death."""
    signum = getattr(signal, name)
    proc = subprocess.Popen(
        [sys.executable, "-m", "costmodel", "report"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    for _ in range(250):  # half a second at most: the signal may land before the handlers too
        if _catches(proc.pid, signum):
            break
        time.sleep(0.002)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=hang_limit(1))
    assert (proc.returncode, stderr, stdout) == (code, f"costmodel: {line}\n", "")


BETWEEN = """
import os, runpy, signal, sys
from costmodel import cli
when, signum = sys.argv[1], getattr(signal, sys.argv[2])
sys.argv[1:] = ["report"]
real = cli.main
def main(argv=None):
    if when == "before":  # lands after __main__ installed the handlers, before main's try
        os.kill(os.getpid(), signum)
        return real(argv)
    code = real(argv)
    os.kill(os.getpid(), signum)  # lands after main returned
    return code
cli.main = main
runpy.run_module("costmodel", run_name="__main__")
"""


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize(
    "name,line,code", [("SIGTERM", "terminated", 143), ("SIGINT", "interrupted", 130)]
)
def test_signal_between_the_handlers_and_main_is_one_line(tmp_path, when, name, line, code):
    """`python -m costmodel` installs the handlers before it imports the command, and main
    installs them again inside its `try`: a signal that lands between the two (CI saw a
    traceback and status 1 there), or once main has returned and restored the handlers it
    found, still ends in the one line and 128 + the signal's number."""
    result = subprocess.run(
        [sys.executable, "-c", BETWEEN, when, name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    assert (result.returncode, result.stderr) == (code, f"costmodel: {line}\n")
    assert ("MFU" in result.stdout) == (when == "after")  # after: the report was printed


SECOND = """
import os, signal, sys
from costmodel import cli
from costmodel.evaluate.account import account as module
def account(sc, **options):
    os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C, while the account is computed
    raise AssertionError("not interrupted")
module.account = account
class Stderr:  # the second Ctrl-C arrives while "interrupted" is being printed
    def __init__(self, stream):
        self.stream = stream
    def write(self, text):
        if "interrupted" in text:
            os.kill(os.getpid(), signal.SIGINT)
        return self.stream.write(text)
    def flush(self):
        self.stream.flush()
sys.stderr = Stderr(sys.stderr)
sys.exit(cli.main(sys.argv[1:]))
"""


def test_second_ctrl_c_while_the_line_is_printed_is_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", SECOND, "report"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    assert (result.returncode, result.stderr, result.stdout) == (
        130,
        "costmodel: interrupted\n",
        "",
    )


IN_EXEC = """
import os, signal, sys
from costmodel import cli
from costmodel.evaluate.account import account as module
real = module.account
STOP = "import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nwhile True:\\n    pass\\n"
def account(sc, **options):  # the Ctrl-C lands in code that exec() runs from a string
    exec(STOP)
module.account = account
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", ["report", "handouts"])
def test_ctrl_c_inside_exec_of_a_string_still_exits_130(tmp_path, command):
    """`python -m costmodel`, and the Ctrl-C lands in code run by exec() of a string (dataclasses,
    namedtuple and SymPy's lambdify run such code; the account lambdifies as it starts): status
    130 and the one line. CPython marks a KeyboardInterrupt that leaves such an exec as
    unhandled, and under -m ends the process by SIGINT at exit even once the command caught it
    and printed its line: CI saw status -2 after the line. The handlers raise a subclass, which
    CPython does not mark."""
    (tmp_path / "stop_in_exec.py").write_text(IN_EXEC, encoding="utf-8")
    out = ["--out", str(tmp_path / "site" / "out")] if command == "handouts" else []
    result = subprocess.run(
        [sys.executable, "-m", "stop_in_exec", command, *out],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    built = "; no handouts written, the output folder is as it was" if out else ""
    assert (result.returncode, result.stderr, result.stdout) == (
        130,
        f"costmodel: interrupted{built}\n",
        "",
    )


EXIT_PATH = """
import os, signal, sys
from costmodel import cli
first, second = (getattr(signal, name) for name in sys.argv[1:3])
fired = []
def run(argv):  # a command that the first signal stops
    fired.append(first)
    os.kill(os.getpid(), first)
    while True:
        pass
cli.run = run
def trace(frame, event, arg):
    return line if frame.f_code is cli.main.__code__ else None
def line(frame, event, arg):  # then a second signal at every line main runs after it
    if event == "line" and fired:
        os.kill(os.getpid(), second)
        for _ in range(1000):  # the handler runs here, as if the signal landed on this line
            pass
    return line
sys.settrace(trace)
sys.exit(cli.main([]))
"""


@pytest.mark.parametrize("second", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_second_signal_anywhere_on_the_exit_path_changes_nothing(tmp_path, second):
    """After a Ctrl-C, a second signal at any line of the command's exit path (the except that
    prints the line, the finally that restores the handlers) changes neither the status nor the
    one line. CI saw a build end killed by SIGINT (status -2) after its line was printed: a
    second SIGINT in the moment between the except and the finally, with the handlers not yet
    ignored, raised a KeyboardInterrupt that nothing caught."""
    result = subprocess.run(
        [sys.executable, "-c", EXIT_PATH, "SIGINT", second],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=hang_limit(12),
        preexec_fn=_interruptible,
    )
    assert (result.returncode, result.stderr, result.stdout) == (
        130,
        "costmodel: interrupted\n",
        "",
    )


@pytest.mark.parametrize("target", ["report", "handouts"])
def test_make_passes_a_scenario_name_with_spaces(tmp_path, target):
    """`make report SCENARIO="my team.yaml"`: one file name, not two arguments."""
    venv = Path(sys.prefix)
    if shutil.which("make") is None:
        missing("make is needed")
    if target == "handouts" and not (shutil.which("chromium") or shutil.which("chromium-browser")):
        missing("headless Chromium (Debian package chromium) is needed for make handouts")
    if not (venv / "bin" / "costmodel").is_file():
        pytest.skip("the tests do not run in a virtual environment with costmodel installed")
    scenario = tmp_path / "my team.yaml"
    scenario.write_text("name: My team\nstep_time: 90\n" if target == "report" else "seq_len: -1\n")
    result = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "-o", f"{venv}/.installed"]
        + ["-o", "browser", target]
        + [f"VENV={venv}", f"SCENARIO={scenario}"],
        capture_output=True,
        text=True,
        timeout=hang_limit(12),
    )
    if target == "report":
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("Cost account: My team"), result.stdout[:200]
    else:  # refused for its content, before any notebook runs: the file was read
        assert "costmodel: error: seq_len: -1 is not allowed" in result.stderr, result.stderr


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a process and everything it started (as an out-of-memory killer would)."""
    parent = psutil.Process(proc.pid)
    victims = [parent, *parent.children(recursive=True)]
    for victim in victims:
        try:
            victim.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(victims, timeout=hang_limit(1))
    proc.wait(timeout=hang_limit(1))


def _junk(tmp: Path, site: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("costmodel-handouts-*")) + sorted(
        p.name for p in site.glob(".handouts.tmp-*")
    )


def test_junk_of_a_killed_build_is_removed_and_a_live_builds_is_not(tmp_path):
    """A build killed by SIGKILL leaves its work folder in TMPDIR and its folder beside --out:
    the next build removes them once that process is gone, never while it runs, and never a
    folder without an owner record."""
    tmp, site = tmp_path / "tmp", tmp_path / "site"
    tmp.mkdir()
    site.mkdir()
    (tmp / "costmodel-handouts-mine").mkdir()  # no owner record: not a build's
    (tmp / "costmodel-handouts-mine" / "data.csv").write_text("1,2\n")
    (site / ".handouts.tmp-mine").mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = [sys.executable, "-m", "costmodel", "handouts", "--out", str(site / "handouts")]
    killed = subprocess.Popen(
        args,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + hang_limit(9)
        while len(_junk(tmp, site)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)  # its work folder and its folder beside --out
        live = _junk(tmp, site)
        assert len(live) == 4 and killed.poll() is None, live
        refused = run(*args[4:], "--set", "seq_len=-1", cwd=tmp_path, env=env)
        assert refused.returncode == 2 and "seq_len" in refused.stderr
        assert _junk(tmp, site) == live  # a live build's folders are left alone
    finally:
        _kill_tree(killed)
    assert _junk(tmp, site) == live
    refused = run(*args[4:], "--set", "seq_len=-1", cwd=tmp_path, env=env)
    assert refused.returncode == 2 and "seq_len" in refused.stderr
    assert _junk(tmp, site) == ["costmodel-handouts-mine", ".handouts.tmp-mine"]
    assert (tmp / "costmodel-handouts-mine" / "data.csv").read_text() == "1,2\n"
    assert sorted(p.name for p in site.iterdir()) == [".handouts.tmp-mine"]


PRINTER = """
import sys, time
from costmodel.publish import booklet
printer = booklet.Printer()
print(printer._tmp, flush=True)
time.sleep(120)
"""


def test_browser_folder_of_a_killed_printer_is_removed(monkeypatch):
    """The booklet printer's `cmb-*` folder, left by a printer killed by SIGKILL, is removed by
    the next printer; a live printer's is not."""
    import tempfile

    from costmodel.publish import booklet

    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        missing("headless Chromium (Debian package chromium) is needed")
    base = Path(tempfile.mkdtemp(prefix="cm-", dir="/tmp"))  # short: the printer uses it
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(base))
        env = {**os.environ, "TMPDIR": str(base)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", PRINTER],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            for _ in range(2)
        ]
        dead, live = (Path(p.stdout.readline().strip()) for p in procs)
        assert dead.is_dir() and live.is_dir() and dead.parent == base
        _kill_tree(procs[0])
        assert dead.is_dir()  # left behind
        mine = booklet._browser_tmp()
        assert not dead.exists() and live.is_dir() and mine.is_dir()
        _kill_tree(procs[1])
    finally:
        shutil.rmtree(base, ignore_errors=True)
