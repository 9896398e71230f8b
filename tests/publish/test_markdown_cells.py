"""Markdown cells filled at execution (costmodel/present/prose.py in the kernel,
costmodel/publish/markdown_cells.py around nbclient): the rendering, its escaping and its
errors, a notebook executed by the suite and by the runner's kernel, and what the tests' readers
of a page (tests/notebook_text.py, tests/answer_leaks.py) and the student edition see."""

from __future__ import annotations

import answer_leaks
import jupytext
import nbformat
import pytest
from notebook_text import python_notebook, shown

from costmodel.present.prose import ProseError, render
from costmodel.publish import markdown_cells, pages, runner, suite

# ------------------------------------------------------------------ rendering


def test_filters_write_numbers_through_formats():
    namespace = {"acc": {"mfu": 0.058512}, "d": 2310000, "t": 120.0}
    text = render("MFU {{ acc.mfu|pct }}，{{ acc.mfu|pct(1) }}；D = {{ d|num }}；", namespace)
    assert text == "MFU 5.85%，5.9%；D = 2,310,000；"
    assert render("T = {{ t|num(1) }} s, $D = {{ d|tex_sci }}$", namespace) == (
        r"T = 120.0 s, $D = 2.31 \times 10^{6}$"
    )


def test_a_conditional_picks_its_wording():
    template = "本场景{% if recompute == 'none' %}不做重算{% else %}重算系数 {{ f|decimals(4) }}{% endif %}。"
    assert render(template, {"recompute": "none", "f": 1.0}) == "本场景不做重算。"
    assert render(template, {"recompute": "full", "f": 4 / 3}) == "本场景重算系数 1.3333。"


def test_scenario_text_is_escaped_by_default():
    plain = render("场景：**{{ name }}**", {"name": "<b>x</b> *y* [z](http://e.com)"})
    assert plain == ("场景：**&lt;b&gt;x&lt;/b&gt; &#42;y&#42; &#91;z&#93;(http&#58;//e&#46;com)**")
    # a math delimiter: the text as a code span (literal for Markdown, HTML and MathJax)
    assert render("{{ name }}", {"name": "<b>$a$"}) == "`<b>$a$`"
    assert render("{{ p|code }}", {"p": "a`b"}) == "``a`b``"
    assert render("{{ m|safe }}", {"m": "**bold**"}) == "**bold**"


def test_a_float_needs_a_format_and_a_missing_name_is_an_error_with_its_line():
    with pytest.raises(ProseError, match=r"float 0\.0585 needs a format"):
        render("MFU {{ mfu }}", {"mfu": 0.0585})
    with pytest.raises(ProseError, match=r"line 2: .*'hfu' is undefined"):
        render("MFU {{ mfu|pct }}\nHFU {{ hfu|pct }}", {"mfu": 0.0585})
    with pytest.raises(ProseError, match=r"line 1: TemplateSyntaxError"):
        render("{% if x %}no end", {"x": 1})


# ------------------------------------------------------------------ execution


def _notebook(*cells):
    return python_notebook(
        nbformat.v4.new_code_cell(c) if kind == "code" else nbformat.v4.new_markdown_cell(c)
        for kind, c in cells
    )


TEMPLATE = "MFU 是 **{{ mfu|pct }}**{% if mfu > 0.5 %}，很高{% endif %}；场景 {{ name }}。"


def _course_like(mfu: float):
    nb = _notebook(
        ("code", f"mfu = {mfu!r}\nname = 'a_b *c*'"),
        ("markdown", "# 标题\n\n没有占位符的段落。"),
        ("markdown", TEMPLATE),
        ("code", "print(round(mfu, 3))"),
        ("markdown", "解答：{{ (mfu * 2)|pct }}"),
    )
    nb.cells[4].metadata["tags"] = ["solution"]
    return nb


@pytest.fixture(scope="module")
def executed():
    suite.inline_figures()
    return suite.execute(_course_like(0.0585), cwd=suite.NOTEBOOKS)


def test_execution_fills_the_cell_and_keeps_the_template(executed):
    cell = executed.cells[2]
    assert cell.source == "MFU 是 **5.85%**；场景 a_b &#42;c&#42;。"
    assert cell.metadata[markdown_cells.TEMPLATE] == TEMPLATE
    assert markdown_cells.TEMPLATE not in executed.cells[1].metadata  # plain Markdown untouched
    code = [c.execution_count for c in executed.cells if c.cell_type == "code"]
    assert code == [1, 2]  # filling counts no execution


def test_the_source_keeps_the_template(executed):
    restored = markdown_cells.restore(nbformat.from_dict(executed))
    assert restored.cells[2].source == TEMPLATE
    assert markdown_cells.TEMPLATE not in restored.cells[2].metadata
    py = jupytext.writes(restored, fmt="py:percent")
    assert "{{ mfu|pct }}" in py and "5.85%" not in py


def test_a_stored_notebook_runs_again_for_other_values(executed, notebook_kernel):
    """The runner's kernel (handouts, tests) fills the kept template with the new values."""
    nb = nbformat.from_dict(executed)
    nb.cells[0].source = "mfu = 0.61\nname = 'x'"
    notebook_kernel.execute(nb)
    assert nb.cells[2].source == "MFU 是 **61.00%**，很高；场景 x。"
    assert nb.cells[2].metadata[markdown_cells.TEMPLATE] == TEMPLATE


def test_a_missing_name_stops_the_run_naming_the_cell(tmp_path, notebook_kernel):
    nb = _course_like(0.0585)
    nb.cells[2].source = "HFU {{ hfu|pct }}"
    nbformat.write(nb, tmp_path / "99_broken.ipynb")  # run with a parameters cell first
    ran, error = runner.run_notebook("99_broken", {}, notebook_kernel, tmp_path)
    assert ran is None
    assert error == (
        "99_broken: ProseError: Markdown cell 4 ('HFU {{ hfu|pct }}'): "
        "line 1: UndefinedError: 'hfu' is undefined"
    )


def test_the_readers_of_a_page_see_the_filled_text(executed):
    assert "MFU 是 **5.85%**" in shown(executed)
    assert "{{" not in shown(executed)
    student = answer_leaks.student_text(executed)
    assert "MFU 是 **5.85%**" in student and "11.70%" not in student  # the solution is dropped
    (exercise,) = answer_leaks.answers(_with_exercise(executed))
    assert "11.70%" in exercise.answers


def _with_exercise(nb):
    nb = nbformat.from_dict(nb)
    nb.cells[1].metadata["tags"] = ["exercise"]
    nb.cells[1].source = "### 练习 1：翻倍"
    return nb


def test_the_student_edition_drops_a_filled_solution(executed, tmp_path):
    for edition in ("teacher", "student"):
        target = tmp_path / f"{edition}.html"
        pages.export_html(nbformat.from_dict(executed), target, True, "", edition)
        page = target.read_text(encoding="utf-8")
        assert "5.85%" in page
        assert ("11.70%" in page) == (edition == "teacher")


def test_make_lab_fills_the_prose_again_with_the_readers_numbers(executed, notebook_kernel):
    """The lab's copy turns a filled cell into a collapsed code cell showing the stored text, that
    fills the template again when the reader runs it."""
    nb = nbformat.from_dict(executed)
    nb.cells[2] = markdown_cells.live(nb.cells[2])
    assert nb.cells[2].outputs[0]["data"]["text/markdown"] == executed.cells[2].source
    assert "remove-input" in nb.cells[2].metadata["tags"]
    nb.cells[0].source = "mfu = 0.61\nname = 'x'"
    notebook_kernel.execute(nb)
    assert nb.cells[2].outputs[0]["data"]["text/markdown"] == "MFU 是 **61.00%**，很高；场景 x。"
