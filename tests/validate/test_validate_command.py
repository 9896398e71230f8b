"""The cross-checks' shared command line (costmodel.validate.command): CSV to standard output or
to --out, written atomically."""

from dataclasses import asdict, dataclass

from costmodel import validate


@dataclass
class _Row:
    name: str
    value: int

    def as_dict(self):
        return asdict(self)


def _rows():
    return [_Row("a", 1), _Row("b", 2)]


def _csv(rows):
    return validate.csv_text(rows, ("name", "value"))


def test_csv_to_stdout(capsys):
    assert validate.command("x", "d", _rows, _csv, []) == 0
    assert capsys.readouterr().out == "name,value\na,1\nb,2\n"


def test_csv_to_a_file_replaces_it_and_leaves_nothing_beside_it(tmp_path):
    out = tmp_path / "sub" / "rows.csv"
    assert validate.command("x", "d", _rows, _csv, ["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == "name,value\na,1\nb,2\n"
    assert validate.command("x", "d", lambda: _rows()[:1], _csv, ["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == "name,value\na,1\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["rows.csv"]


def test_a_missing_extra_is_one_line_and_exit_2(capsys, tmp_path):
    def missing():
        raise ImportError("torch is not installed (make validate-deps)")

    out = tmp_path / "rows.csv"
    assert validate.command("x", "d", missing, _csv, ["--out", str(out)]) == 2
    assert capsys.readouterr().err == "error: torch is not installed (make validate-deps)\n"
    assert not out.exists()
