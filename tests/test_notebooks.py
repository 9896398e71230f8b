"""The notebook suite: sources and executed notebooks agree, every cell ran in order, the
notebooks re-run for another scenario, and nbval really compares their outputs.

nbval itself (strict: every output compared) runs over notebooks/ as part of `make test`.
"""

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jupytext
import nbformat
import pytest
from headlines import section_headlines

from costmodel.evaluate.account import account
from costmodel.present import suite

ROOT = Path(__file__).resolve().parents[1]
SOURCES = suite.sources()
IDS = [p.stem for p in SOURCES]


def test_there_are_ten_notebooks():
    assert len(SOURCES) == 10, [p.name for p in SOURCES]


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_source_and_notebook_agree(source):
    nb_path = source.with_suffix(".ipynb")
    assert nb_path.exists(), f"{nb_path.name} missing: run make notebooks"
    regenerated = jupytext.writes(jupytext.read(nb_path), fmt="py:percent")
    assert regenerated == source.read_text(encoding="utf-8"), (
        f"{source.name} and {nb_path.name} disagree: run make notebooks"
    )


@pytest.mark.parametrize("source", SOURCES, ids=IDS)
def test_every_code_cell_executed_in_order(source):
    nb = nbformat.read(source.with_suffix(".ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert code[0].metadata.get("tags") == ["parameters"], "first code cell: parameters"
    for cell in code:
        for output in cell.outputs:
            assert output.output_type != "error", cell.source
            assert output.get("name") != "stderr", f"stderr in {source.name}: {output}"


TEAM = {
    "name": "Test team: dense 13B, 16K context, 128 x H100",
    "activated_params": 12.0e9,
    "total_params": 13.0e9,
    "num_experts": 0,
    "experts_per_token": 0,
    "hidden_size": 5120,
    "num_layers": 40,
    "full_attention_every": 1,
    "num_heads": 40,
    "head_dim": 128,
    "seq_len": 16384,
    "mean_tokens_per_sample": 9000,
    "samples_per_step": 512,
    "step_time": 31.0,
    "num_gpus": 128,
    "gpu": "H100-SXM",
    "recompute": "selective",
    "measured_tokens_per_s": None,
    "vocab_size": 152064,
    "micro_batch": 2,
}


def _papermill(source: Path, out_dir: Path, scenario_file: Path) -> Path:
    import papermill

    out = out_dir / source.with_suffix(".ipynb").name
    papermill.execute_notebook(
        str(source.with_suffix(".ipynb")),
        str(out),
        parameters={"scenario_file": str(scenario_file)},
        cwd=str(source.parent),
        progress_bar=False,
        kernel_name="python3",
    )
    return out


def test_notebooks_rerun_for_another_scenario(tmp_path):
    """Every notebook runs for a different model and cluster, without error or warning, and
    its body (after the scenario line) shows the number it computes for that scenario, its
    headline (tests/headlines.py), and not the course's MFU or HFU: nothing is hard-coded."""
    import yaml

    from costmodel.inputs import scenario
    from costmodel.present import display as d

    scenario_file = tmp_path / "team.yaml"
    scenario_file.write_text(yaml.safe_dump(TEAM))
    team = account(scenario.resolve(scenario_file))
    course = account(scenario.resolve())
    team_headlines, course_headlines = section_headlines(team), section_headlines(course)
    if team["tokens_per_expert"] is None:  # dense: 06 shows the dense FFN GEMM's rows, b x S
        team_headlines["06"] = d.num(TEAM["micro_batch"] * TEAM["seq_len"])
    course_only = [
        d.pct(course[key]) for key in ("mfu", "hfu") if d.pct(course[key]) != d.pct(team[key])
    ]
    assert len(course_only) == 2, "the team scenario must differ from the course in MFU and HFU"
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        outs = list(pool.map(lambda s: _papermill(s, tmp_path, scenario_file), SOURCES))
    for out in outs:
        nb = nbformat.read(out, as_version=4)
        outputs = [c["outputs"] for c in nb.cells if c.get("outputs")]
        text = json.dumps(outputs, ensure_ascii=False)
        assert '"stderr"' not in text, f"{out.name}: warning or stderr output"
        body = json.dumps(outputs[1:], ensure_ascii=False)  # outputs[0]: the scenario line
        headline = team_headlines[out.name[:2]]
        assert headline != course_headlines[out.name[:2]], f"{out.name}: pick another team"
        assert headline in body, f"{out.name}: the team's {headline} is not in the body"
        for figure in course_only:
            assert figure not in body, f"{out.name} still shows the course's {figure}"


def test_nbval_fails_when_the_library_changes(tmp_path):
    """Mutation check: change one figure in the library (H20 peak 148 -> 150 TFLOP/s) in a copy
    of the package; nbval on the stored notebook must then fail."""
    mutated = tmp_path / "costmodel"
    shutil.copytree(ROOT / "costmodel", mutated)
    hardware = mutated / "inputs" / "hardware.py"
    text = hardware.read_text()
    assert 'GPU("H20", 148 * _T' in text
    hardware.write_text(text.replace('GPU("H20", 148 * _T', 'GPU("H20", 150 * _T'))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    notebook = ROOT / "costmodel" / "course" / "notebooks" / "03_course_numbers.ipynb"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--nbval",
        "--nbval-current-env",
        str(notebook),
        "-o",
        "testpaths=",
        "-o",
        "addopts=",
    ]
    mutated_run = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert mutated_run.returncode == 1, mutated_run.stdout[-2000:]
    assert "failed" in mutated_run.stdout
    clean_run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert clean_run.returncode == 0, clean_run.stdout[-2000:]
