"""The course's scenario, generated from its YAML file (costmodel/inputs/course_scenario.py):
current, the file's values with their types, a new mapping at each call."""

from pathlib import Path

from generated import check_written_only_over_its_own_file

from costmodel.generate import course as generate
from costmodel.inputs import course_scenario, scenario, scenario_yaml


def test_generated_course_scenario_is_current():
    """Regenerating it from course.yaml gives the committed file, byte for byte (else: make
    numeric)."""
    written = Path(course_scenario.__file__).read_bytes()
    assert generate.source().encode("utf-8") == written, (
        "costmodel/inputs/course_scenario.py is stale: run `make numeric`"
    )


def test_the_values_are_the_files_with_their_types():
    """Every key, in the file's order, with the type the YAML loader gives (3.0e+9 a float, 80
    an int, null None); the course resolves from them."""
    from_file = scenario_yaml.course_file_values()
    generated = course_scenario.values()
    assert list(generated) == list(from_file)
    assert [(type(v), v) for v in generated.values()] == [(type(v), v) for v in from_file.values()]
    assert generated["activated_params"] == 3e9 and isinstance(generated["activated_params"], float)
    assert generated["seq_len"] == 49152 and generated["gpu"] == "H20"
    assert scenario.resolve().name == generated["name"]


def test_each_call_gets_its_own_values():
    """A caller that changes its mapping (or a list in it) leaves the next caller's intact."""
    first = scenario.course_values()
    lists = [key for key, value in first.items() if isinstance(value, list)]
    first["seq_len"] = 1
    for key in lists:
        first[key].append("x")
    second = scenario.course_values()
    assert second["seq_len"] == 49152
    assert all("x" not in second[key] for key in lists)


def test_the_course_scenario_is_written_only_over_its_own_file(tmp_path):
    check_written_only_over_its_own_file(
        generate.write,
        tmp_path / "course_scenario.py",
        generate.source(),
    )
