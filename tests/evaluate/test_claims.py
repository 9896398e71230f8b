"""Issue 23 (4): a course claim that several pages judge has one verdict, computed once
(costmodel/evaluate/account/claims.py), compared like with like, and "无从判断" where the data cannot
judge; the course's seq² and 0.6% are computed where the course states them."""

import nbformat
from notebook_text import claim_rows

from costmodel import course
from costmodel.evaluate.account import claims
from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario
from costmodel.publish import suite


def _claim_rows(stem: str) -> list[tuple[str, str, str]]:
    """The rows of a stored notebook's claims tables: (claim, computed, verdict), as text."""
    return claim_rows(nbformat.read(suite.NOTEBOOKS / f"{stem}.ipynb", as_version=4))


def _row(stem: str, key: str) -> tuple[str, str, str]:
    quote = course.claim(key)
    found = [r for r in _claim_rows(stem) if quote in r[0]]
    assert len(found) == 1, (stem, key, found)
    return found[0]


def test_the_reported_range_is_judged_once_on_the_course_run(course, course_account):
    judged = claims.reported_convention(course_account, course)
    assert judged["holds"] is True and judged["closer"] == "HFU"
    assert "HFU_published" in judged["inside"]


def test_a_teams_run_cannot_judge_the_course_projects_range(course_account):
    team = scenario.resolve(None, {"step_time": 90})
    assert claims.reported_convention(account(team), team)["holds"] is None


def test_01_and_03_give_the_reported_range_one_verdict():
    """The claim was "有出入" on 01 and "成立" on 03: the same row now, on both pages."""
    row_01, row_03 = (
        _row("01_mfu_hfu", "nb01_reported_is_hfu"),
        _row("03_course_numbers", "nb01_reported_is_hfu"),
    )
    assert row_01 == row_03
    assert row_01[2].startswith("成立")


def test_the_headline_compares_hfu_with_hfu(course_account):
    """The course calls its 8-10% HFU: the headline row sets it against HFU with the attention
    core (causal 11.1%), not MFU with it (causal 8.3%), and says which convention."""
    claim, computed, verdict = _row("05_attention_term", "headline_understated")
    assert "HFU 口径" in computed and "causal 11.1%" in computed
    assert verdict.startswith("成立") and "HFU" in verdict
    assert claims.headline_understated(0.142, 0.111, 0.0585, True) == (True, 0.10)
    assert claims.headline_understated(0.106, 0.083, 0.0585, True)[0] is False


def test_06_thin_gemm_cannot_be_judged_by_the_roofline():
    verdict = _row("06_moe_long_sequence", "nb06_thin_gemm")[2]
    assert verdict.startswith("无从判断") and "roofline 推不出" in verdict


def test_the_courses_seq_squared_and_communication_share_are_printed():
    """seq² = 2.42e9 (06.5) on 05 and the 0.6% communication share (06.6) on 06, computed."""
    computed, verdict = _row("05_attention_term", "nb05_seq_squared")[1:]
    assert "S² = 49,152² = 2.42e9" in computed and verdict.startswith("成立")
    computed = _row("06_moe_long_sequence", "nb06_communication_share")[1]
    assert "单向（dispatch）0.63%" in computed


def test_the_communication_share_quoted_is_the_dispatch_alone(course_account):
    shares = claims.communication_share_quoted(course_account)
    assert course.agrees(shares["dispatch"], "nb06_communication_share")
    assert not course.agrees(shares["all"], "nb06_communication_share")
    assert shares["dispatch"] < shares["all_to_all"] <= shares["all"]


def test_a_figure_in_scientific_notation_agrees_at_its_significant_digits():
    assert course.agrees(49_152**2, "nb05_seq_squared")
    assert not course.agrees(2.43e9, "nb05_seq_squared")
