"""The DuckDB results store: durable records, idempotent ingestion, the spool, forks and threads;
queries, output formats and reads are in test_store_reads.py."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_records import T0, count, make_run

import engine.store.duckdb
from engine.errors import StoreError, UserError
from engine.models import BuildRecord, RunRecord
from engine.store.duckdb import DuckDBStore
from engine.store.files import pending_files, this_host
from engine.util import paths


def test_run_record_round_trips_with_steps_subscores_and_timings(store, tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    record = make_run("r1", run_dir=str(run_dir))
    store.record_run(record)

    assert store.get_run("r1") == record
    assert RunRecord.from_dict(json.loads((run_dir / "record.json").read_text())) == record
    assert pending_files(paths.spool_dir()) == []
    _, rows = store.query("SELECT stage, seconds FROM stage_timings ORDER BY stage")
    assert rows == [("agent", 3.0), ("build", 0.25), ("grade", 1.5)]
    _, [(wall, violations)] = store.query("SELECT wall_seconds, violations FROM runs")
    assert (wall, violations) == (12.5, ["tests/test_f.py"])


def test_ingesting_the_same_record_twice_keeps_one_row_and_one_set_of_steps(store, tmp_path):
    spool_file = store.write_run_record(make_run("r1"), None)
    kept = tmp_path / "copy.json"
    shutil.copy(spool_file, kept)
    assert store.ingest_pending() == 1
    shutil.copy(kept, spool_file)  # the same file again, as a second ingester would see it
    store.write_run_record(make_run("r1"), None)  # and the same record written again
    assert store.ingest_pending() == 2

    assert count(store, "SELECT count(*) FROM runs") == 1
    assert count(store, "SELECT count(*) FROM steps") == 3
    assert count(store, "SELECT count(*) FROM subscores") == 2
    assert count(store, "SELECT count(*) FROM stage_timings") == 3


def test_completed_replaces_running_and_a_stale_running_record_never_regresses_it(store, tmp_path):
    stale = tmp_path / "stale.json"
    shutil.copy(store.write_run_record(make_run("r1", "running"), None), stale)
    store.ingest_pending()
    assert store.get_run("r1").status == "running"

    store.record_run(make_run("r1"))
    shutil.copy(stale, paths.spool_dir() / stale.name)  # a late ingester delivers the old record
    store.ingest_pending()

    assert store.get_run("r1") == make_run("r1")
    assert count(store, "SELECT count(*) FROM steps") == 3


def test_running_and_completed_in_one_batch_ingest_as_completed(store):
    store.write_run_record(make_run("r1"), None)
    store.write_run_record(make_run("r1", "running"), None)  # newer sequence, but not final
    assert store.ingest_pending() == 2
    assert store.get_run("r1").status == "completed"


def test_mark_orphaned_runs_marks_only_dead_owners_on_this_host(store, tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        now = datetime.now(UTC).isoformat()
        run_dir = tmp_path / "runs" / "orphan"
        host = this_host()
        store.record_run(
            make_run("orphan", "running", owner_pid=dead.pid, owner_host=host, started_at=now, run_dir=str(run_dir))
        )
        store.record_run(
            make_run(
                "setup-orphan", "running", owner_pid=dead.pid, owner_host=host, started_at=now, error_phase="setup"
            )
        )
        store.record_run(make_run("live", "running", owner_pid=alive.pid, owner_host=host, started_at=now))
        store.record_run(make_run("elsewhere", "running", owner_pid=dead.pid, owner_host="other-host"))
        store.record_run(make_run("finished", owner_pid=dead.pid, owner_host=host))

        assert sorted(store.mark_orphaned_runs()) == ["orphan", "setup-orphan"]
        assert store.mark_orphaned_runs() == []
    finally:
        alive.kill()
        alive.wait()

    orphan = store.get_run("orphan")
    assert (orphan.status, orphan.error_phase) == ("error", "agent")
    assert orphan.error == f"owner process died (pid {dead.pid})"
    assert orphan.ended_at is not None
    assert json.loads((run_dir / "record.json").read_text())["status"] == "error"
    assert store.get_run("setup-orphan").error_phase == "setup"
    assert {r: store.get_run(r).status for r in ("live", "elsewhere", "finished")} == {
        "live": "running",
        "elsewhere": "running",
        "finished": "completed",
    }


def test_a_process_killed_between_a_records_two_writes_leaves_no_run_the_store_cannot_see(store, tmp_path, monkeypatch):
    """A "running" record goes to the spool before record.json: a run its directory says is
    running always reaches the store (and is marked dead with its owner). A final record goes
    beside the run first, where the next command takes the ending from (the respool)."""
    real = engine.store.duckdb.atomic_write_json
    written: list[str] = []

    def dies_on_the_second_write(path, document):
        if written:
            raise KeyboardInterrupt("killed between the two writes")
        written.append(Path(path).name)
        return real(path, document)

    monkeypatch.setattr(engine.store.duckdb, "atomic_write_json", dies_on_the_second_write)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "runs" / "killed"
    run_dir.mkdir(parents=True)
    with pytest.raises(KeyboardInterrupt):
        store.record_run(
            make_run(
                "killed",
                "running",
                owner_pid=dead.pid,
                owner_host=this_host(),
                started_at=datetime.now(UTC).isoformat(),
                run_dir=str(run_dir),
            )
        )
    assert written[0].startswith("run") and not (run_dir / "record.json").exists()  # the spool's copy only
    monkeypatch.setattr(engine.store.duckdb, "atomic_write_json", real)
    assert store.mark_orphaned_runs() == ["killed"]
    assert store.get_run("killed").status == "error"

    written.clear()
    monkeypatch.setattr(engine.store.duckdb, "atomic_write_json", dies_on_the_second_write)
    with pytest.raises(KeyboardInterrupt):
        store.record_run(make_run("killed", "completed", run_dir=str(run_dir)))
    assert written == ["record.json"]


def test_bad_sql_raises_a_one_line_user_error_and_writes_are_refused(store):
    store.record_run(make_run("r1"))
    with pytest.raises(UserError, match=r"^query error: Parser Error: syntax error at or near \"selec\"$"):
        store.query("selec 1")
    with pytest.raises(UserError, match=r"^query error: Catalog Error: Table with name nope does not exist!$"):
        store.query("SELECT * FROM nope")
    with pytest.raises(UserError, match="read-only"):
        store.query("DELETE FROM runs")
    assert count(store, "SELECT count(*) FROM runs") == 1


def test_get_run_accepts_a_unique_prefix_and_refuses_an_ambiguous_one(store):
    for run_id in ("abc111", "abc222", "xyz"):
        store.record_run(make_run(run_id))
    assert store.get_run("x").run_id == "xyz"
    assert store.get_run("abc2").run_id == "abc222"
    assert store.get_run("nothing") is None
    with pytest.raises(UserError, match="ambiguous: abc111, abc222"):
        store.get_run("abc")


def test_completed_run_for_returns_the_latest_completed_run_of_a_spec(store):
    later = (T0 + timedelta(hours=1)).isoformat()
    store.record_run(make_run("old", spec_hash="S"))
    store.record_run(make_run("new", spec_hash="S", started_at=later, ended_at=later))
    latest = (T0 + timedelta(hours=2)).isoformat()
    store.record_run(make_run("failed", "error", spec_hash="S", started_at=latest, ended_at=latest))
    store.record_run(make_run("in-flight", "running", spec_hash="S"))
    assert store.completed_run_for("S").run_id == "new"
    assert store.completed_run_for("other") is None
    store.record_run(make_run("t-only", spec_hash="T"))
    # Many specs in one read (a batch's verdict cache): the same answers, absent ones left out.
    found = store.completed_runs_for(["S", "other", "T", "S"])
    assert {spec: record.run_id for spec, record in found.items()} == {"S": "new", "T": "t-only"}
    assert store.completed_runs_for([]) == {}


def test_record_build_is_durable_and_upserted_by_build_id(store):
    build = BuildRecord(
        build_id="b1",
        tag="crucible/x:abc",
        input_hash="abc",
        purpose="task",
        cache_hit=False,
        seconds=4.5,
        size_bytes=1 << 30,
        inputs={"dockerfile": "FROM x"},
        log_path=None,
        started_at=T0.isoformat(),
    )
    store.record_build(build)
    build.cache_hit, build.seconds = True, 0.01
    store.record_build(build)
    assert json.loads((paths.builds_dir() / "b1.json").read_text())["cache_hit"] is True
    _, rows = store.query("SELECT build_id, cache_hit, seconds, size_bytes, started_at FROM builds")
    assert rows == [("b1", True, 0.01, 1 << 30, T0.replace(tzinfo=None))]


def test_a_record_spooled_without_ingest_waits_for_the_next_ingest_and_every_read_sees_it(store):
    """A run's early records (its "running" record, its build) are spooled only; the final
    record's ingest commits them with it, and a read before that ingests them itself."""
    build = BuildRecord(
        build_id="b1",
        tag="crucible/x:abc",
        input_hash="abc",
        purpose="task",
        cache_hit=True,
        seconds=0.01,
        size_bytes=1,
        inputs={},
        log_path=None,
        started_at=T0.isoformat(),
    )
    store.record_build(build, ingest=False)
    store.record_run(make_run("r1", "running"), ingest=False)
    assert len(pending_files(paths.spool_dir())) == 2
    assert store.get_run("r1").status == "running"  # the read ingested both first
    assert store.query("SELECT build_id FROM builds")[1] == [("b1",)]
    assert pending_files(paths.spool_dir()) == []
    store.record_run(make_run("r2", "running"), ingest=False)
    store.record_run(make_run("r2"))  # the final record's ingest takes the early one along
    assert pending_files(paths.spool_dir()) == []
    assert store.query("SELECT status, count(*) FROM runs WHERE run_id = 'r2' GROUP BY ALL")[1] == [("completed", 1)]


def test_a_write_leaves_its_log_until_the_log_outgrows_the_checkpoint_size(store, monkeypatch):
    """A checkpoint rewrites the tables' last row groups at a cost that grows with the store, so
    writes leave DuckDB's log in place and a write turn folds it in only past its size."""
    import engine.store.lock as lock

    wal = store.path.with_name(store.path.name + ".wal")
    store.record_run(make_run("r1"))
    logged = wal.stat().st_size
    assert 0 < logged < lock.WAL_CHECKPOINT_BYTES
    # another process (a fresh DuckDB) reads what sits in the log
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import duckdb; c = duckdb.connect({str(store.path)!r}, read_only=True); "
            "print(c.execute('SELECT run_id FROM runs').fetchall())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert read.stdout.strip() == "[('r1',)]"
    monkeypatch.setattr(lock, "WAL_CHECKPOINT_BYTES", logged)  # the next write takes it past
    store.record_run(make_run("r2"))
    assert not wal.exists() or wal.stat().st_size == 0
    assert sorted(store.query("SELECT run_id FROM runs")[1]) == [("r1",), ("r2",)]


def test_a_checkpoint_writes_no_string_the_slow_way(store, monkeypatch):
    """A checkpoint rewrites the row group its turn appended to; DuckDB 2's dictionary+FSST
    analysis was most of its cost, and ZSTD made a read by id decompress a block."""
    import engine.store.lock as lock

    monkeypatch.setattr(lock, "WAL_CHECKPOINT_BYTES", 0)  # every write turn folds its log in
    for n in range(40):  # strings that repeat, as tasks, agents and specs do
        spec = {"task": {"id": f"t{n % 3}"}, "prompt": "Fix the parser so it reads nested lists. " * 40}
        store.record_run(make_run(f"r{n}", task_id=f"t{n % 3}", spec=spec, seed=n))
    _, rows = store.query(
        "SELECT DISTINCT column_name, compression FROM pragma_storage_info('runs') "
        "WHERE column_name IN ('task_id', 'spec', 'raw_grade', 'diff')"
    )
    slow = {"DICT_FSST", "ZSTD"}
    assert {column for column, _ in rows} == {"task_id", "spec", "raw_grade", "diff"}
    assert not [row for row in rows if row[1] in slow], rows
    assert store.get_run("r7").spec == {
        "task": {"id": "t1"},
        "prompt": "Fix the parser so it reads nested lists. " * 40,
    }


def test_a_locked_store_keeps_the_record_in_the_spool_for_the_next_command(store):
    store.ingest_pending()  # create the file
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(store.path)!r}); print(1, flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        holder.stdout.readline()
        impatient = DuckDBStore(lock_timeout=0.5)
        with pytest.raises(StoreError, match="run r1 is saved in .* the next crucible command ingests it"):
            impatient.record_run(make_run("r1"))
    finally:
        holder.kill()
        holder.wait()
    assert len(pending_files(paths.spool_dir())) == 1
    assert store.get_run("r1") == make_run("r1")


def test_a_corrupt_spool_file_is_set_aside_and_does_not_block_others(store):
    (paths.spool_dir() / "run.bad.1.json").write_text("{not json")
    (paths.spool_dir() / "run.bad2.2.json").write_text(json.dumps({"record_kind": "run", "record_seq": 2}))
    store.write_run_record(make_run("good"), None)
    assert store.ingest_pending() == 1
    assert store.get_run("good") is not None
    rejected = sorted(p.name for p in (paths.spool_dir() / "rejected").iterdir())
    assert rejected == ["run.bad.1.json", "run.bad.1.json.reason.txt", "run.bad2.2.json", "run.bad2.2.json.reason.txt"]


def _record_in_child(store: DuckDBStore, run_id: str) -> None:
    try:
        store.record_run(make_run(run_id))
    except StoreError as exc:
        sys.exit(3 if "forked while its parent had the store open" in str(exc) else 1)


def _fork_recording(store: DuckDBStore, run_id: str):
    child = multiprocessing.get_context("fork").Process(target=_record_in_child, args=(store, run_id))
    child.start()
    return child


@pytest.mark.slow
def test_a_fork_waits_for_another_threads_store_operation_and_the_child_records(store):
    from engine.store.lock import open_store

    store.ingest_pending()
    inside = threading.Event()

    def hold_the_store():
        with open_store(store.path, read_only=False, timeout=10):
            inside.set()
            time.sleep(0.5)

    holder = threading.Thread(target=hold_the_store)
    holder.start()
    inside.wait(10)
    child = _fork_recording(store, "from-child")  # forks only once the other thread is done
    holder.join()
    child.join(60)
    assert child.exitcode == 0
    assert store.get_run("from-child") == make_run("from-child")


def test_a_child_forked_inside_a_store_operation_refuses_and_leaves_its_record_spooled(store):
    from engine.store.lock import open_store

    store.ingest_pending()
    with open_store(store.path, read_only=False, timeout=10):
        child = _fork_recording(store, "from-child")
    child.join(60)
    assert child.exitcode == 3
    assert store.get_run("from-child") == make_run("from-child")  # the parent's next read ingests it


@pytest.mark.slow
def test_threads_of_one_process_read_and_write_the_store_at_once(store):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                store.record_run(make_run(f"t{n}-{i}"))
                store.query("SELECT count(*) FROM steps")
        except BaseException as exc:  # surfaced below; a thread's exception is otherwise lost
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert count(store, "SELECT count(*) FROM runs") == 20
    assert count(store, "SELECT count(*) FROM steps") == 60
