"""A non-editable install carries everything the handouts need: the notebooks, the presets, the
course scenario and the template are package data, and nothing is read from the repository."""

import os
import subprocess
import sys
from pathlib import Path

from hang import hang_limit

ROOT = Path(__file__).resolve().parents[2]


def test_installed_package_builds_handouts_from_an_unrelated_folder(tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=hang_limit(60),  # pip builds the package: up to a minute idle
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}  # first on the path: the installed copy
    where = subprocess.run(
        [sys.executable, "-c", "import costmodel; print(costmodel.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        check=True,
    )
    assert where.stdout.strip().startswith(str(target))
    shipped = {p.name for p in (target / "costmodel" / "course" / "notebooks").iterdir()}
    # mapped from notebooks/ at the top of the checkout (setup.py), sources and executed copies
    assert {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*")} <= shipped
    result = subprocess.run(
        [sys.executable, "-m", "costmodel", "handouts", "--out", "out", "--set", "step_time=90"],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=hang_limit(60),  # the whole course, one edition: about a minute idle
    )
    assert result.returncode == 0, result.stderr
    pages = sorted(p.name for p in (elsewhere / "out").glob("*.html"))
    assert len(pages) == len(shipped) // 2 + 1  # a page per notebook, and the index
    assert "wrote 10 of 10" in result.stdout
