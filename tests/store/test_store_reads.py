"""The DuckDB results store read: the documented example questions one query each, output formats,
an orphan recovered from its run dir, and a reader of another store."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from store_records import make_run

import engine.store.duckdb
from engine.store.duckdb import DuckDBStore
from engine.store.files import pending_files, this_host
from engine.util.tables import format_table, to_csv, to_json


def example_queries() -> dict[str, str]:
    """The example queries of engine/store/duckdb.py's docstring, by their label (so the docs are tested)."""
    blocks = re.findall(r"\n([A-Z][^\n]*)::\n\n((?:    [^\n]*\n)+)", engine.store.duckdb.__doc__)
    return {label: textwrap.dedent(sql).strip() for label, sql in blocks}


def test_the_documented_example_questions_are_one_query_each(store):
    runs = [
        # (run_id, sweep, task, agent, model, status, reward, agent seconds)
        ("a1", "sweep-A", "t1", "ag", "m1", "completed", 1.0, 3.0),
        ("a2", "sweep-A", "t2", "ag", "m1", "completed", 0.0, 5.0),
        ("a3", "sweep-A", "t3", "ag", "m1", "completed", 1.0, 4.0),
        ("a4", "sweep-A", "t1", "ag", "m2", "completed", 0.0, 2.0),
        ("b1", "sweep-B", "t1", "ag", "m1", "completed", 0.0, 3.0),
        ("b2", "sweep-B", "t2", "ag", "m1", "completed", 1.0, 5.0),
        ("b3", "sweep-B", "t3", "ag", "m1", "completed", 1.0, 4.0),
        ("b4", "sweep-B", "t1", "ag", "m2", "error", None, 2.0),
    ]
    for run_id, sweep, task, agent, model, status, reward, agent_s in runs:
        store.record_run(
            make_run(
                run_id,
                status,
                sweep_id=sweep,
                task_id=task,
                agent=agent,
                model=model,
                reward=reward,
                timings={"build": 0.5, "agent": agent_s, "grade": 1.0},
            )
        )
    queries = example_queries()
    assert set(queries) == {"Pass rate per agent and model", "Tasks that flipped between two sweeps", "Slowest stage"}

    _, rows = store.query(queries["Pass rate per agent and model"])
    assert rows == [("ag", "m1", 6, pytest.approx(4 / 6)), ("ag", "m2", 1, 0.0)]
    _, rows = store.query(queries["Tasks that flipped between two sweeps"])
    assert rows == [("t1", "ag", "m1", 1.0, 0.0), ("t2", "ag", "m1", 0.0, 1.0)]
    columns, rows = store.query(queries["Slowest stage"])
    assert columns == ["stage", "runs", "mean_s", "max_s"]
    assert rows == [("agent", 8, 3.5, 5.0), ("grade", 8, 1.0, 1.0), ("build", 8, 0.5, 0.5)]


# ---- output formats (engine/util/tables.py) ----------------------------------------------

ROWS = [("ag", None, 2 / 3, 12, datetime(2025, 1, 2, 3, 4, 5)), ("longer-agent", "m", 1.0, 7, None)]


COLUMNS = ["agent", "model", "pass_rate", "runs", "at"]


def test_format_table_aligns_columns_and_shows_none_empty_and_floats_to_three_decimals():
    assert format_table(COLUMNS, ROWS) == "\n".join(
        [
            "agent         model  pass_rate  runs  at",
            "------------  -----  ---------  ----  -------------------",
            "ag                       0.667    12  2025-01-02T03:04:05",
            "longer-agent  m              1     7",
            "(2 rows)",
        ]
    )


def test_format_table_keeps_multiline_cells_on_one_line_and_cuts_long_ones():
    text = format_table(["diff"], [("a\nb",), ("x" * 100,)], max_cell=10)
    assert text.splitlines()[2:4] == ["a\\nb", "xxxxxxxxx…"]
    assert format_table(["n"], []) == "n\n-\n(0 rows)"


def test_to_csv_quotes_and_keeps_full_precision():
    assert to_csv(["a", "b", "c"], [("x,y", None, 2 / 3), ('say "hi"', [1, "z"], Decimal("1.5"))]) == (
        'a,b,c\n"x,y",,0.6666666666666666\n"say ""hi""","[1, ""z""]",1.5\n'
    )


def test_to_json_is_a_list_of_objects_with_iso_timestamps():
    assert json.loads(to_json(COLUMNS, ROWS)) == [
        {"agent": "ag", "model": None, "pass_rate": 2 / 3, "runs": 12, "at": "2025-01-02T03:04:05"},
        {"agent": "longer-agent", "model": "m", "pass_rate": 1.0, "runs": 7, "at": None},
    ]
    assert json.loads(to_json(["x", "x"], [(1, float("nan"))])) == [{"x": 1, "x_2": None}]


def test_an_orphan_whose_run_dir_holds_its_final_record_is_recovered_not_marked_dead(store, tmp_path):
    """Killed between the two writes of its final record (run directory, then spool): the store
    still says "running", the run directory says how the run ended, and that ending wins."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    run_dir = tmp_path / "runs" / "finished-then-killed"
    run_dir.mkdir(parents=True)
    running = make_run(
        "finished-then-killed",
        "running",
        owner_pid=dead.pid,
        owner_host=this_host(),
        started_at=datetime.now(UTC).isoformat(),
        run_dir=str(run_dir),
    )
    store.record_run(running)
    final = make_run(
        "finished-then-killed",
        "completed",
        owner_pid=dead.pid,
        owner_host=this_host(),
        run_dir=str(run_dir),
        reward=1.0,
    )
    document = store._document("run", final.to_dict(), 10**12)  # what write_run_record puts in the run dir
    (run_dir / "record.json").write_text(json.dumps(document))

    assert store.mark_orphaned_runs() == []
    stored = store.get_run("finished-then-killed")
    assert (stored.status, stored.reward, stored.error) == ("completed", 1.0, None)
    assert json.loads((run_dir / "record.json").read_text())["status"] == "completed"


def test_a_reader_of_another_store_never_ingests_this_stores_waiting_records(store, tmp_path):
    """Records wait in their own store's spool: a reader of another store (``query --store B``,
    which ingests first) leaves them for the store they were written for. One shared spool
    committed them into whichever store was read first."""
    store.write_run_record(make_run("waits-for-a"), None)  # spooled only, as a running sweep leaves it
    other = DuckDBStore(tmp_path / "other.duckdb").validate()
    assert other.spool != store.spool
    other.ingest_pending()
    assert other.get_run("waits-for-a") is None
    assert len(pending_files(store.spool)) == 1
    store.ingest_pending()
    assert store.get_run("waits-for-a") is not None and pending_files(store.spool) == []
