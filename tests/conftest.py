import os

import pytest

from costmodel.evaluate.account import account
from costmodel.inputs import scenario

#: The one CI detector: CI set, and not to false, 0 or no. In CI no test may skip for a missing
#: tool (.ci/run installs them all).
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing(reason: str):
    """A tool the test needs is missing: skip here, fail in CI."""
    if IN_CI:
        pytest.fail(f"{reason}: CI must install it (.ci/run)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def course():
    return scenario.resolve()


@pytest.fixture(scope="session")
def course_account(course):
    return account(course)
