"""The results store: every run and build, in one DuckDB file, queryable while sweeps run.

DuckDB lets one process open a database file read-write and then no other process may
open it at all, not even read-only. So nothing holds the store open: a run's record is
first written durably beside its outputs and into the spool (``engine.store.files``),
then ingested in a short transaction, retried with backoff while another process holds
the file. Ingestion is idempotent by run id (build id), and a final status is never replaced
by a stale "running" record. Readers open the file read-only, briefly. Connections are opened
per operation and never cached, so a forked child (a sweep worker) never shares one with its parent.

Tables (``engine.store.schema``): ``runs`` (one row per run id), ``steps``, ``subscores``,
``test_results``, ``stage_timings``, ``builds``, ``terminals``, ``terminal_snapshots``, ``sweep_runs``
(the earlier runs a resumed sweep reused), ``meta``. Users' questions are one short query each:

Pass rate per agent and model::

    SELECT agent, model, count(*) AS runs, avg(CAST(reward >= 1.0 AS INTEGER)) AS pass_rate
    FROM runs WHERE status = 'completed'
    GROUP BY agent, model ORDER BY agent, model

Tasks that flipped between two sweeps::

    SELECT a.task_id, a.agent, a.model, a.reward AS reward_a, b.reward AS reward_b
    FROM runs a JOIN runs b USING (task_id, agent, model, seed)
    WHERE a.sweep_id = 'sweep-A' AND b.sweep_id = 'sweep-B'
      AND a.status = 'completed' AND b.status = 'completed'
      AND (a.reward >= 1.0) <> (b.reward >= 1.0)
    ORDER BY a.task_id

Slowest stage::

    SELECT stage, count(*) AS runs, avg(seconds) AS mean_s, max(seconds) AS max_s
    FROM stage_timings GROUP BY stage ORDER BY mean_s DESC
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import ConfigError, StoreError, UserError
from engine.models import RUN_STATUSES, BuildRecord, RunRecord, TerminalRecord, TerminalSnapshot, sha256_hex
from engine.store import terminals as terminal_rows
from engine.store.files import (
    atomic_write_json,
    next_seq,
    pending_files,
    process_alive,
    quarantine,
    safe_name,
    spool_name,
    sweep_stale_tmp,
    this_host,
)
from engine.store.ingest import IngestItem, apply_items, load_spool_file
from engine.store.lock import duckdb, is_lock_conflict, open_store, renew_instance, store_turn
from engine.store.orphans import housekeeping_due_in, started_epoch
from engine.store.schema import (
    RUN_COLUMNS,
    make_current,
    read_current,
    record_from_rows,
    seen_current,
)
from engine.util import paths

log = logging.getLogger("crucible.store")
_T = TypeVar("_T")

LOCK_TIMEOUT_S = 120.0
BATCH = 500
"""Records per ingest transaction: short enough that readers get their turn."""
FINAL_RUN_STATUSES = tuple(s for s in RUN_STATUSES if s != "running")
IDS = """from_json(?, '["VARCHAR"]')"""
"""A list of ids as SQL, bound as its JSON text: binding a Python list makes DuckDB import
``decimal`` and ``uuid`` (with ``platform``) to look at its items, ~3 ms of every ``crucible show``."""


class DuckDBStore:
    """``engine.interfaces.Store`` over an embedded DuckDB file (default ``paths.store_path()``)."""

    def __init__(self, path: str | Path | None = None, *, lock_timeout: float = LOCK_TIMEOUT_S):
        # "" (an unset config value) means the default too, never the current directory.
        self.path = Path(path).expanduser().resolve() if path else paths.store_path()
        # Only the default store's directory ($CRUCIBLE_HOME) is created; a path the user
        # gave (store=, $CRUCIBLE_STORE) in a directory that does not exist is a mistake.
        self.is_default = not path and not os.environ.get("CRUCIBLE_STORE")
        self.lock_timeout = lock_timeout
        # Each store its own spool: a reader of another store (query --store B) ingests what
        # waits in its spool, so one shared spool would commit A's records into B. The store in
        # $CRUCIBLE_HOME has the spool directory itself (where earlier versions spooled).
        self.spool = (
            paths.spool_dir()
            if self.path == paths.home() / "store.duckdb"
            else paths.spool_dir() / "stores" / sha256_hex(str(self.path))[:16]
        )
        self._due: tuple[bool, bool] | None = None
        """``housekeeping_due``'s answer, read with the schema's version by ``validate``."""

    def validate(self, *, create: bool = True, housekeeping: bool = False) -> DuckDBStore:
        """Open the store once, now (creating a missing file, unless ``create`` is False: a
        reader given a path, where a missing file is a typo that would show an empty store),
        so that a path that cannot be a store fails before a command starts work it could not
        record.

        Raises ConfigError ``store PATH: what is wrong`` (one line). A file that is not a
        DuckDB database is recognised by its header before anything is written beside it,
        and is never modified. A store locked past ``lock_timeout`` stays a StoreError.

        ``housekeeping``: the caller housekeeps next (``engine.run.session.housekeeping``); an
        existing store's version is then read in the read turn that also reads what housekeeping
        has to do (``housekeeping_due``), not in a write turn of its own: one turn fewer for
        every ``query``, ``show`` and ``report`` (~3 ms each, bench/bench_cli_startup.py).
        """
        path = self.path

        def bad(reason: str) -> ConfigError:
            return ConfigError(f"store {path}: {reason}")

        if path.is_dir():
            raise bad("is a directory, not a DuckDB database file")
        if not path.parent.is_dir():
            if not self.is_default:
                what = "is not a directory" if path.parent.exists() else "does not exist"
                raise bad(f"its directory {path.parent} {what}")
            path.parent.mkdir(parents=True, exist_ok=True)
        if not create and not path.exists():
            raise bad("does not exist (query, show and report read a store, never create one)")
        if path.exists():
            try:
                with open(path, "rb") as f:
                    head = f.read(12)
            except OSError as exc:
                raise bad(f"cannot be read ({exc.strerror or exc})") from exc
            if head[8:12] != b"DUCK":  # a DuckDB file: an 8-byte checksum, then the magic "DUCK"
                raise bad("not a DuckDB database file (" + (f"it begins {head[:8]!r}" if head else "it is empty") + ")")
        try:
            if housekeeping and path.exists() and not seen_current(path):
                self._due = self._read_schema_and_due()
            self._ensure_schema()  # nothing left to do where the read found the schema current
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, duckdb.Error) and not is_lock_conflict(cause):
                first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
                raise bad(f"cannot be opened ({first})") from exc
            raise
        return self

    # ---- durable records -------------------------------------------------------------

    def write_run_record(self, record: RunRecord, run_dir: Path | None) -> Path:
        """Write ``record.json`` into ``run_dir`` (if given) and a copy into the spool.

        Both atomically and fsynced. Returns the spool file, which the next ingest consumes.
        The order matters for a process killed between the two writes. A final record goes to
        the run directory first: the next command finds the store saying "running" and takes
        the ending from there (``_respool_final_record``). A "running" record goes to the spool
        first: a run the run directory says is running is one the store will hear of, and mark
        dead if its owner is gone (written the other way round, it would be in no table).
        """
        document = self._document("run", record.to_dict(), next_seq())
        name = spool_name("run", record.run_id, document["record_seq"], record.status)
        if record.status not in FINAL_RUN_STATUSES:
            spool_file = atomic_write_json(self.spool / name, document)
            if run_dir is not None:
                atomic_write_json(Path(run_dir) / "record.json", document)
            return spool_file
        if run_dir is not None:
            atomic_write_json(Path(run_dir) / "record.json", document)
        return atomic_write_json(self.spool / name, document)

    def record_run(self, record: RunRecord, *, ingest: bool = True) -> None:
        """Write the record durably (beside the run and in the spool), then ingest the spool.

        Raises StoreError if the store stays locked past ``lock_timeout``; the record then
        waits in the spool and the next ingest (any crucible command) commits it. With
        ``ingest=False`` it waits there anyway: for a record the run's final one commits
        (every read ingests the spool first, so no crucible reader misses it).
        """
        spool_file = self.write_run_record(record, Path(record.run_dir) if record.run_dir else None)
        if ingest:
            self._ingest_or_explain(f"run {record.run_id}", spool_file)

    def record_build(self, record: BuildRecord, *, ingest: bool = True) -> None:
        """As ``record_run``, for a build; its durable copy is ``builds/<build_id>.json``."""
        document = self._document("build", dataclasses.asdict(record), next_seq())
        atomic_write_json(paths.builds_dir() / f"{safe_name(record.build_id)}.json", document)
        spool_file = atomic_write_json(
            self.spool / spool_name("build", record.build_id, document["record_seq"]), document
        )
        if ingest:
            self._ingest_or_explain(f"build {record.build_id}", spool_file)

    def record_terminal_event(self, run_id: str, event: dict[str, Any]) -> Path:
        """Spool one terminal event of ``run_id`` (engine/store/terminals.py), then ingest it.
        Raises StoreError as ``record_run`` does; the event then waits in the spool."""
        document = self._document("terminal", {**event, "run_id": event.get("run_id") or run_id}, next_seq())
        spool_file = atomic_write_json(self.spool / spool_name("terminal", run_id, document["record_seq"]), document)
        self._ingest_or_explain(f"a terminal event of run {run_id}", spool_file)
        return spool_file

    def link_sweep_run(self, sweep_id: str, run_id: str) -> None:
        """Record that sweep ``sweep_id`` reused the completed run ``run_id`` instead of running its
        spec again (``resume=true``): the sweep's report then counts it. Spooled first, like a
        run record, so a sweep's workers (which do not share a store handle) link alike; a link
        left in the spool by a busy store is committed by the next ingest."""
        document = self._document(
            "sweep_run",
            {"sweep_id": sweep_id, "run_id": run_id, "reused": True, "linked_at": datetime.now(UTC).isoformat()},
            next_seq(),
        )
        spool_file = atomic_write_json(
            self.spool / spool_name("sweep_run", f"{sweep_id}-{run_id}", document["record_seq"]), document
        )
        self._ingest_or_explain(f"the link of run {run_id} to sweep {sweep_id}", spool_file)

    @staticmethod
    def _document(kind: str, data: dict[str, Any], seq: int) -> dict[str, Any]:
        return {**data, "record_kind": kind, "record_seq": seq}

    def _ingest_or_explain(self, what: str, spool_file: Path) -> None:
        try:
            self.ingest_pending()
        except StoreError as exc:
            raise StoreError(
                f"{what} is saved in {spool_file} but not yet in the store ({exc}); "
                "the next crucible command ingests it"
            ) from exc

    # ---- ingestion ---------------------------------------------------------------------

    def ingest_pending(self) -> int:
        """Ingest the spool files present now; return how many records were committed.

        Safe to run in many processes at once: upserts are by id and keep the record of
        highest (final status, sequence); files are deleted only after their commit, so a
        file that is gone was committed by someone else.
        """
        self._ensure_schema()
        spool = self.spool
        sweep_stale_tmp(spool)
        remaining = set(pending_files(spool))
        committed = 0
        while remaining:
            with store_turn(self.path, read_only=False, timeout=self.lock_timeout) as turn:
                # Listed again inside the turn: what another ingester committed while we
                # waited is gone, and if that is everything, the database is never opened.
                present = [p for p in pending_files(spool) if p in remaining]
                remaining = set(present[BATCH:])
                items = [item for p in present[:BATCH] if (item := load_spool_file(p)) is not None]
                if items:
                    committed += self._commit(turn.connection(), items)
        return committed

    @staticmethod
    def _commit(con: duckdb.DuckDBPyConnection, items: list[IngestItem]) -> int:
        rejected = apply_items(con, items)
        for item, reason in rejected:
            log.warning("store: rejected %s: %s", item.path.name, reason)
            quarantine(item.path, reason)
        for item in items:
            item.path.unlink(missing_ok=True)
        return len(items) - len(rejected)

    # ---- reads -------------------------------------------------------------------------

    def completed_run_for(self, spec_hash: str) -> RunRecord | None:
        """The latest completed run of ``spec_hash`` (for resume), or None."""
        records = self._load_runs(
            "spec_hash = ? AND status = 'completed' ORDER BY ended_at DESC NULLS LAST, record_seq DESC LIMIT 1",
            [spec_hash],
        )
        return records[0] if records else None

    def completed_runs_for(self, spec_hashes: list[str]) -> dict[str, RunRecord]:
        """``completed_run_for`` of many specs in one read (a batch's verdict cache): the
        latest completed run of each spec hash that has one."""
        if not spec_hashes:
            return {}
        records = self._load_runs(
            "status = 'completed' AND list_contains(?::VARCHAR[], spec_hash) "
            "QUALIFY row_number() OVER (PARTITION BY spec_hash ORDER BY ended_at DESC NULLS LAST, record_seq DESC) = 1",
            [list(dict.fromkeys(spec_hashes))],
        )
        return {r.spec_hash: r for r in records}

    def get_run(self, run_id_or_prefix: str) -> RunRecord | None:
        """A run by id or unique id prefix. Raises UserError if the prefix is ambiguous."""
        if not run_id_or_prefix:
            raise UserError("get_run: empty run id")
        records = self._load_runs(
            "starts_with(run_id, ?) ORDER BY run_id = ? DESC, run_id LIMIT 6", [run_id_or_prefix] * 2
        )
        if len(records) > 1 and records[0].run_id != run_id_or_prefix:
            shown = ", ".join(r.run_id for r in records[:5]) + (", ..." if len(records) > 5 else "")
            raise UserError(f"run id prefix {run_id_or_prefix!r} is ambiguous: {shown}")
        return records[0] if records else None

    def get_runs(self, run_ids: list[str]) -> dict[str, RunRecord]:
        """Many runs by exact id, in one read (ids not stored are absent from the result)."""
        records = self._load_runs("list_contains(?::VARCHAR[], run_id)", [list(run_ids)])
        return {r.run_id: r for r in records}

    def query(self, sql: str, *, ours: bool = False) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run user SQL read-only (``ours``: crucible's own, which changes nothing of the instance).
        Raises UserError('query error: ...') for a bad statement."""
        if not sql.strip():
            raise UserError("query error: empty SQL")
        self.ingest_pending()
        with self._connect(read_only=True) as con:
            if not ours:  # user SQL may change it for good (SET, setseed ...): for a warm reader
                renew_instance()
            try:
                rows = (cursor := con.execute(sql)).fetchall()
            except duckdb.InterruptException as exc:  # lock.interrupt: not the SQL's fault
                raise KeyboardInterrupt from exc
            except duckdb.Error as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise UserError(f"query error: {first}") from exc
            columns = [d[0] for d in cursor.description or []]
        return columns, rows

    def _load_runs(self, where: str, params: list[Any]) -> list[RunRecord]:
        self.ingest_pending()
        with self._connect(read_only=True) as con:
            cursor = con.execute(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE {where}", params)
            runs = [dict(zip(RUN_COLUMNS, row, strict=True)) for row in cursor.fetchall()]
            if not runs:
                return []
            ids = [json.dumps([r["run_id"] for r in runs])]  # IDS: a list bound as JSON text
            steps: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for step in self._rows(
                con, f"SELECT * FROM steps WHERE list_contains({IDS}, run_id) ORDER BY position", ids
            ):
                steps[step["run_id"]].append(step)
            subscores: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
            for run_id, name, value in con.execute(
                f"SELECT run_id, name, value FROM subscores WHERE list_contains({IDS}, run_id) ORDER BY name", ids
            ).fetchall():
                subscores[run_id].append((name, value))
            tests: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
            for run_id, name, status in con.execute(
                f"SELECT run_id, name, status FROM test_results WHERE list_contains({IDS}, run_id) ORDER BY name, status",
                ids,
            ).fetchall():
                tests[run_id].append((name, status))
        return [
            record_from_rows(run, steps[run["run_id"]], subscores[run["run_id"]], tests[run["run_id"]]) for run in runs
        ]

    @staticmethod
    def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        cursor = con.execute(sql, params)
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    # ---- terminals ---------------------------------------------------------------------

    def terminals(self, run_id: str | None = None, *, include_closed: bool = False) -> list[TerminalRecord]:
        """The terminals of ``run_id`` (None: of every run), oldest first; without those closed
        (retention over, or dismissed) unless ``include_closed``."""
        where = " AND ".join(["run_id = ?"] * (run_id is not None) + ["closed_at IS NULL"] * (not include_closed))
        self.ingest_pending()
        with self._connect(read_only=True) as con:
            return terminal_rows.load_terminals(con, where or "TRUE", [run_id] if run_id is not None else [])

    def terminal_snapshots(self, terminal_id: str, *, final_only: bool = False) -> list[TerminalSnapshot]:
        """A terminal's stored snapshots in the order they were taken."""
        self.ingest_pending()
        with self._connect(read_only=True) as con:
            return terminal_rows.load_snapshots(con, terminal_id, final_only=final_only)

    def dismiss_terminal(self, terminal_id: str) -> str:
        """Close an ended terminal now (``crucible terminals dismiss``); its full id. Raises
        UserError for an unknown, ambiguous, running or already closed terminal."""
        self.ingest_pending()
        return self._terminal_turn(lambda con: terminal_rows.dismiss(con, terminal_id))

    def housekeep_terminals(self, retention: float | None = None) -> tuple[list[str], list[str]]:
        """Terminals whose run ended without ending them become ``stale``; those past their
        ``closes_at`` are closed. (stale ids, closed ids); no write at all when nothing is due."""
        self.ingest_pending()
        with self._connect(read_only=True) as con:
            if not terminal_rows.needs_housekeeping(con):
                return [], []
        policy = terminal_rows.TerminalPolicy.from_env()
        keep = policy.retention if retention is None else retention
        return self._terminal_turn(lambda con: (terminal_rows.mark_stale(con, keep), terminal_rows.close_expired(con)))

    def _terminal_turn(self, change: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        with self._connect(read_only=False) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                result = change(con)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        return result

    # ---- orphans -----------------------------------------------------------------------

    def housekeeping_due(self) -> tuple[bool, bool]:
        """Whether ``mark_orphaned_runs`` and ``housekeep_terminals`` would find anything to do,
        read in one turn: every command housekeeps first, and each turn costs an ATTACH and the
        log's replay (~5 ms of a ~0.1 s `crucible query`, bench/bench_cli_startup.py). A run is due
        exactly when ``mark_orphaned_runs`` would take it: running here, its owner not alive.
        ``validate(housekeeping=True)`` may have read it already, in its turn: that answer holds
        while nothing was ingested since (then it is read again)."""
        read, self._due = self._due, None
        if self.ingest_pending() == 0 and read is not None:
            return read
        with self._connect(read_only=True) as con:
            return housekeeping_due_in(con)

    def _read_schema_and_due(self) -> tuple[bool, bool] | None:
        """One read turn: the schema's version and, where it is current and the spool holds
        nothing to ingest first, ``housekeeping_due``'s answer. None: ``make_current`` decides
        (the schema is missing or old, or the file cannot be opened: its write turn says why)."""
        try:
            with self._connect(read_only=True) as con:
                if not read_current(con, self.path) or pending_files(self.spool):
                    return None
                return housekeeping_due_in(con)
        except StoreError as exc:
            if isinstance(exc.__cause__, duckdb.Error) and not is_lock_conflict(exc.__cause__):
                return None
            raise

    def mark_orphaned_runs(self) -> list[str]:
        """Runs left "running" by a dead process on this host become "error"; returns their ids.

        A run whose own directory already holds its final record gets that record instead.

        Each is written as a new durable record (so a crash mid-way loses nothing and a
        second call finds nothing left to mark).
        """
        host = this_host()
        orphans = [
            r
            for r in self._load_runs("status = 'running' AND owner_host = ? AND owner_pid IS NOT NULL", [host])
            # owner_pid is not None: the query says so, mypy does not know it
            if r.owner_pid is not None and not process_alive(r.owner_pid, started_epoch(r.started_at))
        ]
        now = datetime.now(UTC).isoformat()
        recovered = {r.run_id for r in orphans if self._respool_final_record(r)}
        orphans = [r for r in orphans if r.run_id not in recovered]
        for record in orphans:
            record.status = "error"
            record.error_phase = record.error_phase or "agent"
            record.error = f"owner process died (pid {record.owner_pid})"
            record.ended_at = record.ended_at or now
            run_dir = Path(record.run_dir) if record.run_dir and Path(record.run_dir).is_dir() else None
            self.write_run_record(record, run_dir)
        if orphans or recovered:
            self.ingest_pending()
        return [r.run_id for r in orphans]

    def _respool_final_record(self, record: RunRecord) -> bool:
        """Whether the run's own ``record.json`` already holds its final record, spooled again.

        The record goes to the run directory first and to the spool second; a process killed
        between the two leaves the store saying "running" while the run directory says how
        it ended. That ending is the truth: marking the run dead would lose a finished run.
        """
        if not record.run_dir:
            return False
        try:
            document = json.loads((Path(record.run_dir) / "record.json").read_text())
        except (OSError, ValueError):
            return False
        if (
            not isinstance(document, dict)
            or document.get("run_id") != record.run_id
            or document.get("status") not in FINAL_RUN_STATUSES
            or not isinstance(document.get("record_seq"), int)
        ):
            return False
        name = spool_name("run", record.run_id, document["record_seq"], document["status"])
        atomic_write_json(self.spool / name, document)
        return True

    # ---- connections -------------------------------------------------------------------

    def _connect(self, *, read_only: bool) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return open_store(self.path, read_only=read_only, timeout=self.lock_timeout)

    def _ensure_schema(self) -> None:
        make_current(self.path, lambda: self._connect(read_only=False), make_dir=self.is_default)


__all__ = ["DuckDBStore", "LOCK_TIMEOUT_S"]
