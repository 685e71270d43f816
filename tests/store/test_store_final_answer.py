"""The agent's final answer in the store: kept with its run, loaded back, NULL for runs of a
store made before the column existed (schema 2, upgraded in place), and printed by ``crucible show``."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from engine.models import RunRecord
from engine.store.duckdb import DuckDBStore
from engine.store.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

# The runs table as schema version 2 made it (no final_answer), with the tables it had.
V2_RUNS = """CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, spec_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
    task_id VARCHAR, agent VARCHAR, model VARCHAR, flavor VARCHAR, runtime VARCHAR,
    integrity_requested VARCHAR, integrity_obtained VARCHAR, attempt INTEGER, seed BIGINT,
    sweep_id VARCHAR, started_at TIMESTAMP, ended_at TIMESTAMP, wall_seconds DOUBLE,
    reward DOUBLE, stop_reason VARCHAR, error_phase VARCHAR, error VARCHAR, run_dir VARCHAR,
    image_tag VARCHAR, from_cache BOOLEAN, owner_pid BIGINT, owner_host VARCHAR,
    spec JSON, raw_grade JSON, timings JSON, diff TEXT,
    violations VARCHAR[], warnings VARCHAR[],
    record_seq BIGINT NOT NULL, ingested_at TIMESTAMP)"""


@pytest.fixture
def store(tmp_path, monkeypatch) -> DuckDBStore:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    return DuckDBStore(tmp_path / "store.duckdb")


def make_run(run_id: str, answer: str | None) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        spec_hash=f"hash-{run_id}",
        spec={"task": {"id": "t1"}},
        status="completed",
        task_id="t1",
        agent="claude_code",
        model="anthropic/claude-sonnet-4-6",
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained="strict",
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=T0.isoformat(),
        ended_at=(T0 + timedelta(seconds=3)).isoformat(),
        reward=1.0,
        final_answer=answer,
    )


def test_the_final_answer_is_stored_with_its_run_and_loaded_back(store):
    answer = "Fixed `last_page`: it rounded down.\nBoth tests pass now."
    store.record_run(make_run("r1", answer))
    store.record_run(make_run("r2", None))

    assert store.get_run("r1").final_answer == answer
    assert store.get_run("r2").final_answer is None
    assert store.query("SELECT run_id FROM runs WHERE final_answer LIKE '%rounded down%'")[1] == [("r1",)]


def test_a_store_made_before_final_answer_gains_the_column_and_keeps_its_runs(store):
    con = duckdb.connect(str(store.path))
    try:
        con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
        con.execute(V2_RUNS)
        con.execute(
            "INSERT INTO runs (run_id, spec_hash, status, task_id, record_seq) "
            "VALUES ('old', 'h', 'completed', 't1', 1)"
        )
    finally:
        con.close()

    assert store.get_run("old").final_answer is None
    assert store.terminals() == []  # the tables added since (schema 4) are there, empty
    store.record_run(make_run("new", "done"))
    assert store.get_run("new").final_answer == "done"
    assert store.query("SELECT value FROM meta WHERE key = 'schema_version'")[1] == [(str(SCHEMA_VERSION),)]


def test_show_prints_the_final_answer(store, tmp_path):
    store.record_run(make_run("r1", "The bug was an off-by-one in last_page."))
    env = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_STORE": str(store.path),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
    }  # nothing to reap: no engine there

    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "show", "r1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    assert "answer     The bug was an off-by-one in last_page." in proc.stdout.splitlines()
