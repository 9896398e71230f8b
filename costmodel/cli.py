"""The command line: `costmodel report`, `costmodel params`, `costmodel handouts`.

Bad input prints one line on stderr and exits with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys

from costmodel.errors import CostModelError

FORMATS = ("text", "markdown", "json")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse prints usage too)
        raise CostModelError(message)


def _scenario_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", metavar="FILE",
                        help="a YAML file with any subset of the scenario keys")
    parser.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                        default=[], help="override one scenario key (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="costmodel", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    report = sub.add_parser("report", help="print the cost account of a training step")
    _scenario_args(report)
    report.add_argument("--format", choices=FORMATS, default="text")

    handouts = sub.add_parser("handouts", help="re-execute the notebooks for a scenario and "
                              "export them to offline HTML")
    _scenario_args(handouts)
    handouts.add_argument("--out", metavar="DIR", help="output folder (default: "
                          "handouts/course, or handouts/<scenario file name>)")
    handouts.add_argument("--no-input", action="store_true", help="hide the code (readers)")
    handouts.add_argument("--jobs", type=_positive_int, metavar="N",
                          help="notebooks executed in parallel (default: all cores)")

    params = sub.add_parser("params", help="parameter breakdown of a Hugging Face config.json")
    params.add_argument("config", help="a config.json path or a preset name")
    params.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected a positive integer")
    return int(text)


def _scenario(args):
    from costmodel import scenario

    return scenario.resolve(args.scenario, scenario.parse_set(args.overrides))


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "report":
        from costmodel import report

        sys.stdout.write(report.render(report.account(_scenario(args)), args.format))
    elif args.command == "handouts":
        from pathlib import Path

        from costmodel import handouts, scenario

        out = args.out or ("handouts/" + (Path(args.scenario).stem if args.scenario else "course"))
        sections, folder = handouts.build(args.scenario, scenario.parse_set(args.overrides),
                                          out, args.no_input, args.jobs)
        failed = [s for s in sections if s.error]
        for section in failed:
            print(f"costmodel: error: {section.error}", file=sys.stderr)
        print(f"wrote {len(sections) - len(failed)} of {len(sections)} handouts and index.html "
              f"to {folder}")
        return 1 if failed else 0
    elif args.command == "params":
        import json

        from costmodel import models

        shape = models.load_shape(args.config)
        if args.format == "json":
            sys.stdout.write(json.dumps(models.params_json(shape), indent=2) + "\n")
        else:
            sys.stdout.write(models.params_text(shape))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except CostModelError as error:
        print(f"costmodel: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
