"""The command line: formats, overrides, and one-line errors (exit 2) for bad input."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hang import hang_limit

from costmodel.cli import main


def run(*args, tmp_path=None):
    return subprocess.run(
        [sys.executable, "-m", "costmodel", *args], capture_output=True, text=True, cwd=tmp_path
    )


def test_text_report(capsys):
    assert main(["report"]) == 0
    out = capsys.readouterr().out
    assert "MFU" in out and "5.85%" in out and "7.80%" in out and "41.25%" in out


def test_markdown_report(capsys):
    assert main(["report", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Cost account") and "| MFU | 5.85% |" in out


def test_json_report_keys(capsys):
    assert main(["report", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in [
        "model_flops_per_step",
        "hardware_flops_per_step",
        "achieved_flops_per_s",
        "achieved_flops_per_s_per_gpu",
        "mfu",
        "hfu",
        "tokens_per_s",
        "tokens_per_s_per_gpu",
        "mfu_if_total_params",
        "padding",
        "attention",
        "scenario",
    ]:
        assert key in data
    assert set(data["padding"]) >= {
        "slots",
        "useful_fraction",
        "waste_fraction",
        "packing_speedup",
        "mfu_after_packing",
        "step_time_after_packing",
    }
    for reading in ("padded", "actual"):
        assert set(data["attention"][reading]) >= {"flops_per_step", "share", "mfu_with_attention"}
    assert data["mfu"] == pytest.approx(0.0585304, rel=1e-5)
    assert data["scenario"]["tokens_per_step"] == 2_310_000


def test_set_overrides(capsys):
    assert main(["report", "--format", "json", "--set", "step_time=60", "--set", "gpu=h100"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenario"]["peak_flops"] == 989.4e12
    assert data["mfu"] == pytest.approx(6 * 3e9 * 2.31e6 / 60 / (40 * 989.4e12))


def test_scenario_file_from_any_folder(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(
        "name: team\nactivated_params: 7e9\ntotal_params: 7e9\n"
        "num_experts: 0\nexperts_per_token: 0\nseq_len: 8192\n"
        "mean_tokens_per_sample: 8192\n"
    )
    result = run("report", "--scenario", str(path), "--format", "json", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["scenario"]["activated_params"] == 7_000_000_000
    assert data["padding"]["waste_fraction"] == 0
    assert data["tokens_per_expert"] is None


def test_hidden_size_alone_sets_attention_width(capsys):
    assert main(["report", "--format", "json", "--set", "hidden_size=4096"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenario"]["attention_dim"] == 4096
    assert data["scenario"]["attention_dim_from"] == "hidden_size"


BAD = [
    (["--set", "seqlen=4"], "unknown scenario key 'seqlen' (did you mean 'seq_len'?)"),
    (["--set", "step_time=abc"], "step_time: 'abc' is not allowed; expected a positive"),
    (["--set", "num_gpus=0"], "num_gpus: 0 is not allowed; expected a positive integer"),
    (["--set", "step_time=-5"], "step_time: -5 is not allowed"),
    (["--set", "step_time=.nan"], "step_time: nan is not allowed"),
    (["--set", "step_time=.inf"], "step_time: inf is not allowed"),
    (["--set", "num_gpus=2.5"], "num_gpus: 2.5 is not allowed; expected a positive integer"),
    (
        ["--set", "mean_tokens_per_sample=60000"],
        "mean_tokens_per_sample: 60000 is not allowed; expected at most seq_len (49152)",
    ),
    (
        ["--set", "experts_per_token=300"],
        "experts_per_token: 300 is not allowed; expected at most num_experts (256)",
    ),
    (
        ["--set", "activated_params=4e10"],
        "activated_params: 40000000000 is not allowed; expected at most total_params",
    ),
    (["--set", "gpu=Z80"], "gpu: 'Z80' is not allowed; expected one of H20, H100-SXM"),
    (
        ["--set", "recompute=some"],
        "recompute: 'some' is not allowed; expected one of none, selective, full",
    ),
    (["--set", "seq_len"], "--set: 'seq_len' is not allowed; expected KEY=VALUE"),
    (["--set", "num_gpus=true"], "num_gpus: True is not allowed"),
    (["--scenario", "/no/such/file.yaml"], "scenario file '/no/such/file.yaml': no such file"),
    (["--format", "xml"], "argument --format: invalid choice: 'xml'"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_one_line_exit_2(args, message):
    result = run("report", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "content,message",
    [
        ("seq_len: [1, 2\n", "malformed YAML at line"),
        ("- 1\n- 2\n", "expected a mapping of keys to values, got list"),
        ("seq_len: !!python/object/apply:os.system ['true']\n", "malformed YAML"),
        ("seq_len: 4096\nbogus_key: 1\n", "unknown scenario key 'bogus_key'"),
    ],
)
def test_bad_scenario_files(tmp_path, content, message):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    result = run("report", "--scenario", str(path))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_unreadable_scenario_file(tmp_path):
    path = tmp_path / "dir.yaml"
    path.mkdir()
    result = run("report", "--scenario", str(path))
    assert result.returncode == 2
    assert f"scenario file '{path}': is a directory; expected a file" in result.stderr


def test_api_raises_clear_exception():
    from costmodel.errors import CostModelError
    from costmodel.inputs import scenario

    with pytest.raises(CostModelError, match="seq_len: -1 is not allowed"):
        scenario.resolve(overrides={"seq_len": -1})
    assert issubclass(CostModelError, ValueError)


@pytest.mark.parametrize("preset", [None, "4"])
def test_report_starts_no_blas_threads(preset):
    """A MoE report's router simulation imports NumPy; the command asks OpenBLAS for one thread
    (its thread start was about 60 ms of a cold report's CPU) unless the user set a number."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset:
        env["OPENBLAS_NUM_THREADS"] = preset
    code = (
        "import io, contextlib, os\n"
        "from costmodel.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['report'])\n"
        "import numpy\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == (preset or "1")


@pytest.mark.parametrize("columns", [None, "40", "200", "0", "wide"])
def test_the_help_width_is_shutils(columns, monkeypatch):
    """The parser's formatter finds the width as shutil does (COLUMNS, else the terminal, else
    80) without importing it."""
    import shutil

    from costmodel import cli as command_line

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert command_line._terminal_columns() == shutil.get_terminal_size().columns


def _python(code: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`code` run by a fresh interpreter (with `args`), its output captured."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=hang_limit(12),
    )


@pytest.mark.parametrize("command", ["report", "gemms", "params"])
def test_a_cold_report_imports_no_shutil_nor_inspect_and_keeps_the_collector_in_process(command):
    """A quick command run as the process's command imports no shutil (argparse's formatter
    would) and no inspect (dataclasses would), and runs without the cyclic garbage collector;
    called with its arguments (a test, a notebook) it leaves the collector on."""
    args = [command] + (["qwen3.6-35b-a3b"] if command == "params" else [])
    probe = (
        "import contextlib, gc, io, sys\n"
        "from costmodel import cli\n"
        f"sys.argv = ['costmodel', *{args!r}]\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main()\n"
        "seen = ['shutil' in sys.modules, 'inspect' in sys.modules, gc.isenabled()]\n"
        "gc.enable()\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(sys.argv[1:])\n"
        "print(*seen, gc.isenabled())\n"
    )
    out = _python(probe)
    assert out.stdout.split() == ["False", "False", "False", "True"]


def test_dataclasses_without_inspect_behave_as_with_it():
    """dataclasses imported with the stand-in for inspect: inspect is imported at its first use
    (a class without a docstring gets the `__doc__` dataclasses gives it), and the name then
    gives inspect's own functions; an `import inspect` elsewhere gets the module itself."""
    probe = (
        "import sys\n"
        "from costmodel import cli\n"
        "cli._dataclasses_without_inspect()\n"
        "import dataclasses\n"
        "before = 'inspect' in sys.modules\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Point:\n"
        "    x: int\n"
        "    y: float = 0.5\n"
        "import inspect\n"
        "print(before, type(inspect).__name__, Point.__doc__,"
        " dataclasses.inspect.signature is inspect.signature)\n"
    )
    out = _python(probe)
    assert out.stdout.split(" ", 2) == ["False", "module", "Point(x: int, y: float = 0.5) True\n"]


#: A quick command as the process's command, with something that needs the interpreter's own
#: ending (or nothing); "returned" is printed only if process_main returns.
ENDING = """
import atexit, sys, threading
from costmodel import cli
needs = sys.argv[1]
sys.argv[1:] = ["report"]
if needs == "atexit":
    atexit.register(lambda: print("atexit ran"))
stop = threading.Event()  # the thread runs until process_main has returned (not for a time
if needs == "thread":       # the command may outlast on a loaded machine)
    threading.Thread(target=stop.wait, args=(600,)).start()
code = cli.process_main()
print("returned", code)
stop.set()
"""


@pytest.mark.parametrize(
    "needs,after",
    [("nothing", ""), ("atexit", "returned 0\natexit ran\n"), ("thread", "returned 0\n")],
)
def test_a_quick_command_ends_at_once_unless_something_needs_the_ending(needs, after, capsys):
    """Once a quick command has flushed its output, its process ends (no teardown): the report
    is complete and process_main does not return. With a handler registered with atexit, or a
    thread still running, process_main returns and the interpreter ends as usual."""
    out = _python(ENDING, needs, check=False)
    main(["report"])
    report = capsys.readouterr().out
    assert (out.returncode, out.stderr, out.stdout) == (0, "", report + after)


#: A sitecustomize for a fresh interpreter: the first import of the module COSTMODEL_TEST_AT
#: sends the process the signal COSTMODEL_TEST_SIGNAL, and the signal's handler runs there,
#: inside that import (as a Ctrl-C in the first milliseconds lands inside `import argparse`).
SIGNAL_INSIDE_IMPORT = """
import os, signal, sys
AT, SIGNUM = os.environ["COSTMODEL_TEST_AT"], getattr(signal, os.environ["COSTMODEL_TEST_SIGNAL"])
class SignalInside:
    def find_spec(self, name, path=None, target=None):
        if name == AT:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), SIGNUM)
            for _ in range(1000):  # the handler runs here, as if the signal landed now
                pass
        return None
sys.meta_path.insert(0, SignalInside())
"""


def _entry_points():
    """`python -m costmodel`, and the `costmodel` script where it is installed."""
    script = Path(sys.executable).with_name("costmodel")
    return [[sys.executable, "-m", "costmodel"]] + ([[str(script)]] if script.is_file() else [])


@pytest.mark.parametrize(
    "entry", _entry_points(), ids=lambda entry: " ".join(entry[1:]) or "script"
)
@pytest.mark.parametrize(
    "module,name,line,code",
    [
        ("argparse", "SIGINT", "interrupted", 130),
        ("argparse", "SIGTERM", "terminated", 143),
        ("threading", "SIGINT", "interrupted", 130),
        ("costmodel.formats", "SIGHUP", "hung up", 129),
    ],
)
def test_a_signal_inside_the_first_imports_gets_its_line(tmp_path, entry, module, name, line, code):
    """Ctrl-C (or SIGTERM, SIGHUP) while the command line imports argparse and what it needs
    at its start, the first 20 ms of `costmodel`: its one line and 128 + the signal's number,
    not a traceback (nor a silent death). The handlers are installed before those imports."""
    (tmp_path / "sitecustomize.py").write_text(SIGNAL_INSIDE_IMPORT)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "COSTMODEL_TEST_AT": module,
        "COSTMODEL_TEST_SIGNAL": name,
    }
    result = subprocess.run(
        [*entry, "report"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=hang_limit(2),
    )
    assert (result.returncode, result.stderr, result.stdout) == (code, f"costmodel: {line}\n", "")


@pytest.mark.parametrize(
    "args",
    [
        ["report"],
        ["report", "--format", "json"],
        ["gemms"],
        ["params", "qwen3.6-35b-a3b"],
        ["sweep", "--vary", "step_time=60:240:4"],
        ["plan", "--top", "2", "--format", "csv"],
    ],
)
def test_output_that_cannot_be_written_is_one_line(args, tmp_path):
    """Standard output on a full disk (/dev/full: every write fails with ENOSPC): one line
    naming standard output, status 2, no traceback and no 'Exception ignored' at the exit."""
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "costmodel", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env={**os.environ, "PYTHONUNBUFFERED": ""},
            timeout=hang_limit(6),
        )
    assert (result.returncode, result.stderr) == (
        2,
        "costmodel: error: cannot write standard output: No space left on device\n",
    )


def test_a_closed_pipe_still_ends_quietly(tmp_path):
    """Standard output a pipe whose reader has gone: status 1, nothing on stderr (as before)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "costmodel", "report"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    proc.stdout.close()
    _, stderr = proc.communicate(timeout=hang_limit(2))
    assert (proc.returncode, stderr) == (1, b"")


def test_a_failed_write_in_process_is_one_line(capsys, monkeypatch):
    """main() (a test, a notebook): a write to standard output that fails is the same line."""

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Full())
    assert main(["report"]) == 2
    assert capsys.readouterr().err == (
        "costmodel: error: cannot write standard output: No space left on device\n"
    )


@pytest.mark.parametrize("edition", ["teacher", "both"])
def test_the_handouts_line_shows_the_folder_escaped(edition, capsys, monkeypatch):
    """The line saying where the handouts went shows the folder with its control characters
    escaped (a folder named with ESC sequences clears no screen). The build itself is a stand-in
    here: the line is the command line's."""
    from costmodel.publish import handouts

    folder = Path("site\x1b[2J\x1b]8;;x\x07")
    monkeypatch.setattr(handouts, "build", lambda *args, **kwargs: ([], folder))
    assert main(["handouts", "--out", str(folder), "--edition", edition]) == 0
    out = capsys.readouterr().out
    shown = "site\\x1b[2J\\x1b]8;;x\\x07"
    assert "\x1b" not in out and "\x07" not in out
    assert out.rstrip("\n").endswith(
        f"to {shown} (student edition in {shown}/student)" if edition == "both" else f"to {shown}"
    )


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop itself
def test_a_stop_a_finalizer_drops_is_raised_again_before_any_output(capsys):
    """CPython drops an exception a signal handler raises inside a weakref callback (importlib
    runs one, a module lock's, during imports): the handler's record raises it again before the
    command writes anything, and main ends in the signal's line and status, no report."""
    import gc
    import signal
    import weakref

    from costmodel import errors

    class Held:
        pass

    held = Held()
    ref = weakref.ref(held, lambda _: errors._on_signal(signal.SIGTERM, None))
    del held  # the callback's Terminated is dropped ("Exception ignored in ..."), as in importlib
    gc.collect()
    assert ref() is None and errors._unreported == [signal.SIGTERM]
    before = {signum: signal.getsignal(signum) for signum in errors.STOPPED}
    try:
        assert main(["report"]) == 128 + signal.SIGTERM
    finally:  # a stopped main ignores the signals from then on (its process ends): not this one
        for signum, handler in before.items():
            signal.signal(signum, handler)
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("costmodel: terminated\n")
    assert errors._unreported == []  # reported: the next command runs
    assert main(["report"]) == 0 and "Cost account" in capsys.readouterr().out
