"""The program's state files (a handouts folder's manifest, a temporary folder's owner record,
the lab's record) as a hostile local user crafts them: malformed, nested thousands deep, too
large, a link, another host's. Each is foreign: left as it is, byte for byte, and where the user
must act one line, never a traceback (issue 32, items 7 and 12)."""

import json
import os
import socket
from pathlib import Path

import pytest

from costmodel import cli
from costmodel.publish import state, tempdirs
from costmodel.publish.manifest import MARKER, write_manifest

#: JSON nested 200,000 deep (400 KB): json.loads raised RecursionError on it.
NESTED = "[" * 200_000 + "]" * 200_000


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every entry under `folder`: a file's bytes, a link's target, "<dir>" or "<other>" (a
    FIFO is not opened). Without recursion: the folders tested nest 700 deep."""
    found, pending = {}, [folder]
    while pending:
        for entry in os.scandir(pending.pop()):
            path = Path(entry.path)
            if entry.is_symlink():
                found[str(path.relative_to(folder))] = b"<link>" + os.readlink(path).encode()
            elif entry.is_dir():
                found[str(path.relative_to(folder))] = b"<dir>"
                pending.append(path)
            else:
                data = path.read_bytes() if entry.is_file() else b"<other>"
                found[str(path.relative_to(folder))] = data
    return found


# ------------------------------------------------------------------ the reader


@pytest.mark.parametrize(
    "case,why",
    [
        ("nested", "nested deeper than"),
        ("deep but parsed", "nested deeper than"),
        ("too large", "over 1,048,576 bytes"),
        ("not UTF-8", "not UTF-8"),
        ("not JSON", "not JSON"),
        ("huge number", "not JSON"),
        ("link", "a symbolic link"),
        ("FIFO", "not a regular file"),
    ],
)
def test_the_reader_calls_anything_but_small_json_foreign(tmp_path, case, why):
    path = tmp_path / "state.json"
    if case == "link":
        path.symlink_to("/dev/zero")
    elif case == "FIFO":
        os.mkfifo(path)  # read without waiting for a writer
    else:
        path.write_bytes(
            {
                "nested": NESTED.encode(),
                "deep but parsed": b"[" * 20 + b"]" * 20,
                "too large": b" " * (1 << 20) + b"1",
                "not UTF-8": b'{"a": "\xff"}',
                "not JSON": b'{"pid": 1',
                "huge number": b"1" * 5000,
            }[case]
        )
    with pytest.raises(state.Foreign, match=why):
        state.read_json(path, 1 << 20)
    with pytest.raises(FileNotFoundError):
        state.read_json(tmp_path / "absent.json", 1 << 20)
    path.unlink()
    path.write_text('{"files": [{"path": "a"}]}')
    assert state.read_json(path, 1 << 20) == {"files": [{"path": "a"}]}


# ------------------------------------------------------------------ owner records (item 7)

HOST = socket.gethostname()
#: A PID no process has (pid_max's largest value is 2**22, and PIDs stay below it): its owner
#: is gone.
DEAD = {"pid": 1 << 22, "started": 1e9, "host": HOST}

MALFORMED = {
    "negative PID": {"pid": -1, "started": 1e9, "host": HOST},
    "PID -1 alone (the issue's)": {"pid": -1},
    "PID 0": {"pid": 0, "started": 1e9, "host": HOST},
    "huge PID": {"pid": 10**30, "started": 1e9, "host": HOST},
    "PID as text": {"pid": "1", "started": 1e9, "host": HOST},
    "PID true": {"pid": True, "started": 1e9, "host": HOST},
    "start not a number": {"pid": 4321, "started": "x", "host": HOST},
    "start NaN": '{"pid": 4321, "started": NaN, "host": "%s"}' % HOST,
    "no host (an older build's)": {"pid": 4321, "started": 1e9},
    "a field more": {**DEAD, "note": 1},
    "a list": [DEAD],
    "nested": NESTED,
    "too large": json.dumps(DEAD) + " " * 5000,
    "not UTF-8": b'{"pid": 4321, "started": 1e9, "host": "\xff"}',
}


def _record(folder: Path, record) -> None:
    folder.mkdir()
    data = record if isinstance(record, (str, bytes)) else json.dumps(record)
    (folder / tempdirs.OWNER).write_bytes(data if isinstance(data, bytes) else data.encode())


def _handouts_refused_for_its_scenario(tmp_path, capsys) -> None:
    """A `handouts` that sweeps the temporary folder, then stops at its scenario: status 2 and
    that one line, no traceback."""
    out = tmp_path / "site" / "handouts"
    assert cli.main(["handouts", "--out", str(out), "--set", "seq_len=-1"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("costmodel: error: seq_len: -1 is not allowed"), line


def test_a_crafted_owner_record_stops_no_build_and_is_left(tmp_path, monkeypatch, capsys):
    """Any local user can make `costmodel-handouts-*` folders in the shared temporary folder:
    with a record of PID -1 or of nested JSON each one stopped every `handouts` (psutil's
    ValueError, RecursionError). Each is foreign now: the build goes on, and leaves it as it
    is; a dead build's own folder is still removed."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp))
    for n, record in enumerate(MALFORMED.values()):
        _record(tmp / f"costmodel-handouts-{n}", record)
    (tmp / "costmodel-handouts-link").mkdir()
    (tmp / "costmodel-handouts-link" / tempdirs.OWNER).symlink_to("/dev/zero")
    os.mkfifo(tmp / "costmodel-handouts-link" / "pipe")
    _record(tmp / "costmodel-handouts-dead", DEAD)
    before = snapshot(tmp)
    _handouts_refused_for_its_scenario(tmp_path, capsys)
    del before["costmodel-handouts-dead"], before[f"costmodel-handouts-dead/{tempdirs.OWNER}"]
    assert snapshot(tmp) == before


def test_the_owner_record_names_the_host_and_another_hosts_is_kept(tmp_path):
    """A temporary folder shared between hosts (NFS): a build on this host cannot see whether
    another host's process is alive, so its folders are kept; this host's dead ones go."""
    mine = tempdirs.owned_tempdir("costmodel-handouts-", tmp_path)
    record = json.loads((mine / tempdirs.OWNER).read_text(encoding="ascii"))
    assert record == {"pid": os.getpid(), "started": tempdirs._started(), "host": HOST}
    _record(tmp_path / "costmodel-handouts-there", {**DEAD, "host": HOST + "-elsewhere"})
    _record(tmp_path / "costmodel-handouts-dead", DEAD)
    tempdirs.sweep(tmp_path, "costmodel-handouts-")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [mine.name, "costmodel-handouts-there"]
    )


def test_another_users_folder_is_kept(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a folder of another user needs root")
    _record(tmp_path / "costmodel-handouts-theirs", DEAD)
    os.chown(tmp_path / "costmodel-handouts-theirs", 4321, 4321)
    tempdirs.sweep(tmp_path, "costmodel-handouts-")
    assert (tmp_path / "costmodel-handouts-theirs" / tempdirs.OWNER).is_file()


# ------------------------------------------------------------------ manifests (item 12)


def _nested_builds(top: Path, depth: int) -> None:
    """`top` and `depth - 1` builds nested in it (top/s/, top/s/s/, ...), each a complete build
    of one page with a valid manifest naming the next."""
    folders = [top / "/".join(["s"] * n) if n else top for n in range(depth)]
    folders[-1].mkdir(parents=True)
    for n, folder in reversed(list(enumerate(folders))):
        (folder / "index.html").write_text(f"<p>{n}</p>", encoding="utf-8")
        write_manifest(folder, builds=["s"] if n < depth - 1 else [])


def _deep_file(top: Path) -> None:
    """A build whose manifest (valid, with its digest) lists a file 20 folders deep (a build
    writes none deeper than one folder; 1,200 deep, the check recursed into each)."""
    deep = top / "/".join(["d"] * 20)
    deep.mkdir(parents=True)
    (deep / "page.html").write_text("x", encoding="utf-8")
    write_manifest(top)


@pytest.mark.parametrize(
    "case,said",
    [
        ("nested manifest", "which is not a manifest costmodel handouts wrote"),
        ("700 nested builds", "a build nested 5 deep in another"),
        ("a file 20 folders deep", "which is not a manifest costmodel handouts wrote"),
        ("manifest is a FIFO", "exists and was not written by costmodel handouts"),
    ],
)
def test_a_crafted_handouts_folder_is_one_line_and_kept(tmp_path, capsys, case, said):
    """A folder `handouts --out` would replace, crafted: a manifest of 400 KB of nested brackets,
    builds nested 700 deep (both raised RecursionError), a file listed deeper than a build
    writes one, a FIFO where the manifest is (read without waiting for a writer). One line,
    status 2, nothing touched."""
    out = tmp_path / "handouts"
    if case == "nested manifest":
        out.mkdir()
        (out / MARKER).write_text(NESTED, encoding="ascii")
    elif case == "700 nested builds":
        _nested_builds(out, 700)
    elif case == "manifest is a FIFO":
        out.mkdir()
        (out / "index.html").write_text("x")
        os.mkfifo(out / MARKER)
    else:
        _deep_file(out)
    before = snapshot(out)
    assert cli.main(["handouts", "--out", str(out)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"costmodel: error: --out: '{out}' ") and said in line, line
    assert snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["handouts"]


def test_nested_builds_as_deep_as_a_build_makes_them_still_check(tmp_path):
    """The bound is on crafted depth only: a build with a nested build in a nested build (as
    `--out DIR/student` inside a folder that is itself nested) is replaced as before."""
    from costmodel.publish.manifest import owned_problem

    _nested_builds(tmp_path / "handouts", 3)
    assert owned_problem(tmp_path / "handouts") is None
