"""The one thing pyproject.toml cannot say: the notebooks live at the top of the repository
(`notebooks/`, where a reader opens them) and ship inside the package as
costmodel/course/notebooks/ (package data, listed in pyproject.toml: a non-editable install builds handouts from them)."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["costmodel*"]) + ["costmodel.course.notebooks"],
    package_dir={"costmodel.course.notebooks": "notebooks"},
)
