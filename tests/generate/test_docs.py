"""The reference tables in docs/ are generated (costmodel.generate.docs) and must not drift
from the scenario schema or the report's JSON."""

from __future__ import annotations

from costmodel.generate import docs
from costmodel.inputs import scenario


def test_docs_tables_are_current():
    """Regenerate both tables and compare them with docs/: run `make docs` after changing a
    scenario key or the report's JSON."""
    for name, text in docs.tables().items():
        assert (docs.DOCS / name).read_text(encoding="utf-8") == text, (
            f"docs/{name} is out of date: run make docs"
        )


def test_every_scenario_key_has_a_row():
    table = docs.scenario_keys_table()
    for key, spec in scenario.FIELDS.items():
        assert f"| `{key}` | {spec.kind} |" in table


def test_check_reports_a_stale_table_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    monkeypatch.setattr(docs, "tables", lambda: {"scenario-keys.md": "new\n"})
    (tmp_path / "scenario-keys.md").write_text("old\n", encoding="utf-8")
    assert docs.main(["--check"]) == 1
    assert "scenario-keys.md out of date" in capsys.readouterr().err
    assert (tmp_path / "scenario-keys.md").read_text(encoding="utf-8") == "old\n"
    assert docs.main([]) == 0
    assert (tmp_path / "scenario-keys.md").read_text(encoding="utf-8") == "new\n"
    assert docs.main(["--check"]) == 0
