"""Issue 23 (5): the course re-run for five teams' scenarios prints no sentence the team would call
false. Each notebook runs once per scenario in the shared kernel (tests/conftest.py), and only
where a pattern below can occur (about fifteen runs, not fifty: the suite stays fast); each test
checks one pattern, by a regex or against a number the library computes for the scenario."""

import html
import re
from pathlib import Path

import nbformat
import pytest
from notebook_text import claim_rows, shown, tables

from costmodel.evaluate.account.account import account
from costmodel.evaluate.account.claims import throughput_rounding
from costmodel.inputs import scenario
from costmodel.inputs.model_shape import matching_shape
from costmodel.publish import suite

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {
    "team": "scenarios/example-team.yaml",  # Qwen3-30B-A3B, 16K, 64 x H100
    "llama8b": "scenarios/llama-3.1-8b-packed-64xH100.yaml",  # dense, packed
    "llama405b": "scenarios/llama-3.1-405b-512xH100.yaml",  # a published layout
    "deepseek": "scenarios/deepseek-v3-2048xH800.yaml",
    "qwen3next": "scenarios/qwen3-next-80b-256xB200.yaml",  # hybrid: 12 of 48 layers full
}
#: The notebooks each scenario runs: those where a pattern can show for it.
RUNS = {
    "team": ("03", "04", "09"),
    "llama8b": ("05", "06", "07", "08", "10"),
    "llama405b": ("04", "05", "10"),
    "deepseek": ("03", "09"),
    "qwen3next": ("03", "05"),
}


@pytest.fixture(scope="module")
def runs(notebook_kernel):
    """{(scenario, "NN"): executed notebook}, each run once."""
    from costmodel.publish import runner

    sources = {p.name[:2]: p for p in suite.sources()}
    done = {}
    for name, stems in RUNS.items():
        for stem in stems:
            nb = nbformat.read(sources[stem].with_suffix(".ipynb"), as_version=4)
            runner.inject_parameters(nb, {"scenario_file": str(ROOT / SCENARIOS[name])})
            notebook_kernel.execute(nb)
            done[(name, stem)] = nb
    return done


def _text(runs, name, stem) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "\n", shown(runs[(name, stem)])))


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"[。\n|]", text) if s.strip()]


def _resolved(name):
    return scenario.resolve(ROOT / SCENARIOS[name])


def _lever_names() -> dict[str, str]:
    """09's Chinese lever names, read from its source: {name: lever key}."""
    import ast

    source = (suite.NOTEBOOKS / "09_pitfalls.py").read_text(encoding="utf-8")
    names = ast.literal_eval(re.search(r"LEVER_NAMES = (\{.*?\})", source, re.S).group(1))
    return {zh: key for key, zh in names.items()}


def test_the_first_lever_named_is_feasible(runs):
    """09's key points name the largest lever "先量、先修它": one the scenario can take (feasible
    in the account's advice), never "关闭重算" where the memory model says it does not fit."""
    names = _lever_names()
    for name in ("team", "deepseek"):
        text = _text(runs, name, "09")
        named = re.findall(r"本场景最大的杠杆是“([^”]+)”，先量、先修它", text)
        feasible = {a["lever"] for a in account(_resolved(name))["advice"] if a["feasible"]}
        assert named, name
        assert all(names.get(n, n) in feasible for n in named), (name, named, feasible)


def test_flash_attention_is_not_advised_to_a_run_on_flash(runs):
    """All five scenarios run FlashAttention (attention_kernel: flash): no page tells them to
    adopt it."""
    for name, stem in runs:
        assert _resolved(name).attention_kernel == "flash"
        text = _text(runs, name, stem)
        found = re.findall(r"[^。]*要靠(?:FlashAttention|融合的注意力 kernel)[^。]*", text)
        assert not found, (name, stem, found[:2])


def test_05_shows_the_teams_model_structure(runs):
    """05's structure section and key points show the scenario's model (its config), not the
    course's Qwen3.6-35B-A3B, and its L_full x d is the model's: 12 x 4,096 for Qwen3-Next
    (12 full-attention layers), not the course's 10 x 4,096."""
    for name in ("llama8b", "llama405b", "qwen3next"):
        text = _text(runs, name, "05")
        assert "Qwen3.6" not in text, name
        shape = matching_shape(_resolved(name).values)
        product = f"真实结构是 {shape.num_full_attention_layers} × {shape.attention_dim:,}"
        assert product in text, (name, product, re.findall(r"真实结构是 [^，]*", text))


def _utilisation_over_100_uncommented(rows):
    """Claims rows whose computed column shows a utilization above 100% (a percentage not
    introduced as a ratio, "是 … 的 200.0%") with no word on it."""
    bad = []
    for claim, computed, verdict in rows:
        values = [
            float(v.replace(",", ""))
            for v in re.findall(r"(?<!的 )(?<![\d.,])([\d,]+(?:\.\d+)?)%", computed)
        ]
        if any(v > 100 for v in values) and not re.search(r"超过 100%|不可能", computed + verdict):
            bad.append((claim[:40], computed))
    return bad


def test_a_utilisation_over_100_percent_is_explained(runs):
    """A claims row that shows a utilization above 100% says what it means (an impossible
    reading: the total parameters put into 6ND, or padding a packed run cannot have)."""
    for name, stem in (
        ("team", "03"),
        ("deepseek", "03"),
        ("qwen3next", "03"),
        ("qwen3next", "05"),
    ):
        bad = _utilisation_over_100_uncommented(claim_rows(runs[(name, stem)]))
        assert not bad, (name, stem, bad)


def test_synthetic_lengths_are_called_synthetic(runs):
    """04's "x% of the samples reach S" on a scenario without a lengths file is about synthetic
    lengths: it says so and names the assumption (packing.DEFAULT_SHAPE)."""
    text = _text(runs, "team", "04")
    capped = re.findall(r"另有 [\d.]+% 的[^。]*顶到了[^。]*", text)
    assert capped and all("合成" in s and "DEFAULT_SHAPE" in s for s in capped), capped


def test_the_attention_core_is_bandwidth_bound_only_without_flash(runs):
    """A sentence that calls the attention core (QKᵀ, A·V) bandwidth-bound says that this holds
    only with the scores written to memory: every scenario here runs flash, which keeps them on
    chip."""
    bound = re.compile(r"受带宽限制(?!的逐元素)|拐点左侧|memory-bound")  # not the part's name
    core = re.compile(r"QKᵀ|A·V|注意力核")
    for stem in ("06", "07", "08", "10"):
        for sentence in _sentences(_text(runs, "llama8b", stem)):
            if bound.search(sentence) and core.search(sentence) and "课程" not in sentence:
                assert "flash" in sentence or "写回显存" in sentence, (stem, sentence)


def test_a_packed_run_shows_packed_figures(runs):
    """A packed run pads nothing: its index card is the per-document lengths' share (no
    padded-length card), and 05's claims rows read the run at the real lengths only."""
    from costmodel.publish.index import _cards

    for name in ("llama8b", "qwen3next"):
        acc = account(_resolved(name))
        cards = _cards(acc)
        assert "padded length" not in cards, name
        assert f"{100 * acc['attention']['actual']['share']:.1f}%" in cards, name
        rows = [r for r in claim_rows(runs[(name, "05")]) if "你的场景：" in r[1]]
        assert rows and not any("补齐长度" in r[1] for r in rows), (name, rows)


#: Tables whose equal rows are the point: formulas, or bounds the next cell compares.
EQUAL_ROWS_ALLOWED = ("FlashAttention 反向的矩阵乘", "Exercise 2: ", "练习 2：")


def test_no_table_of_identical_rows(runs):
    """A table whose rows all show the same values (12.0 s / 12.0 s / 12.0 s) is one sentence:
    the HTML tables of code cells and the Markdown tables of the lectures' Markdown cells."""
    checked = 0
    for (name, stem), nb in runs.items():
        for caption, rows in tables(nb):
            if len(rows) < 3 or caption.startswith(EQUAL_ROWS_ALLOWED):
                continue
            checked += 1
            assert len({tuple(r[1:]) for r in rows}) > 1, (name, stem, caption, rows[0])
    assert checked > 10, checked  # the rule reads tables of both kinds


def test_inputs_within_their_rounding_are_not_called_inconsistent(runs):
    """03 calls a team's inputs "不自洽" only where D / T and the measured tokens/s differ by
    more than the inputs' own rounding explains (evaluate.account.claims.throughput_rounding): the
    example team's +1.14% is within the ±5% of its 7.5 s and 12,000 tokens."""
    for name in ("team", "deepseek", "qwen3next"):
        sc = _resolved(name)
        acc = account(sc)
        text = _text(runs, name, "03")
        if acc["measured_tokens_per_s"] is None:
            continue
        gap = abs(acc["tokens_per_s"] / acc["measured_tokens_per_s"] - 1)
        inconsistent = re.findall(r"[^。；]*(?<!不能说)这组输入不自洽[^。]*", text)
        if gap <= sum(throughput_rounding(sc).values()):
            assert not inconsistent, (name, gap, inconsistent)
