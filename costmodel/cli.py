"""The command line: `costmodel report`, `gemms`, `params`, `sweep`, `plan` and `handouts`.

Bad input, or an output that cannot be written (a full disk), prints one line on stderr and exits
with status 2; no traceback (a closed pipe ends the command quietly, status 1). Ctrl-C, SIGTERM
and SIGHUP print one line each and exit with status 130, 143 and 129 (a second one while the
command stops is ignored); the handlers are installed first: this module imports only `signal`
and `costmodel.errors` at its top, argparse and the rest once they are installed.
"""

from __future__ import annotations

import os
import signal
import sys

from costmodel import errors
from costmodel.errors import STOPPED, CostModelError, Terminated, catch_signals

TYPE_CHECKING = False  # typing is not imported before the handlers either
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable

FORMATS = ("text", "markdown", "json")


def _terminal_columns() -> int:
    """`shutil.get_terminal_size().columns`, as shutil finds it (COLUMNS, else the terminal of
    stdout, else 80), without importing shutil."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        size = os.get_terminal_size(sys.__stdout__.fileno())
    except (AttributeError, ValueError, OSError):
        return 80
    return size.columns or 80


_PARSER: type | None = None


def _parser_class() -> type:
    """The command line's ArgumentParser, made at the first call (after the handlers): an error
    is one line, exit 2 (argparse prints the usage too); the help at the width argparse finds,
    without its `import shutil` (with zlib, bz2 and lzma: 2% of a cold report)."""
    global _PARSER
    if _PARSER is None:
        import argparse

        class Formatter(argparse.HelpFormatter):
            def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
                if width is None:
                    width = _terminal_columns() - 2
                super().__init__(prog, indent_increment, max_help_position, width)

        class Parser(argparse.ArgumentParser):
            def __init__(self, *args, **kwargs):
                kwargs.setdefault("formatter_class", Formatter)
                super().__init__(*args, **kwargs)

            def error(self, message: str):
                raise CostModelError(message)

        _PARSER = Parser
    return _PARSER


def _scenario_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario", metavar="FILE", help="a YAML file with any subset of the scenario keys"
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="override one scenario key (repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser_class = _parser_class()
    parser = parser_class(prog="costmodel", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=parser_class)

    report = sub.add_parser("report", help="print the cost account of a training step")
    _scenario_args(report)
    report.add_argument("--format", choices=FORMATS, default="text", help="output format")

    handouts = sub.add_parser(
        "handouts", help="re-execute the notebooks for a scenario and export them to offline HTML"
    )
    _scenario_args(handouts)
    handouts.add_argument(
        "--out",
        metavar="DIR",
        help="output folder (default: handouts/course, or handouts/<scenario file name>)",
    )
    handouts.add_argument("--no-input", action="store_true", help="hide the code (readers)")
    handouts.add_argument(
        "--edition",
        choices=("teacher", "student", "both"),
        default="teacher",
        help="teacher: every cell (default); student: solutions replaced by answer spaces; "
        "both: the teacher's in DIR, the student's in DIR/student/",
    )
    handouts.add_argument(
        "--pdf",
        action="store_true",
        help="also print each edition as one A4 booklet (booklet.pdf; needs Chromium)",
    )
    handouts.add_argument(
        "--jobs",
        type=_positive_int,
        metavar="N",
        help="notebooks executed in parallel (default: all cores)",
    )

    gemms = sub.add_parser(
        "gemms", help="list the model's GEMMs per micro batch, with intensity and bound"
    )
    _scenario_args(gemms)
    gemms.add_argument("--format", choices=("text", "json"), default="text", help="output format")

    _sweep_args(sub)
    _plan_args(sub)

    params = sub.add_parser("params", help="parameter breakdown of a Hugging Face config.json")
    params.add_argument("config", help="a config.json path or a preset name")
    params.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    return parser


def _sweep_args(sub) -> None:
    sweep = sub.add_parser(
        "sweep", help="the account, the predicted step and the memory over a grid of keys (CSV)"
    )
    _scenario_args(sweep)
    sweep.add_argument(
        "--vary",
        action="append",
        metavar="KEY=START:STOP:N|KEY=V1,V2,...",
        required=True,
        help="N points from START to STOP, both included, or a list of values, of any numeric "
        "scenario key (repeatable: the grid is the product)",
    )
    sweep.add_argument("--out", metavar="FILE", help="write the CSV here (default: stdout)")
    sweep.add_argument(
        "--plot", metavar="FILE", help="plot against the first key (.svg or no suffix: SVG; .png)"
    )
    y = ("mfu", "predicted_mfu", "predicted_step")  # present.sweep.PLOT_Y
    sweep.add_argument("--plot-y", choices=y, default="mfu", help="what --plot draws")
    sweep.add_argument(
        "--closed-forms", action="store_true", help="the closed forms' columns and keys alone"
    )


def _plan_args(sub) -> None:
    plan = sub.add_parser(
        "plan", help="rank the layouts that fit the scenario's model and cluster by step time"
    )
    _scenario_args(plan)
    plan.add_argument("--gpus", type=_count, metavar="N", help="GPUs (default: num_gpus)")
    plan.add_argument("--gpu", metavar="NAME", help="GPU model (default: the scenario's)")
    plan.add_argument("--top", type=_count, default=10, metavar="K", help="layouts shown")
    plan.add_argument("--fp8", action="store_true", help="search FP8 too where the GPU has it")
    plan.add_argument(
        "--framework", metavar="NAME", help="the team's framework (its options only searched)"
    )
    plan.add_argument(
        "--format", choices=("text", "json", "csv"), default="text", help="output format"
    )


def _plan(args) -> None:
    from costmodel.evaluate.plan.plan import search
    from costmodel.present.plan import render

    args.overrides += [f"framework={args.framework}"] if args.framework else []  # the scenario's
    found = search(_scenario(args), args.gpus, args.gpu, args.top, fp8=args.fp8)
    _output([render(found, args.format, args.top)])


def _sweep(args) -> None:
    """costmodel sweep: check everything, compute the CSV and the plot, then write them (each
    file checked again as it is put in place: present.sweep.write_atomically)."""
    from costmodel.evaluate.sweep import sweep
    from costmodel.inputs import scenario
    from costmodel.present import sweep as out

    overrides = scenario.parse_set(args.overrides)
    axes = [sweep.parse_axis(text) for text in args.vary]
    resolved = scenario.resolve(args.scenario, overrides)
    sweep.check_axes(resolved, axes, overrides, args.closed_forms)
    kind = out.plot_kind(args.plot) if args.plot else None
    if args.closed_forms and args.plot_y != "mfu":
        raise CostModelError(
            f"--plot-y: {args.plot_y} is not allowed with --closed-forms; expected mfu (the "
            "closed forms predict no step)"
        )
    if args.out and args.plot:
        out.check_distinct(args.out, args.plot)
    targets = [
        out.check_target(path, what, option)
        for path, what, option in ((args.out, "csv", "--out"), (args.plot, kind, "--plot"))
        if path
    ]
    for axis in axes:
        if axis.note:
            print(axis.note, file=sys.stderr)
    grid = sweep.evaluate_grid(resolved, axes, model=not args.closed_forms)
    plot = out.plot_bytes(grid, kind, args.plot_y) if kind else None
    chunks = out.csv_chunks(grid, resolved["name"], sweep.conventions(resolved))
    if not args.out:
        _output(chunks)
    for target in targets:
        csv = target.kind == "csv"
        out.write_atomically(target, (c.encode("utf-8") for c in chunks) if csv else [plot])
        rows = f"{len(grid):,} rows" if csv else f"the plot ({target.kind.upper()})"
        line = f"wrote {rows} to {_one_line(target.path)}"
        if args.out:
            _output([line + "\n"])
        else:  # after the CSV on stdout: said where it does not mix with it
            print(line, file=sys.stderr)


def _bounded_int(top: int, digits: int):
    """An argparse type: ASCII digits only ('²'.isdigit() is true, but int('²') fails), at
    most `digits` of them, 1 to `top`."""

    def parse(text: str) -> int:
        import argparse

        value = int(text) if text.isascii() and text.isdigit() and len(text) <= digits else 0
        if not 1 <= value <= top:
            shown = repr(text) if len(text) <= 40 else repr(text[:40]) + "…"
            raise argparse.ArgumentTypeError(
                f"{shown} is not allowed; expected a positive integer up to {top:,}"
            )
        return value

    return parse


MAX_JOBS = 1024
#: --jobs N; --gpus N and --top K.
_positive_int, _count = _bounded_int(MAX_JOBS, 6), _bounded_int(10_000_000, 8)


def _scenario(args):
    from costmodel.inputs import scenario

    return scenario.resolve(args.scenario, scenario.parse_set(args.overrides))


#: The commands that finish in a fraction of a second. Run as the process's command (no `argv`
#: given), they run without the cyclic garbage collector, whose passes over the objects the
#: imports create were 2% of a cold report (the process ends before any garbage matters); they
#: import dataclasses without inspect (`_dataclasses_without_inspect`); and `process_main` ends
#: their process once the output is flushed (`_end_at_once`).
QUICK_COMMANDS = ("report", "gemms", "params")

#: Set when the process's command is one of QUICK_COMMANDS (`process_main` reads it).
_quick_process = False


class _FirstUse(type(sys)):
    """A stand-in for a module not imported yet: the module is imported at the first attribute
    asked of the stand-in, and gives it."""

    def __getattr__(self, name: str):
        return getattr(__import__(self.__name__), name)


def _dataclasses_without_inspect() -> None:
    """Import dataclasses with its name `inspect` bound to a stand-in that imports inspect at its
    first use. dataclasses uses inspect once, for the `__doc__` of a class without a docstring
    (the quick commands' classes all have one); inspect, with the ast, dis and tokenize it
    imports, was 8% of a cold report. The stand-in leaves `sys.modules` at once: any other
    `import inspect` gets the module itself."""
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        return
    stand_in = _FirstUse("inspect")
    sys.modules["inspect"] = stand_in
    try:
        import dataclasses  # noqa: F401
    finally:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]


#: Set once a write to standard output has failed (`process_main` reads it).
_output_failed = False


def _output(texts: Iterable[str]) -> None:
    """The command's output on standard output, flushed: a write that fails (a full disk,
    /dev/full) is one line naming standard output (CostModelError, status 2); a closed pipe
    stays a BrokenPipeError, which main ends quietly (status 1)."""
    global _output_failed
    errors.raise_unreported()  # a stop a finalizer dropped while the command imported: no output
    try:
        for text in texts:
            sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as error:
        _output_failed = True
        if isinstance(error, BrokenPipeError):
            raise
        raise CostModelError(f"cannot write standard output: {error.strerror or error}") from None


def _discard_output() -> None:
    """Standard output pointed at /dev/null once a write to it failed: what its buffer holds
    goes nowhere, and the interpreter's last flush does not fail ('Exception ignored')."""
    try:
        os.dup2(null := os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None and args.command in QUICK_COMMANDS:
        import gc

        global _quick_process
        _quick_process = True
        gc.disable()
        _dataclasses_without_inspect()
    if args.command == "report":
        # A MoE report whose experts the router table lacks simulates the router with NumPy but
        # no BLAS: without this, OpenBLAS starts a thread per core at import, about 60 ms of CPU
        # (the user's own setting is kept; the command starts no other process).
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        from costmodel.evaluate.account.account import account
        from costmodel.present import report

        # one account per process: not kept (nor copied) for another call
        _output([report.render(account(_scenario(args), kept=False), args.format)])
    elif args.command == "handouts":
        from costmodel.inputs import scenario
        from costmodel.publish import handouts, output

        out = output.default_out(args.scenario) if args.out is None else args.out
        try:
            sections, folder = handouts.build(
                args.scenario,
                scenario.parse_set(args.overrides),
                out,
                args.no_input,
                args.jobs,
                edition=args.edition,
                pdf=args.pdf,
            )
        except (KeyboardInterrupt, Terminated) as stop:
            stop.during_build = True  # main says so in its line
            raise
        failed = [s for s in sections if s.error]
        for section in failed:
            kept = " (kept the previous page, marked stale)" if section.stale else ""
            print(f"costmodel: error: {_one_line(section.error)}{kept}", file=sys.stderr)
        editions = ("teacher", "student") if args.edition == "both" else (args.edition,)
        extra = " and booklet.pdf" if args.pdf else ""
        where = _one_line(folder) + (
            f" (student edition in {_one_line(folder / 'student')})" if len(editions) > 1 else ""
        )
        _output(
            [
                f"wrote {len(sections) - len(failed)} of {len(sections)} handouts, "
                f"index.html{extra} ({' and '.join(editions)} "
                f"edition{'s' if len(editions) > 1 else ''}) to {where}\n"
            ]
        )
        return 1 if failed else 0
    elif args.command == "gemms":
        from costmodel.evaluate.simulate.compute_time import row_efficiencies
        from costmodel.evaluate.simulate.gemms import gemm_table
        from costmodel.present.gemms import render_gemms

        sc = _scenario(args)
        table = {**gemm_table(sc), "efficiencies": row_efficiencies(sc)}
        _output([render_gemms(table, args.format)])
    elif args.command == "sweep":
        _sweep(args)
    elif args.command == "plan":
        _plan(args)
    elif args.command == "params":
        import json

        from costmodel.inputs import models
        from costmodel.present.params import params_text

        shape = models.load_shape(args.config)
        if args.format == "json":
            _output([json.dumps(models.params_json(shape), indent=2) + "\n"])
        else:
            _output([params_text(shape)])
    return 0


def _one_line(message) -> str:
    """A message (or a path) as one line, safe for a terminal: a line break or any other control
    character inside a user's key, value or path is shown escaped (formats.printable)."""
    from costmodel.formats import printable

    return printable(message)


def main(argv: list[str] | None = None) -> int:
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous: dict[int, object] = {}
    stopped = False
    try:
        if main_thread:  # inside the try: a signal that lands at once still gets its line
            previous = catch_signals()
        return run(argv)
    except CostModelError as error:
        print(f"costmodel: error: {_one_line(str(error))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1
    except (KeyboardInterrupt, Terminated) as stop:
        # first, before anything else: a second signal from here to the process's end changes
        # nothing (while this except runs the handlers would let it pass, but not once it has
        # returned, in the moment before the finally ignores them: CI saw status -2 there)
        stopped = True
        if main_thread:
            errors.ignore_signals()
        return _stopped_line(stop)
    finally:
        for signum, handler in previous.items():  # once stopped, the process ends: ignored
            signal.signal(signum, signal.SIG_IGN if stopped else handler)


def _stopped_line(stop: BaseException) -> int:
    """Print the line of the signal that stopped the command; its exit status."""
    errors.reported()
    signum = getattr(stop, "signum", signal.SIGINT)
    built = "; no handouts written, the output folder is as it was"
    print(
        f"costmodel: {STOPPED[signum]}{built if getattr(stop, 'during_build', False) else ''}",
        file=sys.stderr,
    )
    return 128 + signum


def process_main() -> int:
    """The process's command (`python -m costmodel` and the `costmodel` script): the handlers
    installed at once, before the command imports what it needs (main installs them again). A
    signal that lands between the two, before main's own `try`, or after main has returned,
    still ends in its one line and status, not a traceback; from main's return to the process's
    end the signals are ignored (it is ending). A quick command's process ends at once."""
    try:
        try:
            catch_signals()
            code = main()
            errors.raise_unreported()  # one a finalizer dropped where no output followed
        finally:
            errors.ignore_signals()
            if _output_failed:
                _discard_output()
    except (KeyboardInterrupt, Terminated) as stop:
        return _stopped_line(stop)
    if _quick_process:
        _end_at_once(code)
    return code


def _end_at_once(code: int) -> None:
    """End the process with `code` once stdout and stderr are flushed, without the interpreter's
    teardown: it frees, one by one, every object the imports made, 8% of a cold report, and a
    quick command leaves nothing that needs it. Where something might (a handler registered
    with atexit, a thread still running) or a flush fails (a closed pipe), this returns and the
    interpreter ends the process as usual."""
    import atexit
    import threading

    if atexit._ncallbacks() or threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
