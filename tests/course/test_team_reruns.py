"""Issue 23 (5), issue 36 (6): the course re-run for teams' scenarios prints no sentence the team
would call false. Each notebook runs once per scenario in the shared kernel (tests/conftest.py), and only
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
from costmodel.inputs.attention_kernels import KIND
from costmodel.inputs.model_shape import matching_shape
from costmodel.publish import suite

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {
    "team": "scenarios/example-team.yaml",  # Qwen3-30B-A3B, 16K, 64 x H100
    "llama8b": "scenarios/llama-3.1-8b-packed-64xH100.yaml",  # dense, packed
    "llama405b": "scenarios/llama-3.1-405b-512xH100.yaml",  # a published layout
    "deepseek": "scenarios/deepseek-v3-2048xH800.yaml",
    "qwen3next": "scenarios/qwen3-next-80b-256xB200.yaml",  # hybrid: 12 of 48 layers full
    # issue 36: a known dense model whose chunks share one causal mask; the scenarios unlike the
    # shipped ones (a Hugging Face Trainer lab; tests/data: an FP8 MoE with a balanced router, a
    # dense packed run at PP 2 with an fp32 loss)
    "llama70b": "scenarios/llama-3.1-70b-512xH100.yaml",
    "hf": "scenarios/qwen3-8b-hf-deepspeed-8xH100.yaml",
    "fp8moe": "tests/data/fp8-moe-balanced.yaml",
    "packed": "tests/data/dense-packed.yaml",
    # the other shipped scenarios: a packed torchtitan run, the tutorial's (no recompute weights)
    "torchtitan": "scenarios/llama-3.1-8b-torchtitan-64xH200.yaml",
    "tutorial": "scenarios/tutorial-qwen3-8b.yaml",
}
#: The notebooks each scenario runs: those where a pattern can show for it.
RUNS = {
    "team": ("03", "04", "09"),
    "llama8b": ("05", "06", "07", "08", "10"),
    "llama405b": ("04", "05", "10"),
    "deepseek": ("03", "09"),
    "qwen3next": ("03", "05", "07"),
    "llama70b": ("01", "03", "04", "05", "09"),
    "hf": ("08",),
    "fp8moe": ("03", "06", "07", "09"),
    "packed": ("08",),
    "torchtitan": ("10",),
    "tutorial": ("03",),
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
    """Every scenario here runs FlashAttention (a flash attention_kernel): no page tells them to
    adopt it."""
    for name, stem in runs:
        assert KIND[_resolved(name).attention_kernel] == "flash"  # flash, flash2, ...
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


# ------------------------------------------------------------------ issue 36 (6)


def _rows(runs, name, stem, *quoted):
    """The claims rows of a run whose claim quotes any of `quoted`."""
    return [r for r in claim_rows(runs[(name, stem)]) if any(q in r[0] for q in quoted)]


def test_a_figure_of_the_courses_run_is_not_called_off_on_another_run(runs):
    """The course's MFU 5.85%, HFU 7.80% and "68% with the total parameters" are figures of the
    course's run: on Llama-3.1-70B's they are "无从判断", said once with the team's figure and
    (68%) the input that makes it differ, the total over activated parameters; not "有出入: the
    course's figure is about the course's run" (22 of 45 有出入 rows said only that)."""
    for stem in ("01", "03", "09"):
        rows = _rows(runs, "llama70b", stem, "5.85%（课程", "7.80%（课程", "68%（课程")
        rows = [r for r in rows if "槽位里" not in r[0]]  # 09's padding row: the lead's
        assert len(rows) >= (1 if stem == "09" else 2), (stem, rows)
        for _claim, _computed, verdict in rows:
            assert verdict.startswith("无从判断：") and "你的运行按同一算法是" in verdict, verdict
            if "68%" in verdict:
                assert "课程的模型是 11.7×，你的模型是 1.02×" in verdict, verdict


def test_a_claim_true_of_any_run_is_not_called_off(runs):
    """49,152² = 2.42e9 and "全量重算下两者差 33%" hold whichever run reads them; the advice to
    turn recompute off cannot apply to a run without recompute (无从判断, not 有出入)."""
    seq = _rows(runs, "llama70b", "05", "49,152²")
    gap = _rows(runs, "llama70b", "09", "全量重算下两者差")
    off = _rows(runs, "llama70b", "09", "recompute 是自愿的")
    assert seq and seq[0][2].startswith("成立") and "S² 是它的 2.8%" in seq[0][2]
    assert gap and gap[0][2].startswith("成立"), gap
    assert off and off[0][2].startswith("无从判断"), off


def test_05_says_why_a_team_reads_outside_the_courses_ranges(runs):
    """05's range rows on a team out of the course's ranges name the inputs that put it there
    (s̄·L_full·d / N; its MFU against the course's), not "课程说的是它自己的运行"."""
    rows = [r for r in claim_rows(runs[("llama70b", "05")]) if r[2].startswith("有出入")]
    assert rows and not any("自己的运行" in r[2] for r in rows), rows
    share = _rows(runs, "llama70b", "05", "注意力核心占全部运算的")[0][2]
    assert "s̄·L_full·d ÷ N" in share and "8,192 × 655,360" in share, share
    assert all("你的 MFU 是 40.15%" in r[2] for r in _rows(runs, "llama70b", "05", "利用率"))


def test_chunks_of_concatenated_documents_do_not_leak_by_luck(runs):
    """Llama-3.1-70B's samples are S-long chunks of concatenated documents sharing one causal
    mask (the scenario's comment): 04 does not say they "碰巧不会跨样本泄漏"."""
    text = _text(runs, "llama70b", "04")
    assert "碰巧" not in text
    assert text.count("共用一个因果掩码") >= 3  # the section, its claims row, the key points


def test_05_reads_a_known_model_by_its_own_widths(runs):
    """A team whose model has a config (Llama-3.1-70B): 05's section 2 reads it by its own widths
    (80 layers, 8,192 wide), not through the course's three shape guesses."""
    text = _text(runs, "llama70b", "05")
    assert "你的模型：80 层 h8192（80 层全注意力，注意力宽度 8,192）" in text
    assert "在这三组假设下" not in text and "你的输入套用三组形状" not in text
    assert "按你的模型自己的宽度，注意力核心占一步运算的 **7%**" in text


def test_a_balanced_router_is_not_given_the_zipf_illustration(runs):
    """router_skew 0: 06 quotes the team's own skew's straggler, and the Zipf-1 row is an
    illustration, not "在你的场景里，按负载放置也只到 …"."""
    text = _text(runs, "fp8moe", "06")
    assert "在你的场景里，按负载放置" not in text
    row = _rows(runs, "fp8moe", "06", "straggler")[0][2]
    assert "`router_skew` 是 0" in row and "只是示意" in row, row


def test_an_fp8_run_is_told_which_peak_is_dense(runs):
    """An FP8 run on an H100: the sheet's 1,979 TFLOP/s is its dense FP8 peak, not the sparse
    BF16 one the pitfall warns about; 09 says so."""
    text = _text(runs, "fp8moe", "09")
    assert "1,979.0 TFLOP/s 是 H100-SXM 的稠密 FP8 峰值，不是稀疏口径" in text


def test_flop_proportional_figures_are_not_called_predictions(runs):
    """01's recompute table and 09's recompute-off row scale the step by FLOPs
    (acc["projections"]): they say so, and are not labelled the model's prediction."""
    assert "按 FLOPs 等比的单步耗时" in _text(runs, "llama70b", "01")
    assert "投影单步耗时" not in _text(runs, "llama70b", "01")
    for name in ("team", "deepseek"):
        row = _rows(runs, name, "09", "recompute 是自愿的")[0][2]
        assert "预测的一步快" not in row, row


def test_the_logits_follow_the_loss(runs):
    """08 ②: the HF lab's loss keeps the logits in fp32 (cross_entropy null: the framework's):
    24.9 GB a micro batch, not the BF16 logits' 5.0 GB as "本场景的 logits"."""
    text = _text(runs, "hf", "08")
    kept = re.search(
        r"本场景的损失是 `cross_entropy: fp32`：一个 micro batch 算 loss 时留 \*\*([\d.]+ GB)", text
    )
    assert kept and kept.group(1) == "24.9 GB", kept
    assert "本场景一个 micro batch 的 logits 是" not in text


#: Page titles the course wrote for its own run, true only where the run has what they name.
COURSE_ONLY_HEADINGS = re.compile(
    r"^# .*(?<!课程的)六个杠杆|^# .*(?<!课程里 )packing 做成之后", re.M
)


def test_no_course_only_heading_on_a_run_it_does_not_describe(runs):
    """No page of a team's run is titled "六个杠杆" (the course's six; the run's table has its
    own count) or "packing 做成之后，再换 selective recompute" (a run that packs already, or
    does not recompute) unless the title says they are the course's."""
    for (name, stem), nb in runs.items():
        headings = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert not COURSE_ONLY_HEADINGS.findall(headings), (name, stem)


def test_no_machine_path_on_a_page(runs):
    """No run prints a path of this machine (the checkout's, a temporary folder's)."""
    for (name, stem), nb in runs.items():
        text = shown(nb)
        assert str(ROOT) not in text and "/tmp/" not in text, (name, stem)


def test_04s_exercises_ask_for_something_on_a_run_without_pad_slots(runs):
    """Issue 36 (6): on a run whose samples all fill S, 04's two exercises were answered
    "1.00×" and "as many rows as samples". They take the course's lengths there and say so; by
    the student-answer rule (tests/answer_leaks.py) each has an answer to compute."""
    from answer_leaks import answers, run_givens

    for name in ("llama405b", "llama70b"):  # samples of seq_len: no pad slots
        sc = _resolved(name)
        assert sc.mean_tokens_per_sample == sc.seq_len
        found = answers(runs[(name, "04")], "04_", run_givens(sc, account(sc)))
        assert [e.name for e in found if e.answers] == ["04-1", "04-2"], name
        assert "改用课程场景的长度" in _text(runs, name, "04")


#: Exercises whose answer is a formula or a figure the question hands over (tests/course/
#: test_answer_leaks.py::test_every_computed_exercise_has_answers_to_check): nothing to compute by
#: design, on every run.
CONCEPTUAL = {"01-2", "02-1", "05-2"}


def test_every_exercise_has_something_to_compute(runs, course, course_account):
    """Issue 36 (6): no exercise whose answers are all equal ("1.00×, 不变", "哪个 kernel 都做不到"
    on every run): by the student-answer rule (tests/answer_leaks.py) every exercise but the
    conceptual ones has an answer that is neither a given of its run nor 0 or 1, on the course
    (its stored notebooks) and on every run here: the scenarios/*.yaml above and the three unlike
    them. A run where a question has nothing to compute takes a stated variant (the course's
    value of what the run lacks: 03-2's recompute, 04's and 10-3's lengths, 08-1's attention
    share; 05-1 takes 4S where the page shows the share at 2S)."""
    from answer_leaks import answers, course_answers, run_givens

    stored = [
        (p.stem, nbformat.read(p.with_suffix(".ipynb"), as_version=4)) for p in suite.sources()
    ]
    found = {
        ("course", e.name): e
        for page in course_answers(stored, run_givens(course, course_account))
        for e in page
    }
    for (name, stem), nb in runs.items():
        sc = _resolved(name)
        for e in answers(nb, stem + "_", run_givens(sc, account(sc))):
            found[(name, e.name)] = e
    empty = {key for key, e in found.items() if not e.answers and key[1] not in CONCEPTUAL}
    assert not empty, sorted(empty)
    assert {key[1] for key in found} >= {"03-2", "07-2", "08-1", "10-3"}


#: A before and an after as the pages write a lever's change (the notes' PAIRS in
#: tests/evaluate/test_advice_framework.py, and the tables' arrows): the same figure on both sides.
SAME_BEFORE_AND_AFTER = re.compile(
    r"(?<![\d.,])([\d.,]+ ?(?:GB|s|秒|×)) ?→ ?\1(?![\d])"
    r"|留 ([\d.,]+ GB) 的 logits，而不是 \2(?![\d])"
    r"|从 ([\d.,]+ GB)（[^）]*）降到 ?\3(?![\d])"
)


def test_no_lever_row_states_equal_before_and_after(runs):
    """Issue 36 (6): no page of a run offers a lever whose before and after read alike ("留 0.0 GB
    而不是 0.0 GB", "8.5 s → 8.5 s"): a lever that changes nothing is no row. A claims row (it
    quotes the course, "（课程 06.8 ③）") may show a figure unchanged: that is its point ("99.0 GB →
    99.0 GB: the bytes do not follow the micro batch")."""
    assert SAME_BEFORE_AND_AFTER.search("预测一步 8.492 秒 → 8.492 秒")
    assert not SAME_BEFORE_AND_AFTER.search("预测一步 18.492 秒 → 8.492 秒")
    for (name, stem), nb in runs.items():
        lines = [line for line in _text(runs, name, stem).splitlines() if "（课程 " not in line]
        found = [m.group(0) for line in lines for m in SAME_BEFORE_AND_AFTER.finditer(line)]
        assert not found, (name, stem, found)
