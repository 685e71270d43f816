"""The store's tables (and bringing a store file to the current schema), and the conversions
between records and their rows.

One row in ``runs`` per run id (every scalar of ``RunRecord``; spec, raw grade and
timings as JSON; violations and warnings as lists), child rows in ``steps``,
``subscores``, ``test_results`` and ``stage_timings``, one row in ``builds`` per build id,
one in ``terminals`` per terminal of a run (a coding CLI's TUI in tmux) with its
``terminal_snapshots``, and one in ``sweep_runs`` per earlier run a sweep reused instead of
running it again (``resume=true``): a run belongs to the sweep it ran in (``runs.sweep_id``)
and to every sweep that reused it, so a resumed sweep's report covers the whole sweep.
Timestamps are stored as UTC ``TIMESTAMP`` and come back as ISO 8601 strings with ``+00:00``.

``test_results`` holds a graded run's named tests, one row each, so the tests that flip
between two runs (a task's baseline and golden, say) are one self-join::

    SELECT a.name, a.status AS status_a, b.status AS status_b
    FROM test_results a JOIN test_results b USING (name)
    WHERE a.run_id = 'RUN-A' AND b.run_id = 'RUN-B' AND a.status <> b.status
    ORDER BY a.name
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.errors import StoreError
from engine.models import BuildRecord, RunRecord, Step, TestResult
from engine.store.lock import duckdb

SCHEMA_VERSION = 6
"""1: the first schema. 2: ``test_results`` added; a version-1 store gains the table from the
DDL's IF NOT EXISTS (its runs have no test rows, as their records had no tests) and is
marked 2, so that an older crucible, which would drop the tests of what it ingests, stops.
3: ``runs.final_answer`` added (``UPGRADES``: older runs keep NULL, as they stored none).
4: ``terminals`` and ``terminal_snapshots`` added (engine/store/terminals.py).
5: ``sweep_runs`` added (the runs a ``resume=true`` sweep reused; older sweeps linked none).
6: ``runs.infrastructure``, ``runs.host`` and ``runs.retry_of`` added (older runs: false and NULL,
as none was labelled, placed on another host or retried)."""

DDL = [
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id VARCHAR PRIMARY KEY, spec_hash VARCHAR NOT NULL, status VARCHAR NOT NULL,
        task_id VARCHAR, agent VARCHAR, model VARCHAR, flavor VARCHAR, runtime VARCHAR,
        integrity_requested VARCHAR, integrity_obtained VARCHAR, attempt INTEGER, seed BIGINT,
        sweep_id VARCHAR, started_at TIMESTAMP, ended_at TIMESTAMP, wall_seconds DOUBLE,
        reward DOUBLE, stop_reason VARCHAR, error_phase VARCHAR, error VARCHAR, run_dir VARCHAR,
        image_tag VARCHAR, from_cache BOOLEAN, owner_pid BIGINT, owner_host VARCHAR,
        spec JSON, raw_grade JSON, timings JSON, diff TEXT,
        violations VARCHAR[], warnings VARCHAR[],
        record_seq BIGINT NOT NULL, ingested_at TIMESTAMP, final_answer TEXT,
        infrastructure BOOLEAN DEFAULT false, host VARCHAR, retry_of VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS steps (
        run_id VARCHAR NOT NULL, position INTEGER NOT NULL, idx INTEGER, kind VARCHAR,
        capability VARCHAR, tool VARCHAR, arguments JSON, result VARCHAR, is_error BOOLEAN,
        started_at TIMESTAMP, seconds DOUBLE, tokens_in BIGINT, tokens_out BIGINT,
        cost_usd DOUBLE, note VARCHAR)""",
    "CREATE TABLE IF NOT EXISTS subscores (run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, value DOUBLE)",
    "CREATE TABLE IF NOT EXISTS test_results (run_id VARCHAR NOT NULL, name VARCHAR NOT NULL, status VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS stage_timings (run_id VARCHAR NOT NULL, stage VARCHAR NOT NULL, seconds DOUBLE)",
    """CREATE TABLE IF NOT EXISTS builds (
        build_id VARCHAR PRIMARY KEY, tag VARCHAR, input_hash VARCHAR, purpose VARCHAR,
        cache_hit BOOLEAN, seconds DOUBLE, size_bytes BIGINT, inputs JSON, log_path VARCHAR,
        started_at TIMESTAMP, error VARCHAR, record_seq BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS terminals (
        terminal_id VARCHAR PRIMARY KEY, run_id VARCHAR NOT NULL, owner VARCHAR, tmux_server VARCHAR,
        tmux_session VARCHAR, state VARCHAR NOT NULL, started_at TIMESTAMP, cwd VARCHAR, width INTEGER,
        height INTEGER, ended_at TIMESTAMP, end_reason VARCHAR, closes_at TIMESTAMP, closed_at TIMESTAMP,
        closed_by VARCHAR, last_snapshot_at TIMESTAMP, record_seq BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS terminal_snapshots (
        terminal_id VARCHAR NOT NULL, seq BIGINT NOT NULL, taken_at TIMESTAMP, final BOOLEAN, text TEXT)""",
    """CREATE TABLE IF NOT EXISTS sweep_runs (
        sweep_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, reused BOOLEAN NOT NULL, linked_at TIMESTAMP,
        record_seq BIGINT NOT NULL)""",
]

UPGRADES = [
    # A table an older store lacks comes from the DDL's IF NOT EXISTS; a column needs this.
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS final_answer TEXT",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS infrastructure BOOLEAN DEFAULT false",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS host VARCHAR",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS retry_of VARCHAR",
]
"""Statements that bring an older store's existing tables up to ``DDL`` (each idempotent)."""

RUN_COLUMNS = (
    "run_id",
    "spec_hash",
    "status",
    "task_id",
    "agent",
    "model",
    "flavor",
    "runtime",
    "integrity_requested",
    "integrity_obtained",
    "attempt",
    "seed",
    "sweep_id",
    "started_at",
    "ended_at",
    "wall_seconds",
    "reward",
    "stop_reason",
    "error_phase",
    "error",
    "run_dir",
    "image_tag",
    "from_cache",
    "owner_pid",
    "owner_host",
    "spec",
    "raw_grade",
    "timings",
    "diff",
    "violations",
    "warnings",
    "record_seq",
    "ingested_at",
    "final_answer",
    "infrastructure",
    "host",
    "retry_of",
)
TEST_COLUMNS = ("run_id", "name", "status")
STEP_COLUMNS = ("run_id", "position") + tuple(f.name for f in dataclasses.fields(Step))
BUILD_COLUMNS = tuple(f.name for f in dataclasses.fields(BuildRecord)) + ("record_seq",)
SWEEP_RUN_COLUMNS = ("sweep_id", "run_id", "reused", "linked_at", "record_seq")
_JSON_RUN_FIELDS = ("spec", "raw_grade", "timings")


_SCHEMA_READY: dict[tuple[str, int, int], tuple[int, int]] = {}
"""Store files (path, device, inode) whose schema this process (pid) has seen at a version: a
sweep opens its store several times before it starts, and each check is a write turn. Per
process, not per object: a forked child checks again (its parent's check says nothing about
the file the child sees); per file, not path: a store removed and made again is checked."""


def forget_stores_seen() -> None:
    """Check every store file again at its next open, as a new process would (a warm reader)."""
    _SCHEMA_READY.clear()


def seen_current(path: Path) -> bool:
    """Whether this process has seen the store file at ``path`` at ``SCHEMA_VERSION`` already
    (``make_current`` then does nothing)."""
    file = _file_identity(path)
    return file is not None and _SCHEMA_READY.get(file) == (os.getpid(), SCHEMA_VERSION)


def read_current(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether the store ``con`` has attached (the file at ``path``) is at ``SCHEMA_VERSION``, read
    in a turn the caller holds: a read turn will do, since the version is written only after
    every table (``make_current``). If so, ``make_current`` has nothing left to do in this
    process; if not, it has (in a write turn of its own)."""
    if _schema_version(con) != SCHEMA_VERSION:
        return False
    if (file := _file_identity(path)) is not None:
        _SCHEMA_READY[file] = (os.getpid(), SCHEMA_VERSION)
    return True


def make_current(path: Path, connect: Callable[[], AbstractContextManager[Any]], *, make_dir: bool) -> None:
    """Bring the store file at ``path`` to ``SCHEMA_VERSION`` (created, or upgraded) in one
    write turn (``connect``), unless this process has seen it current already. ``make_dir``:
    create its directory first (the default store's). Raises StoreError for a store newer
    than this crucible."""
    file = _file_identity(path)
    if file is not None and _SCHEMA_READY.get(file) == (os.getpid(), SCHEMA_VERSION):
        return
    if make_dir:
        path.parent.mkdir(parents=True, exist_ok=True)
    with connect() as con:
        if _schema_version(con) != SCHEMA_VERSION:
            _create_or_upgrade(con, path)
            # Into the file now, not the log: every later ATTACH would replay the DDL.
            con.execute("CHECKPOINT")
        # Every table is there: the version is written only after the DDL and upgrades ran.
        # A new table comes with a SCHEMA_VERSION bump, as a new column does.
    if (file := _file_identity(path)) is not None:
        _SCHEMA_READY[file] = (os.getpid(), SCHEMA_VERSION)


def _file_identity(path: Path) -> tuple[str, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return str(path), found.st_dev, found.st_ino


def _create_or_upgrade(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    for statement in DDL:
        con.execute(statement)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
    elif int(row[0]) > SCHEMA_VERSION:
        raise StoreError(
            f"store {path} has schema version {row[0]}, newer than this crucible's {SCHEMA_VERSION}; upgrade crucible"
        )
    elif int(row[0]) < SCHEMA_VERSION:
        # New tables the DDL above has just created; new columns of old tables here.
        for statement in UPGRADES:
            con.execute(statement)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])


def _schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The store's recorded schema version; None for a new file (no ``meta`` table yet) or an
    unreadable value."""
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.CatalogException:
        return None
    try:
        return int(row[0]) if row is not None else None
    except (TypeError, ValueError):
        return None


def insert_sql(table: str, columns: tuple[str, ...], rows: int = 1) -> str:
    """An INSERT of ``rows`` rows of positional parameters."""
    one = f"({', '.join('?' * len(columns))})"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * rows)}"


def to_db_ts(text: str | None) -> datetime | None:
    """ISO 8601 text -> naive UTC datetime (naive input is taken to be UTC already)."""
    if text is None or text == "":
        return None
    value = datetime.fromisoformat(text)
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def from_db_ts(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=UTC).isoformat()


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@dataclasses.dataclass
class RunRows:
    """Everything one run record becomes in the database."""

    run_id: str
    status: str
    seq: int
    run: tuple[Any, ...]
    steps: list[tuple[Any, ...]]
    subscores: list[tuple[Any, ...]]
    tests: list[tuple[Any, ...]]
    timings: list[tuple[Any, ...]]


def run_rows(record: RunRecord, seq: int) -> RunRows:
    """Rows for one record. Raises ValueError/TypeError on data that cannot be stored."""
    started, ended = to_db_ts(record.started_at), to_db_ts(record.ended_at)
    values = dataclasses.asdict(record)
    values.update(
        started_at=started,
        ended_at=ended,
        wall_seconds=(ended - started).total_seconds() if started and ended else None,
        reward=None if record.reward is None else float(record.reward),
        violations=[str(v) for v in record.violations],
        warnings=[str(w) for w in record.warnings],
        record_seq=seq,
        ingested_at=datetime.now(UTC).replace(tzinfo=None),
        **{name: _json(getattr(record, name)) for name in _JSON_RUN_FIELDS},
    )
    steps = [
        (
            record.run_id,
            pos,
            s.idx,
            s.kind,
            s.capability,
            s.tool,
            _json(s.arguments),
            s.result,
            bool(s.is_error),
            to_db_ts(s.started_at),
            float(s.seconds),
            s.tokens_in,
            s.tokens_out,
            s.cost_usd,
            s.note,
        )
        for pos, s in enumerate(record.steps)
    ]
    return RunRows(
        run_id=record.run_id,
        status=record.status,
        seq=seq,
        run=tuple(values[c] for c in RUN_COLUMNS),
        steps=steps,
        subscores=[(record.run_id, str(k), float(v)) for k, v in record.subscores.items()],
        tests=[(record.run_id, str(t.name), str(t.status)) for t in record.tests],
        timings=[(record.run_id, str(k), float(v)) for k, v in record.timings.items()],
    )


def build_row(record: BuildRecord, seq: int) -> tuple[Any, ...]:
    values = dataclasses.asdict(record)
    values.update(started_at=to_db_ts(record.started_at), inputs=_json(record.inputs), record_seq=seq)
    return tuple(values[c] for c in BUILD_COLUMNS)


def sweep_run_row(data: dict[str, Any], seq: int) -> tuple[Any, ...]:
    """A ``sweep_runs`` row from its spool document. Raises KeyError/TypeError/ValueError."""
    sweep_id, run_id = data["sweep_id"], data["run_id"]
    if not (isinstance(sweep_id, str) and sweep_id and isinstance(run_id, str) and run_id):
        raise ValueError("a sweep link needs a sweep_id and a run_id")
    return sweep_id, run_id, bool(data.get("reused", True)), to_db_ts(data.get("linked_at")), seq


def build_from_dict(data: dict[str, Any]) -> BuildRecord:
    names = {f.name for f in dataclasses.fields(BuildRecord)}
    return BuildRecord(**{k: v for k, v in data.items() if k in names})


def record_from_rows(
    run: dict[str, Any], steps: list[dict[str, Any]], subscores: list[tuple[Any, ...]], tests: list[tuple[Any, ...]]
) -> RunRecord:
    """The inverse of ``run_rows``: a RunRecord from its ``runs`` row and child rows (``tests``:
    ``(name, status)`` pairs, in the order the record gets them)."""
    names = {f.name for f in dataclasses.fields(RunRecord)}
    data = {k: v for k, v in run.items() if k in names}
    for name in _JSON_RUN_FIELDS:
        data[name] = json.loads(run[name]) if run[name] is not None else {}
    data["started_at"] = from_db_ts(run["started_at"])
    data["ended_at"] = from_db_ts(run["ended_at"])
    data["violations"] = list(run["violations"] or [])
    data["warnings"] = list(run["warnings"] or [])
    data["subscores"] = {name: value for name, value in subscores}
    data["tests"] = [TestResult(name, status) for name, status in tests]
    data["steps"] = [_step_from_row(s) for s in steps]
    return RunRecord(**data)


def _step_from_row(row: dict[str, Any]) -> Step:
    names = {f.name for f in dataclasses.fields(Step)}
    data = {k: v for k, v in row.items() if k in names}
    data["arguments"] = json.loads(row["arguments"]) if row["arguments"] is not None else None
    data["started_at"] = from_db_ts(row["started_at"])
    return Step(**data)
