import pytest

from costmodel import report, scenario


@pytest.fixture(scope="session")
def course():
    return scenario.resolve()


@pytest.fixture(scope="session")
def course_account(course):
    return report.account(course)
