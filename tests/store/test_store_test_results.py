"""Named test results in the store: one set of rows per run, loaded back in order, queryable
across runs, in a store made before the table existed, and in ``crucible show``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

import engine.store.schema
from engine.errors import StoreError
from engine.models import RunRecord, Step, TestResult
from engine.store.duckdb import DuckDBStore
from engine.store.schema import DDL, RUN_COLUMNS, SCHEMA_VERSION, STEP_COLUMNS, insert_sql, run_rows

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

BASELINE = [  # the task's tests on the unfixed code: the bug's tests fail
    TestResult("tests/test_api.py::test_create", "PASSED"),
    TestResult("tests/test_api.py::test_page_last", "FAILED"),
    TestResult("tests/test_api.py::test_page_size[0]", "ERROR"),
    TestResult("tests/test_api.py::test_slow", "SKIPPED"),
    TestResult("tests/test_util.py::test_clamp", "PASSED"),
]
GOLDEN = [  # the same tests on the golden patch: the bug's tests pass, nothing else moves
    TestResult("tests/test_api.py::test_create", "PASSED"),
    TestResult("tests/test_api.py::test_page_last", "PASSED"),
    TestResult("tests/test_api.py::test_page_size[0]", "PASSED"),
    TestResult("tests/test_api.py::test_slow", "SKIPPED"),
    TestResult("tests/test_util.py::test_clamp", "PASSED"),
]


@pytest.fixture
def store(tmp_path, monkeypatch) -> DuckDBStore:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))  # the spool, never the session's
    return DuckDBStore(tmp_path / "store.duckdb")


def make_run(run_id: str, status: str = "completed", tests: list[TestResult] | None = None) -> RunRecord:
    final = status != "running"
    return RunRecord(
        run_id=run_id,
        spec_hash=f"hash-{run_id}",
        spec={"task": {"id": "t1"}},
        status=status,
        task_id="t1",
        agent="integration_test",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="vault",
        integrity_obtained="vault" if final else None,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=T0.isoformat(),
        ended_at=(T0 + timedelta(seconds=3)).isoformat() if final else None,
        reward=1.0 if final else None,
        subscores={"tests": 1.0} if final else {},
        raw_grade={"exit_code": 0} if final else {},
        tests=list(tests or []),
        timings={"grade": 1.5} if final else {},
        steps=[Step(idx=0, kind="tool_call", capability="mcp", tool="bash", arguments={"command": "ls"})],
    )


def count(store: DuckDBStore, sql: str) -> int:
    return store.query(sql)[1][0][0]


def test_a_runs_tests_round_trip_through_the_store_sorted_by_name(store):
    record = make_run("r1", tests=GOLDEN)
    store.record_run(make_run("r1", tests=list(reversed(GOLDEN))))  # a grader's report order

    assert store.get_run("r1") == record
    assert store.get_runs(["r1"])["r1"].tests == GOLDEN
    _, rows = store.query("SELECT name, status FROM test_results WHERE run_id = 'r1' ORDER BY name")
    assert rows == [(t.name, t.status) for t in GOLDEN]


def test_a_run_without_tests_has_no_rows_and_loads_with_none(store):
    store.record_run(make_run("r1"))
    assert store.get_run("r1").tests == []
    assert count(store, "SELECT count(*) FROM test_results") == 0


def test_the_completed_record_replaces_the_running_ones_tests_with_one_set(store):
    store.record_run(make_run("r1", "running"))
    store.record_run(make_run("r1", tests=BASELINE))

    assert store.get_run("r1").tests == BASELINE
    assert count(store, "SELECT count(*) FROM test_results") == len(BASELINE)


def test_ingesting_the_same_record_again_does_not_duplicate_its_tests(store, tmp_path):
    spool_file = store.write_run_record(make_run("r1", tests=BASELINE), None)
    kept = tmp_path / "copy.json"
    shutil.copy(spool_file, kept)
    assert store.ingest_pending() == 1
    shutil.copy(kept, spool_file)  # the same file again, as a second ingester would see it
    store.write_run_record(make_run("r1", tests=BASELINE), None)  # and the same record written again
    assert store.ingest_pending() == 2

    assert count(store, "SELECT count(*) FROM test_results") == len(BASELINE)
    assert store.get_run("r1").tests == BASELINE


def test_a_newer_record_with_other_tests_replaces_them_all(store):
    store.record_run(make_run("r1", tests=BASELINE))
    store.record_run(make_run("r1", tests=GOLDEN[:2]))
    assert store.get_run("r1").tests == GOLDEN[:2]
    assert count(store, "SELECT count(*) FROM test_results") == 2


def test_which_tests_flip_between_the_baseline_and_the_golden_run_is_one_query(store):
    store.record_run(make_run("baseline", tests=BASELINE))
    store.record_run(make_run("golden", tests=GOLDEN))
    store.record_run(make_run("other", tests=[TestResult("tests/test_util.py::test_clamp", "FAILED")]))

    # The query engine/store/schema.py's docstring gives for this question.
    [documented] = re.findall(r"::\n\n((?:    [^\n]*\n)+)", engine.store.schema.__doc__)
    sql = textwrap.dedent(documented).replace("RUN-A", "baseline").replace("RUN-B", "golden")
    columns, rows = store.query(sql)

    assert columns == ["name", "status_a", "status_b"]
    assert rows == [
        ("tests/test_api.py::test_page_last", "FAILED", "PASSED"),
        ("tests/test_api.py::test_page_size[0]", "ERROR", "PASSED"),
    ]


def _old_store(path: Path, record: RunRecord) -> None:
    """A store as schema version 1 made it: no test_results table, one run with its child rows."""
    con = duckdb.connect(str(path))
    try:
        for statement in DDL:
            if "test_results" not in statement:
                con.execute(statement)
        con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        rows = run_rows(record, 1)
        con.execute(insert_sql("runs", RUN_COLUMNS), list(rows.run))
        for step in rows.steps:
            con.execute(insert_sql("steps", STEP_COLUMNS), list(step))
        for subscore in rows.subscores:
            con.execute(insert_sql("subscores", ("run_id", "name", "value")), list(subscore))
        for timing in rows.timings:
            con.execute(insert_sql("stage_timings", ("run_id", "stage", "seconds")), list(timing))
    finally:
        con.close()


def test_a_store_made_before_test_results_opens_keeps_its_runs_and_takes_tests(store):
    old = make_run("old")
    _old_store(store.path, old)

    assert store.get_run("old") == old
    assert store.query("SELECT value FROM meta WHERE key = 'schema_version'")[1] == [(str(SCHEMA_VERSION),)]
    assert count(store, "SELECT count(*) FROM test_results") == 0

    store.record_run(make_run("new", tests=BASELINE))
    assert store.get_run("new").tests == BASELINE
    assert store.get_run("old") == old


def test_an_older_crucible_refuses_a_store_that_holds_test_results(store, monkeypatch):
    store.record_run(make_run("r1", tests=BASELINE))
    # The version before test_results: it would drop the tests of every record it ingests.
    monkeypatch.setattr(engine.store.schema, "SCHEMA_VERSION", SCHEMA_VERSION - 1)
    with pytest.raises(StoreError, match="newer than this crucible's"):
        DuckDBStore(store.path).validate()


def test_show_counts_the_tests_and_names_the_ones_that_did_not_pass(store, tmp_path):
    store.record_run(make_run("r1", tests=BASELINE))
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
    lines = proc.stdout.splitlines()
    assert "tests      5: 2 PASSED, 1 FAILED, 1 SKIPPED, 1 ERROR" in lines
    shown = [line.split() for line in lines if line.startswith("  ") and "tests/test_" in line]
    assert shown == [
        ["FAILED", "tests/test_api.py::test_page_last"],
        ["ERROR", "tests/test_api.py::test_page_size[0]"],
        ["SKIPPED", "tests/test_api.py::test_slow"],
    ]


def test_show_lists_at_most_twenty_tests_that_did_not_pass(store, tmp_path, capsys, monkeypatch):
    from engine.cli.main import main

    failing = [TestResult(f"tests/test_many.py::test_{i:02d}", "FAILED") for i in range(25)]
    store.record_run(make_run("r1", tests=[TestResult("tests/test_ok.py::test_ok", "PASSED"), *failing]))
    monkeypatch.setenv("CRUCIBLE_STORE", str(store.path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")

    assert main(["show", "r1"]) == 0

    out = capsys.readouterr().out
    assert "tests      26: 1 PASSED, 25 FAILED" in out
    assert "tests/test_many.py::test_19" in out and "tests/test_many.py::test_20" not in out
    assert "  ... and 5 more that did not pass" in out
