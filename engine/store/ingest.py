"""Turning spool files into committed rows: load, pick the winning version, upsert.

Any number of processes may ingest the same spool at once. Correctness rests on two
rules: a record replaces the stored one only if it ranks higher — (final status over
"running", then newer sequence) — and child rows (steps, subscores, test results, stage
timings) are deleted and re-inserted in the same transaction as their run row. A sweep's
link to a run it reused (``sweep_runs``) is keyed by the pair and written once.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from engine.errors import StoreError
from engine.models import RunRecord
from engine.store.files import quarantine
from engine.store.lock import duckdb
from engine.store.schema import (
    BUILD_COLUMNS,
    RUN_COLUMNS,
    STEP_COLUMNS,
    SWEEP_RUN_COLUMNS,
    TEST_COLUMNS,
    RunRows,
    build_from_dict,
    build_row,
    insert_sql,
    run_rows,
    sweep_run_row,
)
from engine.store.terminals import Unmatched, apply_events, check_event

# Errors caused by a record's content: retrying cannot help, so the record is set aside.
# Anything else (I/O, out of memory) keeps the spool file for the next attempt.
_DATA_ERRORS = (
    duckdb.ConversionException,
    duckdb.ConstraintException,
    duckdb.InvalidInputException,
    duckdb.OutOfRangeException,
    duckdb.TypeMismatchException,
    Unmatched,
)


ROWS_PER_INSERT = 200


@dataclasses.dataclass
class IngestItem:
    path: Path
    kind: str  # "run" | "build" | "terminal" | "sweep_run"
    key: str
    rank: tuple[int, int]
    """(1 for a final status else 0, record_seq): the higher rank wins."""
    run: RunRows | None = None
    build: tuple[Any, ...] | None = None
    """A ``builds`` row, or (kind "sweep_run") a ``sweep_runs`` row."""
    terminal: dict[str, Any] | None = None
    """A terminal event (engine/store/terminals.py), applied in sequence order, never deduplicated."""


def status_rank(status: str) -> int:
    return 0 if status == "running" else 1


def load_spool_file(path: Path) -> IngestItem | None:
    """The file's record, converted to rows; None if it is gone (already ingested) or bad.

    A bad file is moved to ``spool/rejected/`` with the reason, so it cannot block the rest.
    """
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        quarantine(path, f"unreadable: {exc}")
        return None
    try:
        seq = int(data["record_seq"])
        if data.get("record_kind") == "terminal":
            check_event(data)
            return IngestItem(path, "terminal", str(data.get("run_id") or ""), (1, seq), terminal=data)
        if data.get("record_kind") == "sweep_run":
            row = sweep_run_row(data, seq)
            return IngestItem(path, "sweep_run", f"{row[0]}/{row[1]}", (1, seq), build=row)
        if data.get("record_kind") == "build":
            record = build_from_dict(data)
            return IngestItem(path, "build", record.build_id, (1, seq), build=build_row(record, seq))
        run = RunRecord.from_dict(data)
        rows = run_rows(run, seq)
        return IngestItem(path, "run", run.run_id, (status_rank(run.status), seq), run=rows)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        quarantine(path, f"not a valid record: {type(exc).__name__}: {exc}")
        return None


def apply_items(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> list[tuple[IngestItem, str]]:
    """Commit ``items`` (one transaction); returns the ones rejected for bad content.

    If the batch fails on content, each item is retried alone so one bad record does not
    hold back the others.
    """
    try:
        _apply_batch(con, items)
        return []
    except _DATA_ERRORS as exc:
        if len(items) == 1:
            return [(items[0], _first_line(exc))]
    rejected = []
    for item in items:
        try:
            _apply_batch(con, [item])
        except _DATA_ERRORS as exc:
            rejected.append((item, _first_line(exc)))
    return rejected


def _apply_batch(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> None:
    runs = _winners([i for i in items if i.kind == "run"])
    builds = _winners([i for i in items if i.kind == "build"])
    con.execute("BEGIN TRANSACTION")
    try:
        _upsert_runs(con, _outranking(con, "runs", "run_id", "status", runs))
        _upsert_builds(con, _outranking(con, "builds", "build_id", None, builds))
        _link_sweep_runs(con, list(_winners([i for i in items if i.kind == "sweep_run"]).values()))
        apply_events(con, [i.terminal for i in items if i.terminal is not None])
        con.execute("COMMIT")
    except _DATA_ERRORS:
        con.execute("ROLLBACK")
        raise
    except duckdb.Error as exc:
        con.execute("ROLLBACK")
        raise StoreError(f"ingest failed: {_first_line(exc)}") from exc


def _winners(items: list[IngestItem]) -> dict[str, IngestItem]:
    best: dict[str, IngestItem] = {}
    for item in items:
        if item.key not in best or item.rank > best[item.key].rank:
            best[item.key] = item
    return best


def _outranking(
    con: duckdb.DuckDBPyConnection, table: str, key: str, status_col: str | None, items: dict[str, IngestItem]
) -> list[IngestItem]:
    """The items that rank above what is stored for their key (or have nothing stored)."""
    if not items:
        return []
    status = status_col or "'final'"
    stored = {
        k: (status_rank(s), seq)
        for k, s, seq in con.execute(
            f"SELECT {key}, {status}, record_seq FROM {table} WHERE list_contains(?, {key})", [list(items)]
        ).fetchall()
    }
    return [i for k, i in items.items() if k not in stored or i.rank > stored[k]]


def _upsert_runs(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> None:
    if not items:
        return
    ids = [i.key for i in items]
    for table in ("runs", "steps", "subscores", "test_results", "stage_timings"):
        con.execute(f"DELETE FROM {table} WHERE list_contains(?, run_id)", [ids])
    runs = [i.run for i in items if i.run is not None]
    assert len(runs) == len(items)  # items of kind "run" all carry their rows
    _insert_many(con, "runs", RUN_COLUMNS, [r.run for r in runs])
    _insert_many(con, "steps", STEP_COLUMNS, [row for r in runs for row in r.steps])
    _insert_many(con, "subscores", ("run_id", "name", "value"), [s for r in runs for s in r.subscores])
    _insert_many(con, "test_results", TEST_COLUMNS, [t for r in runs for t in r.tests])
    _insert_many(con, "stage_timings", ("run_id", "stage", "seconds"), [t for r in runs for t in r.timings])


def _upsert_builds(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> None:
    if items:
        con.execute("DELETE FROM builds WHERE list_contains(?, build_id)", [[i.key for i in items]])
        builds = [i.build for i in items if i.build is not None]
        assert len(builds) == len(items)  # items of kind "build" all carry their row
        _insert_many(con, "builds", BUILD_COLUMNS, builds)


def _link_sweep_runs(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> None:
    """Each (sweep, run) pair once: a link spooled twice (a retried ingest) changes nothing."""
    rows = [i.build for i in items if i.build is not None]
    if not rows:
        return
    stored = set(
        con.execute(
            "SELECT sweep_id, run_id FROM sweep_runs WHERE list_contains(?, sweep_id || '/' || run_id)",
            [[f"{r[0]}/{r[1]}" for r in rows]],
        ).fetchall()
    )
    _insert_many(con, "sweep_runs", SWEEP_RUN_COLUMNS, [r for r in rows if (r[0], r[1]) not in stored])


def _insert_many(
    con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    # Multi-row VALUES: ~4x cheaper than executemany, which runs one statement per row.
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        con.execute(insert_sql(table, columns, len(chunk)), [v for row in chunk for v in row])


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
