"""What housekeeping (``engine.run.session.housekeeping``) finds to do in the store, read in a
turn the caller holds: ``DuckDBStore.housekeeping_due`` reads it in a turn of its own, or
``DuckDBStore.validate`` in the turn that reads the schema's version."""

from __future__ import annotations

from datetime import UTC

from engine.store import terminals as terminal_rows
from engine.store.files import process_alive, this_host
from engine.store.lock import duckdb
from engine.store.schema import from_db_ts, to_db_ts


def housekeeping_due_in(con: duckdb.DuckDBPyConnection) -> tuple[bool, bool]:
    """(runs due, terminals due): a run is due exactly when ``mark_orphaned_runs`` would take
    it (running here, its owner not alive); terminals when ``housekeep_terminals`` would change one."""
    owners = con.execute(
        "SELECT owner_pid, started_at FROM runs WHERE status = 'running' AND owner_host = ? AND owner_pid IS NOT NULL",
        [this_host()],
    ).fetchall()
    terminals_due = terminal_rows.needs_housekeeping(con)
    runs_due = any(not process_alive(pid, started_epoch(from_db_ts(started))) for pid, started in owners)
    return runs_due, terminals_due


def started_epoch(iso: str | None) -> float | None:
    """A run's ``started_at`` as seconds since the epoch (what ``process_alive`` compares a
    process's start with, so that a reused pid is not taken for the run's owner)."""
    value = to_db_ts(iso) if iso else None
    return value.replace(tzinfo=UTC).timestamp() if value else None


__all__ = ["housekeeping_due_in", "started_epoch"]
