"""Does the student edition give an exercise's answer away? Shared by the tests that read the
stored notebooks (tests/course/test_answer_leaks.py) and a student build's pages and booklet
(tests/publish/test_student_leaks.py).

The rule:

- A *figure* is a number as a reader sees it, with its sign (% or ×; an ASCII x after a number,
  as code prints it, is ×): with a decimal point, or of three digits or more (`5.85%`, `409.6`,
  `2,310,000`, `3.50e10`). Smaller integers (`2`, `4`, `16`) and the values 0 and 1 ("1.00×":
  nothing changes) are not figures. A fraction of small integers ("1/6") counts as its decimals
  (0.17, 0.167, 0.1667). A figure quoted from the course, "1.70×（课程 06.4）", is the course's.
- An exercise (a cell tagged `exercise`) is answered by the cells tagged `solution` after it, up
  to the next exercise or the next heading above the exercise's own (page 10's "## 本节要点").
  Those cells show *results* (what their code prints, their tables and equations, and the bold
  figures of their prose: the notebooks bold an answer) and *prose* (the rest of their Markdown,
  written or computed). The exercise's *answers* are these figures less its *givens*:
  1. the figures of its prompt: the exercise cell and the cells the student edition keeps between
     it and its first solution cell ("下面给出本场景的 x"), also rounded (1.15× for 1.150×);
  2. the figures the solution's code types in itself (`stretch = 1.10`, "超过 100%"), at any
     number of decimals: the question's constants, not results;
  3. the run as it stands, formatted in each way the notebooks format a number: the scenario's
     values (every page's banner gives them), and the figures of its account and its GEMM list,
     what-ifs left out (`WHAT_IF`), that the student edition has shown before the exercise. An
     exercise that changes the run starts from them and its solution quotes them;
  4. figures of the solution's prose (not bold) that the student edition shows before the
     exercise (on an earlier page, or earlier on its own): the solution quotes them in passing
     ("负载最重的卡要 316.2 GB，第 08 节细讲"). A solution therefore bolds the figures it
     computes: a bold figure is a result, and an earlier page that shows it gives it away;
  5. the figures of the earlier exercises of its page (their prompts and answers): a later
     exercise that builds on one is checked for its own answers only;
  6. figures of fewer than three digits (6.1, 9.1%): across ten pages they coincide by chance.
- Page N's exercises are *leaked* when one of their answers appears in the student edition's text
  of any page 01..N: the earlier pages, and the whole of page N that the student edition keeps
  (the text after the exercise included: a summary table there gives the answer away as well).
  On page N a percentage shown with one decimal that the answer rounds to counts too (8.3% for
  8.31%: tables print one decimal where prose prints two); across pages only the same figure
  does, since roundings of short figures coincide by chance.
"""

from __future__ import annotations

import dataclasses
import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

from costmodel import formats

#: The cells the student edition drops (costmodel/publish/pages.py: the solutions and the cells
#: no edition shows).
DROPPED = {"solution", "parameters", "injected-parameters", "lab-only"}

_NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?(?:e[+-]?\d+)?(?:[%×]|x(?!\w))?")
#: A figure quoted from the course, "1.70×（课程 06.4）" or "5–10%（课程 06.8）".
_QUOTED = re.compile(r"[\d.,]+[%×]?(?:[–-][\d.,]+[%×]?)?（课程[^）]*）")

#: The what-ifs of the account (evaluate/account/account.py) and of the GEMM list (evaluate/simulate/gemms.py): a
#: changed run's figures (`mfu_if_total_params`, `padding.step_time_after_packing`, `projections`,
#: `advice`, a GEMM's `intensity_limit` for m → ∞), which exercises ask for; every other number
#: of the two describes the run as it stands (rule 3).
WHAT_IF = re.compile(r"_if_|after|projections|advice|limit")


_FRACTION = re.compile(r"(?<![\w./])(\d{1,2})/(\d{1,2})(?![\w./])")


def figures(text: str) -> set[str]:
    """The figures a reader sees in `text` (see the module's rule), each with its sign (% or ×;
    an ASCII x after a number, as code prints it, is ×); a fraction of small integers ("1/6")
    counts as its decimals (0.17, 0.167, 0.1667)."""
    text = _QUOTED.sub("", html.unescape(text).replace("{,}", ",").replace("\\%", "%"))
    found = {n[:-1] + "×" if n.endswith("x") else n for n in _NUMBER.findall(text)}
    for p, q in _FRACTION.findall(text):
        if int(q):
            found |= {f"{int(p) / int(q):.{digits}f}" for digits in (2, 3, 4)}
    return {n for n in found if _digits(n) and _value(n) not in (0.0, 1.0)}


def _digits(figure: str) -> bool:
    number = figure.rstrip("%×")
    return "." in number or len(number.replace(",", "")) >= 3


def _significant(figure: str) -> int:
    """The digits an answer is written with, leading zeros left out: 3 for 90.0, 0.167 and
    8.32e8; 2 for 6.1."""
    digits = figure.rstrip("%×").split("e")[0].replace(",", "").replace(".", "")
    return len(digits.lstrip("0"))


def _value(figure: str) -> float:
    return float(figure.rstrip("%×").replace(",", ""))


def rounds_to(shown: str, answer: str) -> bool:
    """`answer` rounded to the decimals of `shown` is `shown` (the same sign, fewer decimals)."""
    sign = shown[-1] if shown[-1] in "%×" else ""
    number, wanted = shown.rstrip("%×"), answer.rstrip("%×")
    if not answer.endswith(sign) or answer[-1:] in "%×" and not sign or "e" in number + wanted:
        return False
    places = len(number.split(".")[1]) if "." in number else 0
    more = len(wanted.split(".")[1]) if "." in wanted else 0
    return places < more and f"{_value(wanted):,.{places}f}" == number


def matches(shown: str, answer: str) -> bool:
    """`shown` gives `answer` away: the same figure (with the same sign, % or ×), or a percentage
    shown with one decimal that the answer, with two, rounds to (8.3% for 8.31%: the pages'
    tables print a percentage with one decimal where their prose prints two)."""
    if shown == answer:
        return True
    one = re.fullmatch(r"[\d,]+\.\d%", shown) and re.fullmatch(r"[\d,]+\.\d\d%", answer)
    return bool(one) and rounds_to(shown, answer)


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _outputs(cell) -> list[str]:
    texts = []
    for output in cell.get("outputs", []):
        texts.append(output.get("text", ""))
        data = output.get("data", {})
        texts += [data.get(k, "") for k in ("text/markdown", "text/html", "text/latex")]
        if set(data) == {"text/plain"}:  # a figure's "<Figure size 750x420 ...>" is not shown
            texts.append(data["text/plain"])
    return texts


def shown(cell) -> str:
    """What a reader sees of a cell: its Markdown, or its code (unless hidden) and outputs."""
    if cell.cell_type == "markdown":
        return cell.source
    return "\n".join(([] if "remove-input" in _tags(cell) else [cell.source]) + _outputs(cell))


_BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)


def _prose_and_results(cell) -> tuple[str, str]:
    """A solution cell's prose (its Markdown, or the Markdown its code displays) and its results
    (what the code prints, its tables and equations, and the bold of the prose); the source of
    its code is neither (rule 2)."""
    if cell.cell_type == "markdown":
        prose = [cell.source]
        results = []
    else:
        prose, results = [], []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            prose.append(data.get("text/markdown", ""))
            results += [
                output.get("text", ""),
                data.get("text/html", ""),
                data.get("text/latex", ""),
            ]
            if set(data) == {"text/plain"}:
                results.append(data["text/plain"])
    results += [bold for text in prose for bold in _BOLD.findall(text)]
    return "\n".join(prose), "\n".join(results)


def formatted(value: float) -> set[str]:
    """The figures of `value` in each way the notebooks write a number."""
    texts = [formats.short(value), formats.sci(value), formats.sci(value, 2), formats.count(value)]
    texts += [formats.sig(value), formats.sig4(value), formats.ratio(value)]
    for digits in (0, 1, 2, 3, 4):
        texts += [formats.num(value, digits), formats.decimals(value, digits)]
        texts += [formats.pct(value, digits), formats.pct(value, digits, grouped=True)]
        texts += [formats.times(value, digits), formats.gb(value, digits)]
    return figures(" ".join(texts))


def _numbers(tree, key: str = "") -> list[float]:
    """The numbers of the account, its what-ifs left out."""
    if key and WHAT_IF.search(key):
        return []
    if isinstance(tree, dict):
        return [x for k, v in tree.items() for x in _numbers(v, str(k))]
    if isinstance(tree, list | tuple):
        return [x for v in tree for x in _numbers(v, key)]
    if isinstance(tree, int | float) and not isinstance(tree, bool):
        return [float(tree)]
    return []


@dataclass
class Run:
    """Rule 3's figures: the scenario's values (`inputs`) and those of its account and GEMM list,
    what-ifs left out (`state`)."""

    inputs: set[str]
    state: set[str]


def _formatted_all(values) -> set[str]:
    return set().union(*(formatted(v) for v in values if abs(v) != float("inf")))


def run_givens(sc, acc) -> Run:
    """Rule 3: the figures of the run as it stands."""
    from costmodel.evaluate.simulate.gemms import model_gemms

    rows = [dataclasses.asdict(row) for row in model_gemms(sc)]
    return Run(
        _formatted_all(_numbers(dict(sc.values))), _formatted_all(_numbers(acc) + _numbers(rows))
    )


@dataclass
class Exercise:
    page: str  # the notebook's stem
    cell: int  # the exercise cell's index
    title: str
    answers: set[str]

    @property
    def name(self) -> str:
        number = re.search(r"练习\s*(\d+)", self.title)
        return f"{self.page[:2]}-{number.group(1) if number else self.cell}"


def _level(cell) -> int:
    """The level of the heading a Markdown cell starts with (0: none)."""
    head = re.match(r"(#+) ", cell.source) if cell.cell_type == "markdown" else None
    return len(head.group(1)) if head else 0


def _closes(exercise, cell) -> bool:
    """`cell` starts a section above the exercise's heading (page 10's "## 本节要点" after its
    last exercise): the exercise's answer ends there."""
    return 0 < _level(cell) < _level(exercise)


def _exercises(cells) -> list[tuple[int, list[int], int]]:
    """Each exercise: its cell, its solution cells, and its first solution cell (the end of its
    prompt)."""
    starts = [i for i, c in enumerate(cells) if "exercise" in _tags(c)]
    found = []
    for i, end in zip(starts, starts[1:] + [len(cells)]):
        end = next((j for j in range(i + 1, end) if _closes(cells[i], cells[j])), end)
        solutions = [j for j in range(i + 1, end) if "solution" in _tags(cells[j])]
        found.append((i, solutions, solutions[0] if solutions else end))
    return found


def _kept(cells) -> str:
    return "\n".join(shown(c) for c in cells if not DROPPED & _tags(c))


def answers(nb, stem: str = "", given: Run | None = None, earlier: str = "") -> list[Exercise]:
    """Each exercise of `nb` and its answers. `given`: the run's figures (rule 3); `earlier`: the
    student edition's text of the pages before (rules 3 and 4)."""
    cells, found, settled = nb.cells, [], set()
    quoted = figures(earlier)
    for i, solutions, first in _exercises(cells):
        prompt = figures(_kept(cells[i:first]))
        parts = [_prose_and_results(cells[j]) for j in solutions]
        prose = figures("\n".join(p for p, _ in parts))
        results = figures("\n".join(r for _, r in parts))
        code = "\n".join(cells[j].source for j in solutions if cells[j].cell_type == "code")
        constants = {_value(c) for c in figures(code)}  # rule 2
        before = quoted | figures(_kept(cells[:i]))
        shown_figures = (prose - before) | results  # rule 4
        run_figures = given.inputs | (given.state & before) if given else set()
        found.append(
            Exercise(
                stem,
                i,
                cells[i].source.strip().splitlines()[0].lstrip("#").strip(),
                {
                    a
                    for a in shown_figures - prompt - run_figures - settled  # rules 1, 3 and 5
                    if _significant(a) >= 3  # rule 6
                    and _value(a) not in constants
                    and not any(rounds_to(g, a) for g in prompt)
                },
            )
        )
        settled |= prompt | shown_figures
    return found


def course_answers(notebooks, given: Run | None = None) -> list[list[Exercise]]:
    """The exercises of each of `notebooks` ((stem, notebook) in the order of the course)."""
    found, earlier = [], []
    for stem, nb in notebooks:
        found.append(answers(nb, stem, given, "\n".join(earlier)))
        earlier.append(student_text(nb))
    return found


def student_text(nb) -> str:
    """The text of the cells the student edition keeps."""
    return "\n".join(shown(c) for c in nb.cells if not DROPPED & _tags(c))


@dataclass
class Leak:
    exercise: Exercise
    page: str  # where the answer shows
    figures: list[str]

    def __str__(self) -> str:
        return f"{self.exercise.name} ({self.exercise.title}): {self.figures} on {self.page}"


def leaks(pages: list[tuple[str, list[Exercise], str]]) -> list[Leak]:
    """`pages`: (name, exercises, the student edition's text) in the order of the course; the
    exercises of page N that pages 01..N give away."""
    seen = [(name, figures(text)) for name, _, text in pages]
    found = []
    for n, (_, exercises, _) in enumerate(pages):
        for exercise in exercises:
            for m, (name, shown_figures) in enumerate(seen[: n + 1]):
                given = sorted(
                    a
                    for a in exercise.answers
                    if a in shown_figures or m == n and any(matches(f, a) for f in shown_figures)
                )
                if given:
                    found.append(Leak(exercise, name, given))
    return found


#: Elements whose text is not read (a formula is read from its alttext).
_SKIPPED = ("style", "script", "svg", "math")


class _Text(HTMLParser):
    """The text of an HTML page, a space between elements (a table's cells stay apart). A plot's
    inline SVG is left out: its text is axis ticks ("100" on a log axis), not the page's figures.
    A formula is its TeX (MathML's alttext): its elements' text, spaced apart, would split
    "balance_{H100}" into a figure "100"."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self._skip += tag in _SKIPPED
        if tag == "math" and not self._skip - 1:
            self.parts.append(" " + (dict(attrs).get("alttext") or ""))
        self.parts.append(" ")

    def handle_endtag(self, tag):
        self._skip -= tag in _SKIPPED and self._skip > 0
        self.parts.append(" ")

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def html_text(page: str) -> str:
    parser = _Text()
    parser.feed(page)
    return "".join(parser.parts)
