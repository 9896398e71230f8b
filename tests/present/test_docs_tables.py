"""The reference tables in docs/ are generated (costmodel.present.docs_tables) and must not drift
from the scenario schema or the report's JSON."""

from __future__ import annotations

from costmodel.inputs import scenario
from costmodel.present import docs_tables


def test_docs_tables_are_current():
    """Regenerate both tables and compare them with docs/: run `make docs` after changing a
    scenario key or the report's JSON."""
    for name, text in docs_tables.tables().items():
        assert (docs_tables.DOCS / name).read_text(encoding="utf-8") == text, (
            f"docs/{name} is out of date: run make docs"
        )


def test_every_scenario_key_has_a_row():
    table = docs_tables.scenario_keys_table()
    for key, spec in scenario.FIELDS.items():
        assert f"| `{key}` | {spec.kind} |" in table


def test_check_reports_a_stale_table_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(docs_tables, "DOCS", tmp_path)
    monkeypatch.setattr(docs_tables, "tables", lambda: {"scenario-keys.md": "new\n"})
    (tmp_path / "scenario-keys.md").write_text("old\n", encoding="utf-8")
    assert docs_tables.main(["--check"]) == 1
    assert "scenario-keys.md out of date" in capsys.readouterr().err
    assert (tmp_path / "scenario-keys.md").read_text(encoding="utf-8") == "old\n"
    assert docs_tables.main([]) == 0
    assert (tmp_path / "scenario-keys.md").read_text(encoding="utf-8") == "new\n"
    assert docs_tables.main(["--check"]) == 0
