"""The second share of the extreme scenarios through all ten notebooks (tests/course/
extreme_runs.py; the first is tests/course/test_valid_space.py's): no error, nothing on stderr,
the hostile name escaped on every page, sentences that follow the scenario, no projected step
longer than the step. A module of its own so that pytest-xdist runs it on the other worker."""

import pytest
from extreme_runs import (
    check_every_notebook_ran,
    check_projected_steps,
    check_sentences,
    check_the_hostile_name_is_escaped,
    run_share,
)

SHARE = "extremes"


@pytest.fixture(scope="module")
def extreme_runs(notebook_kernel):
    """Every notebook executed for this module's share of the extreme scenarios, in the
    worker's kernel: {(scenario, notebook): notebook}."""
    return run_share(notebook_kernel, SHARE)


def test_extreme_scenarios_run_every_notebook_without_error_or_stderr(extreme_runs):
    check_every_notebook_ran(extreme_runs, SHARE)


def test_the_hostile_name_reaches_every_page_escaped(extreme_runs):
    check_the_hostile_name_is_escaped(extreme_runs)


def test_sentences_follow_the_scenario(extreme_runs):
    """Statements that used to be false for some teams (extreme_runs.SENTENCES)."""
    check_sentences(extreme_runs, SHARE)


def test_a_projected_step_is_never_longer_and_a_contradicted_estimate_is_said(extreme_runs):
    """Issue 18 (13), (14) (extreme_runs.check_projected_steps)."""
    check_projected_steps(extreme_runs, SHARE)
