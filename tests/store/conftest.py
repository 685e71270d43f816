"""Each test of the store gets a fresh store, under a CRUCIBLE_HOME of its own."""

from __future__ import annotations

import pytest

from engine.store.duckdb import DuckDBStore


@pytest.fixture
def store(tmp_path, monkeypatch) -> DuckDBStore:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    return DuckDBStore()
