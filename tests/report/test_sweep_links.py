"""A resumed sweep's report covers the runs it reused: the store's ``sweep_runs`` links, written
through the spool (as a sweep's workers write), ingested once, read by the report's sweep filter."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from engine.cli.main import main
from engine.models import RunRecord
from engine.report.query import Filters, load_runs, resolve_sweeps
from engine.store.duckdb import DuckDBStore
from engine.store.files import pending_files

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def record(run_id: str, task: str, sweep: str, minutes: int) -> RunRecord:
    started = T0 + timedelta(minutes=minutes)
    return RunRecord(
        run_id=run_id,
        spec_hash=f"spec-{task}",
        spec={},
        status="completed",
        task_id=task,
        agent="noop",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault",
        attempt=0,
        seed=0,
        sweep_id=sweep,
        started_at=started.isoformat(),
        ended_at=(started + timedelta(seconds=5)).isoformat(),
        reward=0.0,
    )


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    store = DuckDBStore()
    # The interrupted sweep A completed t1 and t2; its resume B ran t3 and reused t1, t2.
    for rec in (record("a1", "t1", "A", 0), record("a2", "t2", "A", 1), record("b3", "t3", "B", 10)):
        store.record_run(rec)
    return store


def test_a_resumed_sweep_reads_as_the_whole_sweep_with_the_runs_it_reused(store):
    assert [r.task_id for r in load_runs(store, Filters(sweeps=("B",)))] == ["t3"]  # before: the resumed part
    store.link_sweep_run("B", "a1")
    store.link_sweep_run("B", "a2")
    assert pending_files(store.spool) == []  # ingested at once, as a run record is
    assert sorted(r.task_id for r in load_runs(store, Filters(sweeps=("B",)))) == ["t1", "t2", "t3"]
    assert sorted(r.task_id for r in load_runs(store, Filters(sweeps=("A",)))) == ["t1", "t2"]  # A keeps its own
    assert resolve_sweeps(store, ("last",)) == ("B",)


def test_a_link_spooled_twice_is_stored_once_and_a_bad_one_is_set_aside(store):
    for _ in range(2):
        store.link_sweep_run("B", "a1")
    assert store.query("SELECT sweep_id, run_id, reused FROM sweep_runs")[1] == [("B", "a1", True)]
    (store.spool / "sweep_run.bad.00000000000000000001.json").write_text(
        json.dumps({"record_kind": "sweep_run", "record_seq": 1, "sweep_id": "", "run_id": "a2"})
    )
    store.ingest_pending()
    assert store.query("SELECT count(*) FROM sweep_runs")[1] == [(1,)]
    assert list((store.spool / "rejected").glob("sweep_run.bad.*"))


def test_a_resume_that_reused_every_run_is_the_last_sweep(store, capsys):
    """A resume with nothing left to run ran no run of its own; its links date it."""
    store.link_sweep_run("C", "a1")
    store.link_sweep_run("C", "b3")
    assert main(["report", "--sweep", "last", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {row["task_id"] for row in document["matrix"]} == {"t1", "t3"}


def test_a_store_of_schema_4_gains_the_links_table_and_keeps_its_runs(tmp_path, monkeypatch):
    import duckdb

    from engine.store.schema import DDL, SCHEMA_VERSION

    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CRUCIBLE_STORE", raising=False)
    (tmp_path / "home").mkdir()
    con = duckdb.connect(str(tmp_path / "home" / "store.duckdb"))
    for statement in DDL:
        if "sweep_runs" not in statement:
            con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('schema_version', '4')")
    con.close()
    store = DuckDBStore()
    store.record_run(record("a1", "t1", "A", 0))
    store.link_sweep_run("B", "a1")
    assert store.query("SELECT value FROM meta WHERE key = 'schema_version'")[1] == [(str(SCHEMA_VERSION),)]
    assert [r.run_id for r in load_runs(store, Filters(sweeps=("B",)))] == ["a1"]
