"""engine.util.paths: where a command keeps its state."""

from __future__ import annotations

from engine.util import paths


def test_an_empty_crucible_home_is_the_default_home_not_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRUCIBLE_HOME", "")
    assert paths.home() == tmp_path / "user" / ".crucible"
    monkeypatch.delenv("CRUCIBLE_HOME")
    assert paths.home() == tmp_path / "user" / ".crucible"
    monkeypatch.setenv("CRUCIBLE_HOME", "state")  # a relative one is the working directory's
    assert paths.home() == tmp_path / "state"
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    assert paths.store_path() == tmp_path / "state" / "store.duckdb"
