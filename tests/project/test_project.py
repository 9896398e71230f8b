"""The project's own promises: pinned dependencies, one list of packages, a true README."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _pins(lines):
    pins = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line.strip())
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_pyproject_pins_are_exact_and_locked():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins(project["dependencies"])
    assert len(pins) == len(project["dependencies"]), "every dependency pinned with =="
    lock = _pins((ROOT / "requirements.lock").read_text().splitlines())
    for name, version in pins.items():
        assert lock.get(name) == version, f"{name} {version} not in requirements.lock"


def test_environment_yml_names_the_same_packages():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert _pins(pip_section) == _pins(project["dependencies"])
    assert "python=3.11" in env["dependencies"]


def test_readme_names_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make handouts" in readme and "make test" in readme
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^handouts:", makefile, re.M) and re.search(r"^test:", makefile, re.M)


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_no_benchmark_module_shadows_a_test_helper():
    """benchmarks/ and the tests' helper folders are both on the import path of a test run: a
    benchmarks/headlines.py made `from headlines import section_headlines` (tests/headlines.py)
    fail in whichever pytest worker had imported the other first."""
    helpers = {p.stem for folder in ("tests", "tests/course") for p in (ROOT / folder).glob("*.py")}
    benchmarks = {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
    assert not helpers & benchmarks, helpers & benchmarks
