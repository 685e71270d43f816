"""The read commands open the store in read turns only (issue 38): ``query``, ``show`` and
``report`` read the schema's version in the same read turn as what housekeeping has to do
(``DuckDBStore.validate(housekeeping=True)``), and still create or upgrade a schema that is
missing or old (in a write turn) before anything reads it, in one process or in several at once.
Lists of ids go to DuckDB as JSON text; a run id holding JSON's and SQL's quotes reads back whole."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from store_records import make_run

import engine.store.lock as lock
from engine.models import RunRecord, Step, TestResult
from engine.run.session import housekeeping, open_housekept_store
from engine.store.duckdb import DuckDBStore
from engine.store.files import this_host
from engine.store.lock import duckdb
from engine.store.schema import SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]


def record(run_id: str, *, status: str = "completed", pid: int | None = None) -> RunRecord:
    """A run as the engine stores it; one still running is owned by ``pid`` on this host."""
    return make_run(run_id, status, owner_pid=pid, owner_host=this_host() if pid else None)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    return tmp_path / "home"


@pytest.fixture
def turns(monkeypatch) -> list[str]:
    """Each store turn this process opens, in order: "read" or "write"."""
    opened: list[str] = []
    attach = lock._attach

    def counted(path, read_only, *args, **kwargs):
        opened.append("read" if read_only else "write")
        return attach(path, read_only, *args, **kwargs)

    monkeypatch.setattr(lock, "_attach", counted)
    return opened


def forget_schema_checks() -> None:
    """This process forgets that it has seen the store's schema, as a new command would."""
    from engine.store import schema

    schema._SCHEMA_READY.clear()


def test_a_reader_opens_a_current_store_and_housekeeps_in_one_read_turn(home, tmp_path, turns):
    path = tmp_path / "store.duckdb"
    DuckDBStore(path).record_run(record("done"))
    forget_schema_checks()
    turns.clear()
    store = open_housekept_store(str(path))
    assert turns == ["read"]
    assert store.query("SELECT run_id FROM runs")[1] == [("done",)]
    assert turns == ["read", "read"]


def test_a_missing_schema_is_made_before_the_reader_reads(home, tmp_path, turns):
    path = tmp_path / "bare.duckdb"
    duckdb.connect(str(path)).close()  # a DuckDB file, no crucible table in it
    store = open_housekept_store(str(path))
    assert "write" in turns
    assert store.query("SELECT count(*) FROM runs")[1] == [(0,)]
    assert store.query("SELECT value FROM meta WHERE key = 'schema_version'")[1] == [(str(SCHEMA_VERSION),)]


def test_an_old_schema_is_upgraded_before_the_reader_reads(home, tmp_path, turns):
    path = tmp_path / "old.duckdb"
    DuckDBStore(path).record_run(record("old-run"))
    with duckdb.connect(str(path)) as con:  # as an older crucible left it: no retry_of, version 5
        con.execute("ALTER TABLE runs DROP COLUMN retry_of")
        con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    forget_schema_checks()
    turns.clear()
    store = open_housekept_store(str(path))
    assert turns[:2] == ["read", "write"]  # the version read, then the upgrade
    run = store.get_run("old-run")
    assert run is not None and run.retry_of is None


def test_a_record_that_came_in_after_the_open_is_housekept(home, tmp_path):
    """What validate read is read again when housekeeping ingests something: a dead owner's
    run spooled between the open and housekeeping is still ended."""
    path = tmp_path / "store.duckdb"
    DuckDBStore(path).record_run(record("live", status="running", pid=os.getpid()))
    forget_schema_checks()
    store = DuckDBStore(path).validate(create=False, housekeeping=True)
    DuckDBStore(path).record_run(record("dead", status="running", pid=dead_pid()), ingest=False)
    assert store.housekeeping_due() == (True, False)
    housekeeping(store)
    dead = store.get_run("dead")
    assert dead is not None and dead.status == "error"


def test_a_record_waiting_in_the_spool_at_the_open_is_housekept(home, tmp_path):
    path = tmp_path / "store.duckdb"
    DuckDBStore(path).record_run(record("done"))
    DuckDBStore(path).record_run(record("dead", status="running", pid=dead_pid()), ingest=False)
    forget_schema_checks()
    store = open_housekept_store(str(path))
    dead = store.get_run("dead")
    assert dead is not None and dead.status == "error"


@pytest.mark.slow
@pytest.mark.parametrize("schema", ["missing", "old"])
def test_readers_opening_at_once_all_find_the_schema_current(home, tmp_path, schema):
    path = tmp_path / "store.duckdb"
    if schema == "missing":
        duckdb.connect(str(path)).close()
    else:
        DuckDBStore(path).record_run(record("old-run"))
        with duckdb.connect(str(path)) as con:
            con.execute("ALTER TABLE runs DROP COLUMN retry_of")
            con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    env = {**os.environ, "CRUCIBLE_HOME": str(home)}
    reader = "select count(*), max(retry_of) from runs"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "engine.cli", "query", "--csv", "--store", str(path), reader],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 6, [err for _, err in outputs]
    count = "0" if schema == "missing" else "1"
    assert {out for out, _ in outputs} == {f"count_star(),max(retry_of)\n{count},\n"}


def test_run_ids_with_quotes_read_back_with_their_steps_and_tests(home, tmp_path):
    path = tmp_path / "store.duckdb"
    odd = ['run "quoted" \\ back', "run 'single', [bracket]", "rün ✓"]
    store = DuckDBStore(path)
    for run_id in odd:
        store.record_run(
            replace(
                record(run_id),
                steps=[Step(idx=0, kind="tool_call", tool=f"tool of {run_id}")],
                tests=[TestResult(name=f"test of {run_id}", status="PASSED")],
            )
        )
    for run_id, loaded in store.get_runs(odd).items():
        assert [s.tool for s in loaded.steps] == [f"tool of {run_id}"]
        assert [t.name for t in loaded.tests] == [f"test of {run_id}"]
    assert sorted(store.get_runs(odd)) == sorted(odd)


def test_crucibles_own_sql_keeps_the_instance_and_user_sql_has_it_made_afresh(home, tmp_path):
    """A user's statement may change DuckDB's instance for good (a SET), so the next turn makes
    it afresh (a warm reader answers one command after another); crucible's own reads (a
    sweep's summary, each run's golden-time lookup) change nothing and keep it."""
    store = DuckDBStore(tmp_path / "store.duckdb")
    store.record_run(record("r-own"))
    store.query("SELECT count(*) FROM runs")  # a user's: the next turn renews
    store.query("SELECT 1", ours=True)  # that turn: made afresh here
    kept = lock._instance
    assert kept is not None
    for _ in range(2):
        assert store.query("SELECT count(*) FROM runs", ours=True)[1] == [(1,)]
        assert lock._instance is kept  # the same instance, turn after turn
    store.query("SET threads = 1")  # a user's statement that changes the instance
    assert store.query("SELECT current_setting('threads')", ours=True)[1] != [(1,)]  # made afresh first
    assert lock._instance is not kept
