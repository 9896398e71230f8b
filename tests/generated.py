"""The rule every generated module's writer keeps (`make numeric`: costmodel/generate/,
`costmodel.generate.write_generated`), shared by the tests of the three modules it writes."""

import pytest

from costmodel.errors import CostModelError


def check_written_only_over_its_own_file(write, target, source: str) -> None:
    """`write(path)` writes `source` to `target`, says when nothing changed (False), and refuses
    a file it did not write, leaving that file as it was."""
    assert write(target) is True
    assert target.read_text(encoding="utf-8") == source
    assert write(target) is False
    foreign = target.parent / "mine.py"
    foreign.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(CostModelError, match="is not allowed"):
        write(foreign)
    assert foreign.read_text(encoding="utf-8") == "x = 1\n"
