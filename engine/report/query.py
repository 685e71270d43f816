"""Which runs a report reads: filters, the one query, and command-line values turned into filters.

Filters become SQL literals quoted here, because ``Store.query`` takes no parameters;
the store is opened read-only, briefly, by ``Store.query`` (never held).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from engine.errors import UserError
from engine.report.stats import SUCCESS

LATEST = ("last", "latest")
"""``--sweep last`` names the sweep that started most recently. A sweep's runs are those it ran
and those it reused (``resume=true``, table ``sweep_runs``): the report of a resumed sweep
covers the whole sweep, not only the part the resume ran."""


class Rows(Protocol):
    """What a report reads: the store (``Store.query``) or the viewer's ``ReadStore``."""

    def query(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]: ...


@dataclass(frozen=True)
class Filters:
    """Which runs a report covers. Empty tuples mean "any"; task patterns are globs."""

    sweeps: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    since: datetime | None = None  # naive UTC, as the store keeps timestamps

    def where(self) -> str:
        """The SQL condition (literals quoted here: ``Store.query`` takes no parameters)."""
        clauses = []
        if self.sweeps:
            # A sweep's runs: those it ran, and the earlier ones it reused (resume=true).
            clauses.append(
                f"(sweep_id IN ({_literals(self.sweeps)}) OR run_id IN "
                f"(SELECT run_id FROM sweep_runs WHERE sweep_id IN ({_literals(self.sweeps)})))"
            )
        if self.agents:
            clauses.append(f"agent IN ({_literals(self.agents)})")
        if self.models:  # "-" selects runs without a model (integration_test, noop)
            clauses.append(f"coalesce(model, '') IN ({_literals('' if m == '-' else m for m in self.models)})")
        if self.tasks:
            clauses.append("(" + " OR ".join(f"task_id GLOB {_literal(g)}" for g in self.tasks) + ")")
        if self.since is not None:
            clauses.append(f"started_at >= TIMESTAMP {_literal(self.since.isoformat(sep=' '))}")
        return " AND ".join(clauses) or "TRUE"


@dataclass(frozen=True)
class RunRow:
    run_id: str
    spec_hash: str
    status: str
    task_id: str
    agent: str
    model: str  # "" when the agent takes no model
    sweep_id: str | None
    reward: float | None
    wall_seconds: float | None
    ended: float  # epoch seconds; 0 when unknown (orders reruns of one spec)
    record_seq: int
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    unpriced_steps: int
    infrastructure: bool = False
    """An error of the machinery's (a Docker host or worker that went away): not an attempt."""

    @property
    def group(self) -> tuple[str, str]:
        return self.agent, self.model

    @property
    def solved(self) -> bool:
        return self.status == "completed" and self.reward is not None and self.reward >= SUCCESS


# ---------------------------------------------------------------- loading

_RUNS_SQL = """
SELECT r.run_id, r.spec_hash, r.status, r.task_id, r.agent, coalesce(r.model, '') AS model, r.sweep_id,
       r.reward, r.wall_seconds, coalesce(epoch(r.ended_at), 0) AS ended, r.record_seq,
       s.tokens_in, s.tokens_out, s.cost_usd, coalesce(s.unpriced, 0) AS unpriced,
       coalesce(r.infrastructure, false) AS infrastructure
FROM runs r LEFT JOIN (
    SELECT run_id, sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd,
           count(*) FILTER (WHERE cost_usd IS NULL
                            AND (kind = 'model' OR tokens_in IS NOT NULL OR tokens_out IS NOT NULL)) AS unpriced
    FROM steps GROUP BY run_id) s USING (run_id)
WHERE {where}
ORDER BY r.run_id
"""


def load_runs(store: Rows, filters: Filters) -> list[RunRow]:
    """The runs ``filters`` select, with their steps' token and cost sums (one query)."""
    _, rows = store.query(_RUNS_SQL.format(where=filters.where()))
    # row[:11] is exactly RunRow's leading fields (the SELECT's order); mypy cannot count a slice
    return [
        RunRow(
            *row[:11],
            tokens_in=_int(row[11]),
            tokens_out=_int(row[12]),
            cost_usd=row[13],  # type: ignore[misc]
            unpriced_steps=int(row[14]),
            infrastructure=bool(row[15]),
        )
        for row in rows
    ]


def resolve_sweeps(store: Rows, sweeps: tuple[str, ...], option: str = "--sweep") -> tuple[str, ...]:
    """Sweep ids as given, with ``last`` replaced by the most recently started sweep.

    Raises UserError naming the sweep (and ``option``, where it was given) when the store has
    no run of it: a mistyped id would otherwise be a report of nothing that exits 0."""
    if not sweeps:
        return sweeps
    # A resumed sweep that reused every run ran none of its own: its links date it.
    _, rows = store.query(
        "SELECT sweep_id FROM (SELECT sweep_id, started_at AS seen FROM runs WHERE sweep_id IS NOT NULL "
        "UNION ALL SELECT sweep_id, linked_at FROM sweep_runs) GROUP BY sweep_id ORDER BY max(seen) DESC"
    )
    known = [row[0] for row in rows]
    if not known:
        raise UserError(f"{option} {sweeps[0]}: the store has no sweep yet (crucible run -m makes one)")
    resolved = tuple(known[0] if s in LATEST else s for s in sweeps)
    for given, sweep in zip(sweeps, resolved):
        if sweep not in known:
            raise UserError(
                f"{option} {given}: no such sweep in the store (the latest is {known[0]}; {option} last names it)"
            )
    return resolved


def _int(value: int | float | None) -> int | None:
    return None if value is None else int(value)


def _literal(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def _literals(values: Iterable[str]) -> str:
    return ", ".join(_literal(v) for v in values)


# ---------------------------------------------------------------- command-line values


def filters_from_args(
    *, sweeps: list[str], agents: list[str], models: list[str], tasks: list[str], since: str | None
) -> Filters:
    """Filters from command-line values: each option repeatable, each value a comma list."""
    return Filters(
        sweeps=_split(sweeps),
        agents=_split(agents),
        models=_split(models),
        tasks=_split(tasks),
        since=parse_since(since) if since else None,
    )


def parse_ks(text: str | None) -> list[int] | None:
    """``--k 1,5`` -> [1, 5]; None (every k the attempts allow) when not given."""
    if not text:
        return None
    try:
        ks = sorted({int(k) for k in _split([text])})
    except ValueError as exc:
        raise UserError(f"--k {text!r}: give whole numbers, e.g. --k 1,5") from exc
    if not ks or ks[0] < 1:
        raise UserError(f"--k {text!r}: every k must be at least 1")
    return ks


def _split(values: list[str]) -> tuple[str, ...]:
    return tuple(v.strip() for value in values for v in value.split(",") if v.strip())


_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``7d``, ``12h``, ``30m`` (ago), or an ISO date/time (UTC unless it has an offset) -> naive UTC."""
    now = now or datetime.now(UTC)
    if match := _RELATIVE.match(text.strip()):
        delta = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        return (now - delta).astimezone(UTC).replace(tzinfo=None)
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise UserError(f"--since {text!r}: give a duration (30m, 12h, 7d, 2w) or an ISO date/time") from exc
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value
