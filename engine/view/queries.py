"""The viewer's read-only SQL: every page is one short read of the store, opened per request.

Nothing here writes, ingests the spool or holds the file: each read takes a shared turn at the
store (``engine.store.lock.open_store``, which waits and retries while a sweep's ingest holds
it) and lets go when the page has its rows, so a running sweep is never blocked and its new
runs appear on the next request. Long texts (a 5 MB tool output, a huge diff) are cut in SQL,
so a page never carries more than ``SHOWN_CHARS`` of any one of them; the whole is a link.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.models import RUN_STATUSES
from engine.store.lock import duckdb, open_store
from engine.store.schema import from_db_ts

PAGE_SIZE = 50
SHOWN_CHARS = 20_000
"""Characters of a tool call's arguments or output, or of a diff, shown on a run page."""
READ_TIMEOUT_S = 15.0
"""How long a page waits for its turn while a sweep's ingest holds the store."""
MAX_FILES = 200
STAGE_ORDER = ("build", "provision", "setup_ahead", "setup", "agent", "capture", "grade", "teardown")


class ViewError(UserError):
    """A request the viewer cannot answer: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class ReadStore:
    """The store at ``path``, read-only and never held. ``query`` is what ``engine.report``
    calls, so the sweep pages compute their numbers with ``crucible report``'s own code."""

    def __init__(self, path: Path, timeout: float = READ_TIMEOUT_S):
        self.path, self.timeout = Path(path), timeout

    @contextmanager
    def connect(self) -> Iterator[Any]:
        with open_store(self.path, read_only=True, timeout=self.timeout) as con:
            yield con

    def query(self, sql: str, params: list[Any] | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.connect() as con:
            try:
                cursor = con.execute(sql, params or [])
                rows = cursor.fetchall()
            except duckdb.Error as exc:
                raise UserError(f"query error: {(str(exc).splitlines() or ['?'])[0]}") from exc
            return [d[0] for d in cursor.description or []], rows

    def dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        columns, rows = self.query(sql, params)
        return [dict(zip(columns, row, strict=True)) for row in rows]


# ---------------------------------------------------------------- the runs table

FILTER_COLUMNS = {
    "sweep": "sweep_id",
    "agent": "agent",
    "model": "coalesce(model, '-')",
    "task": "task_id",
    "status": "status",
    "integrity": "coalesce(integrity_obtained, '-')",
    "flavor": "flavor",
}
"""Filter name -> the runs column it matches exactly ("-" selects runs without a value)."""


@dataclass(frozen=True)
class RunFilters:
    sweep: str = ""
    agent: str = ""
    model: str = ""
    task: str = ""
    status: str = ""
    integrity: str = ""
    flavor: str = ""
    since: str = ""  # YYYY-MM-DD, inclusive
    until: str = ""  # YYYY-MM-DD, inclusive
    q: str = ""  # text in the prompt, a tool call's arguments or a tool output

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> RunFilters:
        """Filters from a query string; ViewError 400 naming a value that cannot be one."""
        names = {f.name for f in fields(cls)}
        values = {k: str(params.get(k, "")).strip() for k in names}
        if values["status"] and values["status"] not in RUN_STATUSES:
            raise ViewError(400, f"status={values['status']!r}: not a run status ({', '.join(RUN_STATUSES)})")
        for name in ("since", "until"):
            if values[name]:
                try:
                    date.fromisoformat(values[name])
                except ValueError:
                    raise ViewError(400, f"{name}={values[name]!r}: give a date as YYYY-MM-DD") from None
        return cls(**values)

    def where(self) -> tuple[str, list[str]]:
        clauses, params = [], []
        if self.sweep:  # a sweep's runs: those it ran and those it reused (resume=true), as the report counts
            clauses.append("(sweep_id = ? OR run_id IN (SELECT run_id FROM sweep_runs WHERE sweep_id = ?))")
            params += [self.sweep, self.sweep]
        for name, column in FILTER_COLUMNS.items():
            if name != "sweep" and (value := getattr(self, name)):
                clauses.append(f"{column} = ?")
                params.append(value)
        if self.since:
            clauses.append("started_at >= ?::DATE")
            params.append(self.since)
        if self.until:
            clauses.append("started_at < ?::DATE")
            params.append((date.fromisoformat(self.until) + timedelta(days=1)).isoformat())
        if self.q:
            clauses.append(
                "(strpos(lower(json_extract_string(spec, '$.task.prompt')), ?) > 0 OR run_id IN ("
                "SELECT run_id FROM steps WHERE strpos(lower(result), ?) > 0 "
                "OR strpos(lower(CAST(arguments AS VARCHAR)), ?) > 0))"
            )
            params += [self.q.lower()] * 3
        return " AND ".join(clauses) or "TRUE", params

    def given(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


@dataclass
class Page:
    """One page of a paged table."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    hits: int = 0  # builds: how many were cache hits


def parse_page(text: str | None) -> int:
    try:
        page = int(text or 1)
    except ValueError:
        raise ViewError(400, f"page={text!r}: give a page number (1, 2, ...)") from None
    if page < 1:
        raise ViewError(400, f"page={text!r}: pages start at 1")
    return page


def runs_page(store: ReadStore, filters: RunFilters, page: int, size: int = PAGE_SIZE) -> Page:
    """One page of the runs ``filters`` select, newest first (LIMIT/OFFSET over an index-free
    scan of ``runs``: ~10 ms at 10,000 runs, bench/bench_viewer.py)."""
    where, params = filters.where()
    with store.connect() as con:
        total = con.execute(f"SELECT count(*) FROM runs WHERE {where}", params).fetchone()[0]
        cursor = con.execute(
            "SELECT run_id, sweep_id, task_id, agent, model, status, reward, integrity_obtained, flavor, "
            f"started_at, wall_seconds FROM runs WHERE {where} "
            "ORDER BY started_at DESC NULLS LAST, run_id DESC LIMIT ? OFFSET ?",
            [*params, size, (page - 1) * size],
        )
        rows = _dicts(cursor)
    for row in rows:
        row["started_at"] = _short_ts(row["started_at"])
    return Page(rows=rows, total=total, page=page, pages=max(1, -(-total // size)))


def filter_choices(store: ReadStore) -> dict[str, list[str]]:
    """The values each filter can take, for the runs page's menus (one scan)."""
    names = list(FILTER_COLUMNS)
    sql = (
        "SELECT "
        + ", ".join(
            f"list_sort(list(DISTINCT {FILTER_COLUMNS[n]}) FILTER (WHERE {FILTER_COLUMNS[n]} IS NOT NULL))"
            for n in names
        )
        + " FROM runs"
    )
    with store.connect() as con:
        row = con.execute(sql).fetchone()
        linked = [r[0] for r in con.execute("SELECT DISTINCT sweep_id FROM sweep_runs").fetchall()]
    choices = {name: list(values or []) for name, values in zip(names, row, strict=True)}
    choices["sweep"] = sorted({*choices["sweep"], *linked}, reverse=True)
    return choices


# ---------------------------------------------------------------- one run


def run_detail(store: ReadStore, run_id: str) -> dict[str, Any] | None:
    """Everything a run page shows, long texts cut to ``SHOWN_CHARS``; None for an unknown id."""
    with store.connect() as con:
        runs = _dicts(
            con.execute(
                "SELECT * EXCLUDE (diff), left(diff, ?) AS diff, length(diff) AS diff_chars FROM runs WHERE run_id = ?",
                [SHOWN_CHARS, run_id],
            )
        )
        if not runs:
            return None
        steps = _dicts(
            con.execute(
                "SELECT position, idx, kind, capability, tool, is_error, seconds, tokens_in, tokens_out, cost_usd, note, "
                "left(CAST(arguments AS VARCHAR), ?) AS arguments, length(CAST(arguments AS VARCHAR)) AS arguments_chars, "
                "left(result, ?) AS result, length(result) AS result_chars FROM steps WHERE run_id = ? ORDER BY position",
                [SHOWN_CHARS, SHOWN_CHARS, run_id],
            )
        )
        tests = _dicts(
            con.execute(
                "SELECT name, status FROM test_results WHERE run_id = ? ORDER BY CASE upper(status) WHEN 'FAILED' "
                "THEN 0 WHEN 'ERROR' THEN 0 WHEN 'PASSED' THEN 2 ELSE 1 END, name",
                [run_id],
            )
        )
        subscores = con.execute("SELECT name, value FROM subscores WHERE run_id = ? ORDER BY name", [run_id]).fetchall()
        timings = con.execute("SELECT stage, seconds FROM stage_timings WHERE run_id = ?", [run_id]).fetchall()
        terminals = _terminals(con, run_id)
    run = runs[0]
    for name in ("spec", "raw_grade"):
        run[name] = json.loads(run[name]) if run[name] else {}
    for name in ("started_at", "ended_at", "ingested_at"):
        run[name] = _short_ts(run[name])
    for step in steps:
        step["arguments_shown"] = _pretty_json(step["arguments"], step["arguments_chars"])
    return {
        "run": run,
        "steps": steps,
        "tests": tests,
        "subscores": subscores,
        "terminals": terminals,
        "waterfall": waterfall(timings),
        "files": run_files(run["run_dir"]),
        "failed_tests": sum(t["status"].upper() in ("FAILED", "ERROR") for t in tests),
    }


def step_text(store: ReadStore, run_id: str, position: int, part: str) -> str | None:
    """A step's whole output (``part="result"``) or arguments, for the "whole" link."""
    column = "result" if part == "result" else "CAST(arguments AS VARCHAR)"
    _, rows = store.query(f"SELECT {column} FROM steps WHERE run_id = ? AND position = ?", [run_id, position])
    return (rows[0][0] or "") if rows else None


def whole_diff(store: ReadStore, run_id: str) -> str | None:
    _, rows = store.query("SELECT diff FROM runs WHERE run_id = ?", [run_id])
    return (rows[0][0] or "") if rows else None


def waterfall(timings: list[tuple[str, float]]) -> list[dict[str, Any]]:
    """Stages in pipeline order as bars: where each starts (the ones before it, summed) and how
    long it took, in percent of the whole, for plain CSS bars."""
    rank = {stage: i for i, stage in enumerate(STAGE_ORDER)}
    ordered = sorted(timings, key=lambda t: (rank.get(t[0], len(rank)), t[0]))
    total = sum(max(0.0, s or 0.0) for _, s in ordered) or 1.0
    bars, start = [], 0.0
    for stage, seconds in ordered:
        seconds = max(0.0, seconds or 0.0)
        bars.append({"stage": stage, "seconds": seconds, "left": 100 * start / total, "width": 100 * seconds / total})
        start += seconds
    return bars


def run_files(run_dir: str | None) -> list[str]:
    """The run directory's files (relative paths), where it is on this machine."""
    if not run_dir or not os.path.isdir(run_dir):
        return []
    found = []
    for root, dirs, names in os.walk(run_dir):
        dirs.sort()
        for name in sorted(names):
            found.append(os.path.relpath(os.path.join(root, name), run_dir))
            if len(found) >= MAX_FILES:
                return found
    return found


def _terminals(con: duckdb.DuckDBPyConnection, run_id: str) -> list[dict[str, Any]]:
    from engine.store.terminals import load_snapshots, load_terminals

    shown = []
    for terminal in load_terminals(con, "run_id = ?", [run_id]):
        snapshots = load_snapshots(con, terminal.terminal_id)
        last = snapshots[-1] if snapshots else None
        shown.append({"terminal": terminal, "snapshot": last})
    return shown


# ---------------------------------------------------------------- sweeps and builds

SWEEP_MEMBERS = (
    "(SELECT sweep_id, run_id FROM runs WHERE sweep_id IS NOT NULL UNION SELECT sweep_id, run_id FROM sweep_runs)"
)
"""Each sweep's runs: those it ran, and the earlier ones it reused (``resume=true``)."""


def sweeps(store: ReadStore) -> list[dict[str, Any]]:
    """Every sweep, newest first, with its run count and how many of its runs solved their task."""
    rows = store.dicts(
        "SELECT m.sweep_id, min(r.started_at) AS started_at, count(*) AS runs, count(DISTINCT r.task_id) AS tasks, "
        "string_agg(DISTINCT r.agent, ', ' ORDER BY r.agent) AS agents, "
        "count(*) FILTER (WHERE r.status = 'completed' AND r.reward >= 1.0) AS solved "
        f"FROM {SWEEP_MEMBERS} m JOIN runs r USING (run_id) GROUP BY m.sweep_id "
        "ORDER BY max(r.started_at) DESC, m.sweep_id"
    )
    for row in rows:
        row["started_at"] = _short_ts(row["started_at"])
    return rows


def builds(store: ReadStore, page: int, size: int = 100) -> Page:
    with store.connect() as con:
        total = con.execute("SELECT count(*) FROM builds").fetchone()[0]
        rows = _dicts(
            con.execute(
                "SELECT build_id, tag, purpose, cache_hit, seconds, size_bytes, CAST(inputs AS VARCHAR) AS inputs, "
                "started_at, error FROM builds ORDER BY started_at DESC NULLS LAST, build_id LIMIT ? OFFSET ?",
                [size, (page - 1) * size],
            )
        )
        hits = con.execute("SELECT count(*) FILTER (WHERE cache_hit) FROM builds").fetchone()[0]
    for row in rows:
        row["started_at"] = _short_ts(row["started_at"])
        row["inputs"] = _pretty_json(row["inputs"], len(row["inputs"] or ""))
    return Page(rows=rows, total=total, page=page, pages=max(1, -(-total // size)), hits=hits)


# ---------------------------------------------------------------- helpers


def _dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    columns = [d[0] for d in cursor.description]
    return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def _short_ts(value: datetime | str | None) -> str:
    text = from_db_ts(value) if value is not None and not isinstance(value, str) else value
    return (text or "")[:19].replace("T", " ")


def _pretty_json(text: str | None, full_chars: int | None) -> str:
    """Indented JSON where the text is whole; a cut text is shown as it is."""
    if text is None:
        return ""
    if full_chars is not None and full_chars > len(text):
        return text
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
