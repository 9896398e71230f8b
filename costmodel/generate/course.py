"""Write costmodel/inputs/course_scenario.py, the course's scenario file
(costmodel/inputs/scenarios/course.yaml) as its safe YAML loader reads it, so that the course's
report imports no PyYAML: `make numeric`, or `python -m costmodel.generate.course`.
tests/inputs/test_course_scenario.py fails when it is stale."""

from __future__ import annotations

from pathlib import Path

from costmodel.generate import PACKAGE, run, write_generated

TARGET = PACKAGE / "inputs" / "course_scenario.py"
HEADER = '"""GENERATED from costmodel/inputs/scenarios/course.yaml'


def source() -> str:
    """The generated module: `values()` returns the course file's mapping, as a new dict (and
    new lists) at each call, every value written as Python writes it back (repr)."""
    from costmodel.inputs import scenario_yaml

    data = scenario_yaml.course_file_values()
    rows = "".join(f"        {key!r}: {value!r},\n" for key, value in data.items())
    return (
        f"{HEADER} by costmodel.generate.course: do\n"
        "not edit. Regenerate with `make numeric` (`python -m costmodel.generate.course`);\n"
        'tests/inputs/test_course_scenario.py fails when this file is stale."""\n\n'
        "# ruff: noqa: E501\n\n\n"
        "def values() -> dict:\n"
        '    """The course\'s scenario file as the safe YAML loader reads it; a new dict (and\n'
        "    new lists) at each call.\n"
        "    Size: one line per scenario key (the table is the course.yaml file).\n"
        '    """\n'
        "    return {\n" + rows + "    }\n"
    )


def write(path: Path = TARGET) -> bool:
    """Write the generated course scenario to `path`; returns whether the file changed."""
    return write_generated(path, source(), HEADER, "course_scenario.py")


def main() -> int:
    return run(TARGET, write)


if __name__ == "__main__":
    raise SystemExit(main())
