"""Terminals in the store: seed 001's terminal lifecycle, for the runs of coding CLIs in tmux.

A terminal's events reach the store through the spool like every record (a worker need not
share a filesystem with the store): documents of kind ``terminal``, one ``event`` each, applied
in their sequence order inside the ingest's transaction:

- ``start``: the whole ``TerminalRecord`` (``running``): a new row; a repeat changes nothing.
- ``snapshot``: a ``TerminalSnapshot``; the terminal's periodic snapshots beyond the newest
  ``keep`` are pruned, so a long run stays bounded.
- ``end``: how it ended (``closing`` / ``failed`` / ``stale``, ``closes_at``, the final snapshot)
  and which terminal it ends: its ``terminal_id``, else its tmux server and session, else the
  one terminal of its run not yet ended. Never its owner string, which the caller that ends a
  terminal may spell differently from the one that started it. An end applies to a terminal
  still ``running`` or ``stale`` (the first real end wins over a stale mark); one that matches
  nothing is set aside in the spool's ``rejected/`` with the reason.

What the store decides itself is a direct update carrying a new sequence number, so that no
older event still in the spool undoes it: ``dismiss`` (a terminal that has ended leaves the
listings), ``close_expired`` (retention over: ``closing`` becomes ``completed``, periodic
snapshots are pruned, the final one stays for ``crucible show``), ``mark_stale`` (a terminal
still ``running`` whose run has ended: nothing will end it any more).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from engine.errors import ConfigError, StoreError, UserError
from engine.models import TerminalRecord, TerminalSnapshot
from engine.store.files import next_seq
from engine.store.lock import duckdb
from engine.store.schema import from_db_ts, insert_sql, to_db_ts

if TYPE_CHECKING:
    from engine.interfaces import Store

log = logging.getLogger("crucible.store")

TERMINAL_COLUMNS = tuple(f.name for f in dataclasses.fields(TerminalRecord)) + ("record_seq",)
SNAPSHOT_COLUMNS = tuple(f.name for f in dataclasses.fields(TerminalSnapshot))
ENDED_STATES = ("closing", "failed", "stale")
EVENTS = ("start", "snapshot", "end")


class Unmatched(ValueError):
    """An end event that names no stored terminal by any of its keys."""


@dataclass(frozen=True)
class TerminalPolicy:
    """How terminals are kept; store policy, not part of any run's spec (it changes no verdict)."""

    retention: float = 86400.0
    """Seconds an ended terminal stays listed and viewable (``closes_at``) before cleanup."""
    every: float = 10.0
    """Seconds between periodic snapshots of a running terminal (taken only when the screen changed)."""
    keep: int = 12
    """Periodic snapshots kept per terminal (the newest); the final one is kept besides."""
    final_lines: int = 2000
    """Lines of scrollback at most in the final snapshot."""

    @classmethod
    def from_env(cls) -> TerminalPolicy:
        """Defaults, overridden by ``$CRUCIBLE_TERMINAL_RETENTION`` (s), ``..._SNAPSHOT_EVERY`` (s)
        and ``..._SNAPSHOTS`` (count). Raises ConfigError naming a variable that is not a number."""
        return cls(
            retention=_env_number("CRUCIBLE_TERMINAL_RETENTION", cls.retention),
            every=max(0.2, _env_number("CRUCIBLE_TERMINAL_SNAPSHOT_EVERY", cls.every)),
            keep=int(_env_number("CRUCIBLE_TERMINAL_SNAPSHOTS", cls.keep)),
        )


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ConfigError(f"${name}={text!r}: must be a number 0 or more")
    return value


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def later_iso(seconds: float, start: str | None = None) -> str:
    base = datetime.fromisoformat(start) if start else datetime.now(UTC)
    return (base + timedelta(seconds=seconds)).isoformat()


# ---------------------------------------------------------------- the writer's side
class TerminalLog:
    """A run's terminals, written as events into the spool and ingested at once (in a thread:
    never on the event loop). A store locked past its timeout leaves an event in the spool for
    the next ingest; a terminal's record never fails its run."""

    def __init__(self, store: Store, run_id: str, policy: TerminalPolicy | None = None) -> None:
        self.store, self.run_id = store, run_id
        self._policy = policy

    @property
    def policy(self) -> TerminalPolicy:
        # Read when a terminal is first recorded: a run with no terminal never depends on it.
        if self._policy is None:
            self._policy = TerminalPolicy.from_env()
        return self._policy

    @property
    def every(self) -> float:
        return self.policy.every

    @property
    def final_lines(self) -> int:
        return self.policy.final_lines

    async def start(self, record: TerminalRecord) -> None:
        await self._write({"event": "start", "terminal": dataclasses.asdict(record)})

    async def snapshot(self, terminal_id: str, text: str) -> None:
        await self._write(
            {
                "event": "snapshot",
                "terminal_id": terminal_id,
                "keep": self.policy.keep,
                "snapshot": {"taken_at": now_iso(), "final": False, "text": text},
            }
        )

    async def end(
        self,
        terminal_id: str,
        *,
        state: str,
        reason: str,
        tmux_server: str = "",
        tmux_session: str = "",
        owner: str = "",
        final_text: str | None = None,
    ) -> None:
        """End the terminal as ``state`` (closing / failed / stale), closing after the retention."""
        ended = now_iso()
        await self._write(
            {
                "event": "end",
                "terminal_id": terminal_id,
                "run_id": self.run_id,
                "owner": owner,
                "tmux_server": tmux_server,
                "tmux_session": tmux_session,
                "state": state,
                "end_reason": reason,
                "ended_at": ended,
                "closes_at": later_iso(self.policy.retention, ended),
                "snapshot": None if final_text is None else {"taken_at": ended, "final": True, "text": final_text},
            }
        )

    async def _write(self, event: dict[str, Any]) -> None:
        import asyncio  # here: the store imports this module, and query/show/report need no asyncio (~0.02 s)

        try:
            await asyncio.to_thread(self.store.record_terminal_event, self.run_id, event)
        except StoreError as exc:
            log.warning("terminal event of run %s waits in the spool: %s", self.run_id, exc)


# ---------------------------------------------------------------- ingest (inside its transaction)
def check_event(data: dict[str, Any]) -> None:
    """Raises ValueError for a terminal document that cannot be applied (it is set aside)."""
    event = data.get("event")
    if event not in EVENTS:
        raise ValueError(f"terminal event {event!r} is not one of {', '.join(EVENTS)}")
    if event == "start":
        TerminalRecord(**data["terminal"])
        if data["terminal"]["state"] != "running":
            raise ValueError("a terminal starts as running")
    elif event == "end" and data.get("state") not in ENDED_STATES:
        raise ValueError(f"a terminal ends as one of {', '.join(ENDED_STATES)}, not {data.get('state')!r}")
    elif event == "snapshot" and not data.get("terminal_id"):
        raise ValueError("a snapshot names its terminal")


def apply_events(con: duckdb.DuckDBPyConnection, documents: list[dict[str, Any]]) -> None:
    for data in sorted(documents, key=lambda d: int(d["record_seq"])):
        {"start": _start, "snapshot": _snapshot, "end": _end}[data["event"]](con, data, int(data["record_seq"]))


def _start(con: duckdb.DuckDBPyConnection, data: dict[str, Any], seq: int) -> None:
    record = TerminalRecord(**data["terminal"])
    values = {**dataclasses.asdict(record), "record_seq": seq}
    for name in ("started_at", "ended_at", "closes_at", "closed_at", "last_snapshot_at"):
        values[name] = to_db_ts(values[name])
    con.execute(
        insert_sql("terminals", TERMINAL_COLUMNS).replace("INSERT", "INSERT OR IGNORE", 1),
        [values[c] for c in TERMINAL_COLUMNS],
    )


def _snapshot(con: duckdb.DuckDBPyConnection, data: dict[str, Any], seq: int) -> None:
    _add_snapshot(con, data["terminal_id"], seq, data["snapshot"])
    keep = int(data.get("keep", TerminalPolicy.keep))
    con.execute(
        "DELETE FROM terminal_snapshots WHERE terminal_id = ? AND NOT final AND seq NOT IN "
        "(SELECT seq FROM terminal_snapshots WHERE terminal_id = ? AND NOT final ORDER BY seq DESC LIMIT ?)",
        [data["terminal_id"], data["terminal_id"], keep],
    )


def _add_snapshot(con: duckdb.DuckDBPyConnection, terminal_id: str, seq: int, snapshot: dict[str, Any]) -> None:
    if con.execute("SELECT 1 FROM terminal_snapshots WHERE terminal_id = ? AND seq = ?", [terminal_id, seq]).fetchone():
        return  # ingested before (a retried batch)
    taken = to_db_ts(snapshot["taken_at"])
    con.execute(
        insert_sql("terminal_snapshots", SNAPSHOT_COLUMNS),
        [terminal_id, seq, taken, bool(snapshot["final"]), str(snapshot["text"])],
    )
    con.execute(
        "UPDATE terminals SET last_snapshot_at = ? WHERE terminal_id = ? "
        "AND (last_snapshot_at IS NULL OR last_snapshot_at < ?)",
        [taken, terminal_id, taken],
    )


def _end(con: duckdb.DuckDBPyConnection, data: dict[str, Any], seq: int) -> None:
    terminal_id = resolve(con, data)
    if terminal_id is None:
        raise Unmatched(
            f"terminal end event matches no terminal (id {data.get('terminal_id')!r}, tmux "
            f"{data.get('tmux_server')!r}:{data.get('tmux_session')!r}, run {data.get('run_id')!r})"
        )
    changed = con.execute(
        "UPDATE terminals SET state = ?, ended_at = ?, end_reason = ?, closes_at = ?, record_seq = ? "
        "WHERE terminal_id = ? AND state IN ('running', 'stale') AND closed_at IS NULL AND record_seq < ? "
        "RETURNING terminal_id",
        [
            data["state"],
            to_db_ts(data["ended_at"]),
            data.get("end_reason"),
            to_db_ts(data["closes_at"]),
            seq,
            terminal_id,
            seq,
        ],
    ).fetchall()
    if changed and data.get("snapshot"):
        _add_snapshot(con, terminal_id, seq, data["snapshot"])


def resolve(con: duckdb.DuckDBPyConnection, data: dict[str, Any]) -> str | None:
    """The terminal an event means: by id; else by its tmux server and session; else the one
    terminal of its run that has not ended. The owner string is never a key."""
    if data.get("terminal_id"):
        row = con.execute("SELECT terminal_id FROM terminals WHERE terminal_id = ?", [data["terminal_id"]]).fetchone()
        if row:
            return str(row[0])
    if data.get("tmux_server") and data.get("tmux_session"):
        row = con.execute(
            "SELECT terminal_id FROM terminals WHERE tmux_server = ? AND tmux_session = ? "
            "ORDER BY started_at DESC LIMIT 1",
            [data["tmux_server"], data["tmux_session"]],
        ).fetchone()
        if row:
            return str(row[0])
    if data.get("run_id"):
        rows = con.execute(
            "SELECT terminal_id FROM terminals WHERE run_id = ? AND state IN ('running', 'stale')", [data["run_id"]]
        ).fetchall()
        if len(rows) == 1:
            return str(rows[0][0])
    return None


# ---------------------------------------------------------------- the store's own decisions
def dismiss(con: duckdb.DuckDBPyConnection, terminal_id: str) -> str:
    """Close an ended terminal now (it leaves the listings); its id. Raises UserError (one line)
    for an unknown or ambiguous id, a running terminal, or one already closed."""
    rows = con.execute(
        "SELECT terminal_id, state, closed_by FROM terminals WHERE starts_with(terminal_id, ?) "
        "ORDER BY terminal_id = ? DESC LIMIT 3",
        [terminal_id, terminal_id],
    ).fetchall()
    if not rows:
        raise UserError(f"no terminal '{terminal_id}' in the store")
    if len(rows) > 1 and rows[0][0] != terminal_id:
        raise UserError(f"terminal id prefix '{terminal_id}' is ambiguous: {', '.join(r[0] for r in rows)}")
    found, state, closed_by = rows[0]
    if state == "running":
        raise UserError(f"terminal {found} is still running; it can be dismissed once its run has ended it")
    if closed_by is not None:
        raise UserError(f"terminal {found} is already closed ({closed_by})")
    _close(con, [found], "dismissed")
    return str(found)


def close_expired(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> list[str]:
    """Ended terminals past their ``closes_at``: closed (``closing`` -> ``completed``), periodic
    snapshots pruned."""
    now = now or datetime.now(UTC)
    rows = con.execute(
        "SELECT terminal_id FROM terminals WHERE state <> 'running' AND closed_at IS NULL "
        "AND closes_at <= ? ORDER BY terminal_id",
        [to_db_ts(now.isoformat())],
    ).fetchall()
    ids = [r[0] for r in rows]
    _close(con, ids, "retention")
    return ids


def _close(con: duckdb.DuckDBPyConnection, ids: list[str], why: str) -> None:
    if not ids:
        return
    con.execute(
        "UPDATE terminals SET closed_at = ?, closed_by = ?, record_seq = ?, "
        "state = CASE WHEN state = 'closing' THEN 'completed' ELSE state END "
        "WHERE list_contains(?, terminal_id)",
        [to_db_ts(now_iso()), why, next_seq(), ids],
    )
    con.execute("DELETE FROM terminal_snapshots WHERE NOT final AND list_contains(?, terminal_id)", [ids])


def mark_stale(con: duckdb.DuckDBPyConnection, retention: float) -> list[str]:
    """Terminals still ``running`` whose run has ended (its owner died, or ended it without an end
    event): ``stale``, closing after the retention."""
    rows = con.execute(
        "SELECT t.terminal_id FROM terminals t JOIN runs r USING (run_id) "
        "WHERE t.state = 'running' AND r.status <> 'running' ORDER BY t.terminal_id"
    ).fetchall()
    ids = [r[0] for r in rows]
    if ids:
        now = now_iso()
        con.execute(
            "UPDATE terminals SET state = 'stale', ended_at = ?, closes_at = ?, record_seq = ?, "
            "end_reason = 'its run ended without ending it' WHERE list_contains(?, terminal_id)",
            [to_db_ts(now), to_db_ts(later_iso(retention, now)), next_seq(), ids],
        )
    return ids


def needs_housekeeping(con: duckdb.DuckDBPyConnection, now: datetime | None = None) -> bool:
    """Whether ``mark_stale`` or ``close_expired`` would change anything (read-only, cheap).

    Every command asks (housekeeping), so the time goes in as text, cast in SQL: binding a
    ``datetime`` makes DuckDB import ``decimal`` and ``uuid`` (with ``platform``), ~3 ms."""
    now = now or datetime.now(UTC)
    at = to_db_ts(now.isoformat())
    row = con.execute(
        "SELECT count(*) FROM terminals t LEFT JOIN runs r USING (run_id) WHERE "
        "(t.state = 'running' AND r.status IS NOT NULL AND r.status <> 'running') OR "
        "(t.state <> 'running' AND t.closed_at IS NULL AND t.closes_at <= CAST(? AS TIMESTAMP))",
        [at.isoformat(sep=" ") if at else None],
    ).fetchone()
    return bool(row and row[0])


# ---------------------------------------------------------------- reads
def load_terminals(con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[TerminalRecord]:
    columns = TERMINAL_COLUMNS[:-1]
    rows = con.execute(
        f"SELECT {', '.join(columns)} FROM terminals WHERE {where} ORDER BY started_at, terminal_id", params
    ).fetchall()
    records = []
    for row in rows:
        values = dict(zip(columns, row, strict=True))
        for name in ("started_at", "ended_at", "closes_at", "closed_at", "last_snapshot_at"):
            values[name] = from_db_ts(values[name])
        records.append(TerminalRecord(**values))
    return records


def load_snapshots(
    con: duckdb.DuckDBPyConnection, terminal_id: str, *, final_only: bool = False
) -> list[TerminalSnapshot]:
    rows = con.execute(
        f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM terminal_snapshots WHERE terminal_id = ? "
        + ("AND final " if final_only else "")
        + "ORDER BY seq",
        [terminal_id],
    ).fetchall()
    return [
        TerminalSnapshot(terminal_id=r[0], seq=r[1], taken_at=from_db_ts(r[2]) or "", final=bool(r[3]), text=r[4])
        for r in rows
    ]


__all__ = [
    "TerminalLog",
    "TerminalPolicy",
    "apply_events",
    "check_event",
    "close_expired",
    "dismiss",
    "load_snapshots",
    "load_terminals",
    "mark_stale",
    "resolve",
]
