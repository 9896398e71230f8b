"""Helpers for the notebooks: computed prose, tables and equations.

Every helper emits a rich form (Markdown, HTML, LaTeX) *and* a text/plain mirror holding the
same numbers, because nbval compares text/plain, text/html and text/latex but not
text/markdown: the numbers a reader sees are then the numbers the tests check.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import sympy as sp
from IPython.display import display

from costmodel import course
from costmodel.evaluate.account.account import account, fill_step_time
from costmodel.formats import (  # noqa: F401 (the notebooks' formats, through display)
    count,
    csv_cell,
    gb,
    markdown_text,
    math_delimiter,
    num,
    pct,
    printable,
    sci,
    tex_num,
    tex_sci,
    tflops,
    times,
)
from costmodel.inputs import scenario
from costmodel.present import words
from costmodel.present.claims import course_run  # noqa: F401 (the notebooks' verdict on it)


def load(scenario_file: str | None = None, overrides: dict[str, Any] | None = None):
    """The scenario in force and its account (the parameters cell of every notebook).

    `scenario_file` is a path as written in the parameters cell: absolute, or relative to the
    notebook's folder (where papermill and the handouts run it), or, when no such file is there
    (a scratch copy opened by `make lab`), relative to the repository's root."""
    if scenario_file is not None and not Path(scenario_file).is_absolute():
        # the folder around the package: the repository, in a source checkout
        here, root = Path(scenario_file), Path(__file__).resolve().parents[2] / scenario_file
        if not here.exists() and root.exists():
            scenario_file = str(root)
    # the scenario with its step: measured, or the step-time model's prediction (the notebooks
    # read sc.step_time)
    sc = fill_step_time(scenario.resolve(scenario_file, overrides or None))
    return sc, account(sc)


# ------------------------------------------------------------------ scenario text

#: MathJax does not search elements of these classes: mathjax_ignore is the default of
#: MathJax 3.2 and later (the handouts' bundle), tex2jax_ignore that of earlier releases.
_NO_MATH = '<span class="tex2jax_ignore mathjax_ignore">{}</span>'

#: Text from a scenario (its name, a path) in computed Markdown: `d.text(sc.name)`, or
#: `d.text(path, code=True)` for a code span (costmodel.formats.markdown_text: it reads as
#: written and adds no markup, link or math).
text = markdown_text


def _cell(value: str) -> str:
    """A table cell: HTML-escaped, and kept away from MathJax if it holds a math delimiter."""
    escaped = html.escape(value)
    return _NO_MATH.format(escaped) if math_delimiter(value) else escaped


#: The memory model's phases (evaluate.simulate.run.memory's `phases`), as the notebooks name them.
PHASES = words.PHASES


# ------------------------------------------------------------------ display


def md(text: str) -> None:
    """Markdown computed in a code cell (prose that quotes scenario numbers)."""
    display({"text/markdown": text, "text/plain": text}, raw=True)


def table(rows: Iterable[Sequence[Any]], headers: Sequence[str], caption: str = "") -> None:
    """An HTML table with a plain-text mirror (control characters shown escaped)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    headers, caption = [printable(h) for h in headers], printable(caption)
    head = "".join(f"<th>{_cell(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_cell(c)}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{_cell(caption)}</caption>" if caption else ""
    markup = f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    lines = [caption] if caption else []
    for row in [list(headers), *rows]:
        lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    display({"text/html": markup, "text/plain": "\n".join(lines)}, raw=True)


#: The headers of the table that ends each notebook's main section: what the course says,
#: what this page computed, and whether they agree.
CLAIMS_HEADERS = ("课程怎么说", "本页算出", "出入")


def verdict(holds: bool | None, why: str = "") -> str:
    """The third column of a claims table: '成立', '有出入', or '无从判断' (None: the scenario
    lacks what the claim needs, e.g. a measured throughput), and why."""
    word = "无从判断" if holds is None else "成立" if holds else "有出入"
    return word + (f"：{why}" if why else "")


def _spaced(text: str) -> str:
    """Text followed by Chinese: a space after a final Latin letter or digit ("15 GB 说"), none
    after a Chinese character ("70 秒说")."""
    return text + " " if text[-1:].isascii() else text


def judge(
    key: str,
    value: float,
    shown: str,
    differs: str,
    note: str = "",
    *,
    own: bool,
    quiet: bool = False,
) -> str:
    """The verdict on the course's figure `key` (course.agrees): 成立 when `value` (written
    `shown`) is the course's figure at its precision, else 有出入 and why (`differs`). `own`: the
    scenario is a team's, so a figure that differs is the course's run against the team's, not
    a mistake. `quiet`: the figure does not apply to this scenario (no padding to waste): the
    value is not quoted, `differs` says why. `note` is added to either."""
    text, holds = course.figures()[key]["text"], course.agrees(value, key)
    who = "你的场景" if own else "本场景"
    if holds:
        why = (
            f"你的场景算出 {shown}，按课程的精度与课程对它那次训练给出的 {text} 相同"
            if own
            else f"本页算出 {shown}，按课程的精度就是 {text}"
        )
    elif quiet:
        why = f"课程的 {_spaced(text)}说的是课程那次训练；{who}里{differs}"
    else:
        why = (
            f"课程的 {_spaced(text)}说的是课程那次训练；你的场景是 {shown}：{differs}"
            if own
            else f"本页算出 {shown}：{differs}"
        )
    return verdict(holds, why + note)


def claims(rows: Iterable[Sequence[Any]], sc: Any = None) -> None:
    """The course's claims on this page's topic beside the computed values, with a verdict.
    Each row: (the claim, quoting costmodel.course.claim for its figure; the value computed for
    the scenario; verdict(...)). For a scenario that is not the course's, the caption says the
    middle column is the team's figure."""
    own = sc is not None and bool(sc.changed)
    caption = "课程怎么说 / 本页算出 / 出入" + (
        "（本页按你的场景计算：中间一列是你的数字，与课程的说法对照）" if own else ""
    )
    table(rows, CLAIMS_HEADERS, caption)


def _tex(part: Any) -> str:
    if not isinstance(part, str):
        return sp.latex(part)
    return re.sub(r"(?<!\\)%", r"\\%", part)  # % starts a TeX comment


def eq(lhs: Any, rhs: Any, *more: Any) -> None:
    """Display lhs = rhs (= more ...) as LaTeX (MathJax). SymPy expressions are typeset by
    SymPy; strings are LaTeX (a bare % is escaped)."""
    parts = [_tex(p) for p in (lhs, rhs, *more)]
    plain = " = ".join(p if isinstance(p, str) else sp.sstr(p) for p in (lhs, rhs, *more))
    display({"text/latex": "$$" + " = ".join(parts) + "$$", "text/plain": plain}, raw=True)


def setup_plots() -> None:
    """One plot style for the suite: English labels, print-friendly sizes."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.figsize": (7.5, 4.2),
            "figure.dpi": 100,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "font.size": 10,
            "savefig.bbox": "tight",
        }
    )
