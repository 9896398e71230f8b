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


@pytest.fixture(scope="session")
def notebook_kernel():
    """One kernel for every test of a session (of a pytest-xdist worker) that executes the
    course's notebooks: reset between notebooks as the handouts build resets it, so a kernel
    start and the SymPy derivations are paid once, not once per notebook."""
    from costmodel.present import runner, suite

    suite.inline_figures()
    runner.skip_iri_format_checks()
    kernel = runner.Kernel(suite.NOTEBOOKS)
    kernel.launch()
    yield kernel
    kernel.shutdown()
