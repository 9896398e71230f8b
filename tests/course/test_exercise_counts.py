"""A lecture says as many exercises as it has (issue 36, 4: page 10 and the index said "两道练习"
above three), and promises only what both editions show."""

import re
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NUMBERS = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5}


def exercises(text: str) -> int:
    return len(re.findall(r"^# ### 练习 \d", text, re.M))


def stated(text: str) -> list[int]:
    """Every "N 道练习" the lecture's Markdown states."""
    return [NUMBERS.get(n) or int(n) for n in re.findall(r"([一两二三四五\d]+) ?道练习", text)]


def test_the_counter_reads_a_stated_count():
    text = "# 本页有两道练习。\n# ### 练习 1\n# ### 练习 2\n# ### 练习 3\n"
    assert (stated(text), exercises(text)) == ([2], 3)


def test_every_stated_count_of_exercises_is_the_lectures():
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")):
        text = path.read_text(encoding="utf-8")
        assert all(n == exercises(text) for n in stated(text)), path.name


def test_10s_introduction_promises_the_solutions_to_the_teacher_only():
    """The student edition drops the solutions, the lever ranking and the claims table: the
    introduction both editions share says which edition has them."""
    text = (NOTEBOOKS / "10_exercises.py").read_text(encoding="utf-8")
    intro = text.split("# %%", 3)[1]
    assert "教师版" in intro and "学生版" in intro
