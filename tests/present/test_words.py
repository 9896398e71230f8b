"""The pages' Chinese names for what the library names in English (present/words.py) and the
levers' notes in Chinese (present/advice_zh.py): every value the library can hand a page has
its Chinese, so no English reaches a page through them (issue 23, item 8)."""

import csv
import glob
import re
from importlib import resources

import pytest
from page_language import english

from costmodel.derive import numeric
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import gemms, step_time
from costmodel.inputs import hardware, scenario
from costmodel.present import advice, advice_zh, words
from costmodel.present import plan as plan_text

SCENARIOS = [None, *sorted(glob.glob("scenarios/*.yaml"))]


def _english(text: str) -> list[str]:
    """The English words of a Markdown text outside its code spans, by the pages' rule."""
    return english(re.sub(r"`[^`]*`", " ", text))


def test_every_reason_has_a_chinese_note():
    assert set(advice_zh.NOTES) == set(advice.NOTES)


@pytest.mark.parametrize("path", SCENARIOS)
def test_the_levers_notes_are_chinese(path):
    acc = account(scenario.resolve(path))
    for lever in acc["advice"]:
        text = advice_zh.note(lever)
        assert not _english(text), (lever.lever, text)


def test_every_convention_gemm_part_and_gpu_has_its_chinese():
    assert set(words.CONVENTIONS) == set(numeric.CONVENTION_NAMES)
    for key, name in numeric.CONVENTION_NAMES.items():
        assert words.convention(name) == words.convention(key) == words.CONVENTIONS[key]
    assert set(words.STEP_PARTS) == set(step_time.PARTS)
    for gpu in hardware.GPUS.values():
        assert not _english(words.gpu_source(gpu.source)), gpu.source


@pytest.mark.parametrize("path", SCENARIOS)
def test_every_gemm_and_shape_source_has_its_chinese(path):
    sc = scenario.resolve(path)
    for row in gemms.model_gemms(sc, sc.micro_batch):
        assert row["key"] in words.GEMMS, row["key"]
        assert not _english(words.shape_source(row["source"])), row["source"]
        assert row["bound"] in words.BOUND


def test_a_shape_built_from_keys_says_its_assumptions_in_chinese():
    sc = scenario.resolve(None, {"hidden_size": 3072, "attention_dim": 3072})  # no config
    sources = {row["source"] for row in gemms.model_gemms(sc, 1)}
    assert any("assumed: " in s for s in sources), sources
    for source in sources:
        text = words.shape_source(source)
        assert "假设：" in text or "config" in text, text
        assert not _english(text), text


def test_every_row_of_the_flop_counter_has_a_chinese_note():
    path = resources.files("costmodel.course") / "flop_counter.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows
    for r in rows:
        text = words.counter_note(r["model"], r["term"], r["note"])
        assert text != r["note"] and not _english(text), (r["model"], r["term"])


def test_an_unknown_name_stays_as_given():
    """What the module does not know reaches the page as the library wrote it, where the pages'
    test finds it."""
    assert words.gpu_source("Some vendor whitepaper") == "Some vendor whitepaper"
    assert words.shape_source("a new note") == "a new note"
    assert words.counter_note("m", "new_term", "a note") == "a note"


def test_the_plans_findings_are_chinese_on_the_index():
    from costmodel.evaluate.plan import plan

    found = plan.search(scenario.resolve())
    table = plan_text.as_table(found, plan.TOP)
    assert table["findings"] and all(
        f.startswith(("[成立]", "[不成立]")) for f in table["findings"]
    )
    for line in table["findings"] + table["summary"]:
        assert not _english(line), line
    assert {row[0][plan_text.TABLE_COLUMNS.index("限制")] for row in table["rows"]} <= {
        words.LIMITS[k] + tail for k in words.LIMITS for tail in ("", "（显存紧张）")
    }
    # the command line keeps its English statements
    assert all(f["statement"] for f in plan_text.as_json(found, plan.TOP)["findings"])


def test_a_finding_reads_true_under_its_tag():
    """Issue 36 (3): "[不成立] 最快的 10 个布局都没有用流水线并行（PP = 1）" stood above ten PP-1
    layouts: the counts alone, tagged by the rule. Each line now states the rule, then the counts,
    so the tag is about the rule and the counts are what the search found, in both languages."""
    from costmodel.present.plan import finding_words

    none = {"name": "pp_across_nodes", "holds": False, "count": 0, "of": 10, "statement": ""}
    assert finding_words(none, 10, 8, 4096) == "最快的布局用流水线并行（PP > 1）：10 个里有 0 个"
    some = {**none, "name": "tp_within_node", "holds": False, "count": 7}
    assert finding_words(some, 10, 8, 4096).endswith("：10 个里有 7 个")
    every = {**some, "holds": True, "count": 10}
    assert finding_words(every, 10, 8, 4096).endswith("：10 个都是")
    from costmodel.evaluate.plan import plan

    found = plan.search(scenario.resolve())
    for f in plan_text.as_json(found, plan.TOP)["findings"]:
        if f["name"] in ("pp_across_nodes", "cp_at_seq_len", "tp_within_node"):
            assert f["statement"].endswith(f": {f['count']} of {f['of']} do") or (
                f["statement"].endswith(f"all {f['of']} do") and f["count"] == f["of"]
            ), f


#: A row's visible differences from the own layout (evaluate.plan.plan_why.versus, as the JSON's
#: `versus_own` gives them): hand-made, so both lines can be read off.
VERSUS = [
    {"part": "pipeline_bubble", "seconds": -0.924},
    {
        "part": "communication_exposed",
        "seconds": 0.31,
        "collectives": [{"name": "TP all-reduce", "parallelism": "TP", "seconds": 0.28}],
        "parallelisms": [{"parallelism": "TP", "seconds": 0.28}],
    },
    {"part": "kernel_overhead", "seconds": -0.042},
]


def test_why_a_layout_is_faster_in_both_languages():
    """Issue 35 (4): one line of the parts' differences, signed, the collectives in parentheses
    (the command line's names; the Chinese groups them by parallelism), the small ones to 3
    decimals."""
    assert plan_text.why(VERSUS) == (
        "pipeline_bubble -0.92 s, communication_exposed +0.31 s (TP all-reduce +0.28 s), "
        "kernel_overhead -0.042 s"
    )
    assert plan_text.why_words(VERSUS) == (
        "流水线气泡 -0.92 s，暴露在外的通信 +0.31 s（其中 TP +0.28 s），"
        "kernel 启动的固定开销 -0.042 s"
    )
    assert plan_text.why([]) == "no part differs by 1% of the own step"
    # the collectives too small to name, where they sum to a tenth of the part: "the others"
    mixed = [{**VERSUS[1], "seconds": 0.1}]
    assert plan_text.why(mixed) == (
        "communication_exposed +0.10 s (TP all-reduce +0.28 s; the others -0.18 s)"
    )
    assert not _english(plan_text.why_words(VERSUS)) and not _english(plan_text.why_words([]))


@pytest.mark.parametrize(
    "args",
    [
        (None, {}),  # the own layout ranked 5th: compared
        ("scenarios/llama-3.1-8b-packed-64xH100.yaml", {}),  # the own layout the fastest
        (None, {"num_gpus": 8, "samples_per_step": 16}),  # the own does not fit: compared
    ],
)
def test_the_plans_why_column_and_rests_on_are_chinese(args):
    """The index's table: a last column of each layout's parts against the own layout's, the
    parts the ranking rests on in the summary, and why no row is compared where none is; no
    English word in any of it."""
    from costmodel.evaluate.plan import plan

    found = plan.search(scenario.resolve(*args), top=5)
    table = plan_text.as_table(found, 5)
    assert table["columns"][-1] == "比本场景的布局"
    cells = [cells[-1] for cells, _ in table["rows"]]
    for line in cells + table["summary"]:
        assert not _english(line), line
    assert any(line.startswith("排名主要取决于单步模型里的") for line in table["summary"])
    if found.own_rank == 1:
        assert set(cells) == {"-"}
        assert "最后一列不作比较：本场景自己的布局就是预测最快的。" in table["summary"]
    else:
        assert [c == "-" for c in cells] == [own for _, own in table["rows"]]
