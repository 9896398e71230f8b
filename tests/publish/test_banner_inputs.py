"""The inputs every page's banner and the index (the booklet's first part) print (issue 36, 6):
a team's model config by its file name, never the absolute path the build made of it (a folder
of the machine that built the pages); a step the scenario leaves null as the prediction the
pages use, not as an input the team changed."""

import html
import re
import shutil
from pathlib import Path

from costmodel.evaluate.account.account import account as evaluate_account
from costmodel.evaluate.account.account import fill_step_time
from costmodel.inputs import scenario
from costmodel.publish import handouts
from costmodel.publish import index as index_page

ROOT = Path(__file__).resolve().parents[2]


def _built(scenario_file: Path):
    """The banner and the index page as a build makes them for a scenario file."""
    sc = fill_step_time(scenario.resolve(str(scenario_file)))
    account = evaluate_account(sc)
    inputs = handouts.user_layer(str(scenario_file), None)
    banner = index_page.banner(sc, account, inputs, "teacher")
    return sc, banner, html.unescape(index_page.index_html(sc, account, []))


def _row(page: str, key: str) -> tuple[str, str, str]:
    """The index's row of one input: its class, value and note, as text."""
    found = re.search(
        rf'<tr class="(\w*)"><td><code>{key}</code></td><td><code>(.*?)</code></td>'
        r"<td>(.*?)</td></tr>",
        page,
    )
    assert found, key
    return found[1], found[2], found[3]


def test_a_model_config_is_shown_by_its_file_name(tmp_path):
    """A team scenario naming its config by a path relative to the file: the build makes it
    absolute (the notebooks run in another folder), and the banner and the index used to print
    that absolute path (`model=/…/configs/llama-3.1-70b.json`)."""
    folder = tmp_path / "team" / "configs"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "scenarios" / "configs" / "llama-3.1-70b.json", folder)
    team = tmp_path / "team" / "run.yaml"  # the example: model: configs/llama-3.1-70b.json
    shutil.copy(ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml", team)
    sc, banner, page = _built(team)
    assert Path(sc.values["model"]).is_absolute()  # what the notebooks get
    assert "model=llama-3.1-70b.json" in banner, banner
    assert _row(page, "model") == ("changed", "llama-3.1-70b.json", "已改动")
    for text in (banner, page):
        assert str(tmp_path) not in text and "/configs/" not in text


def test_a_preset_model_is_shown_as_named():
    sc = scenario.resolve(overrides={"model": "qwen3-8b", "step_time": None})
    assert index_page.shown_value("model", sc.values["model"]) == "qwen3-8b"


def test_a_null_step_is_shown_as_the_prediction_not_as_a_changed_input():
    """A lab that states no step (step_time null): the pages use the step-time model's
    prediction, which the index listed as an input the team changed ("step_time 9.604 已改动")."""
    team = ROOT / "scenarios" / "qwen3-8b-hf-deepspeed-8xH100.yaml"
    sc, banner, page = _built(team)
    assert sc.step_time_from == "predicted" and sc.step_time > 0
    predicted = f"{sc.step_time:.1f} s"
    cls, value, note = _row(page, "step_time")
    assert (cls, value) == ("", "null") and "已改动" not in note
    assert note == f"未实测：各页用模型预测的单步耗时 {predicted}"
    assert f"step_time={sc.step_time:.4g}" not in banner and "step_time=—" in banner
    assert "（单步耗时为预测值）" in banner
    # a measured step the team changed is still marked changed
    measured = scenario.resolve(str(ROOT / "scenarios" / "llama-3.1-70b-512xH100.yaml"))
    page = html.unescape(index_page.index_html(measured, evaluate_account(measured), []))
    assert _row(page, "step_time") == ("changed", "8.6", "已改动")
