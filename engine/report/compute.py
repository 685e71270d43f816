"""``crucible report``: how each (agent, model) did, task by task, and what changed between sweeps.

What counts (docs/report.md has the full definitions):

- An **attempt** is one run spec (``spec_hash``: task, agent, model, attempt, seed, ...).
  A spec run more than once (``resume=true`` after a kill, a rerun) is still
  one attempt: its latest completed run if it has one, else its latest finished run;
  the other runs are *superseded* (counted, not scored).
- Runs still ``running``, runs ``canceled`` by the user and runs the infrastructure failed
  (``infrastructure``: an ``error`` of the machinery's, a Docker host or worker that went
  away) are not attempts: no verdict, and not the agent's doing. They are counted and shown;
  a spec whose every run the infrastructure failed has no attempt (``resume=true`` runs it).
- ``error`` and ``timeout`` attempts count as not solved (in pass@k and the matrix) and
  are shown separately; they have no reward, so the mean reward is over completed
  attempts only (a failure never becomes a score).
- A success is a reward >= 1.0 (``report_stats.SUCCESS``).
- Tokens and cost are what the matched runs spent, superseded and canceled runs
  included: sums over their steps. A step with tokens (or a model step) but no
  ``cost_usd`` has an unknown price; the cost shown is the known sum and the unpriced
  steps are counted beside it, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from engine.errors import UserError
from engine.report.query import Filters, Rows, RunRow, load_runs, resolve_sweeps
from engine.report.stats import Interval, mean_interval, mean_pass_at_k, median_or_none, report_ks

NOT_ATTEMPTS = ("running", "canceled")


@dataclass
class GroupSummary:
    """One (agent, model) line of the report."""

    agent: str
    model: str
    runs: int
    running: int
    canceled: int
    infrastructure: int
    superseded: int
    attempts: int
    completed: int
    errors: int
    timeouts: int
    solved: int
    mean_reward: float | None
    interval: Interval | None
    pass_at: dict[int, float | None]
    median_wall_s: float | None
    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None
    unpriced_steps: int


@dataclass(frozen=True)
class Cell:
    solved: int
    attempts: int
    failed: int  # error + timeout attempts


@dataclass
class TaskMatrix:
    tasks: list[str]
    groups: list[tuple[str, str]]
    cells: dict[tuple[str, tuple[str, str]], Cell]


@dataclass(frozen=True)
class Flip:
    agent: str
    model: str
    task_id: str
    a: Cell
    b: Cell

    @property
    def change(self) -> str:
        return "gained" if self.b.solved else "lost"


@dataclass(frozen=True)
class CompareTally:
    agent: str
    model: str
    tasks: int  # present in both sweeps
    solved_a: int
    solved_b: int
    gained: int
    lost: int
    only_a: int
    only_b: int


@dataclass
class Comparison:
    sweep_a: str
    sweep_b: str
    tallies: list[CompareTally]
    flips: list[Flip]


@dataclass
class Report:
    filters: Filters
    ks: list[int] = field(default_factory=list)
    groups: list[GroupSummary] = field(default_factory=list)
    matrix: TaskMatrix | None = None
    comparison: Comparison | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the report


def build_report(
    store: Rows, filters: Filters, *, compare: tuple[str, str] | None = None, ks: list[int] | None = None
) -> Report:
    """Everything ``crucible report`` prints. With ``compare``, only the comparison of two sweeps."""
    filters = Filters(
        resolve_sweeps(store, filters.sweeps), filters.agents, filters.models, filters.tasks, filters.since
    )
    report = Report(filters=filters)
    if compare is not None:
        if filters.sweeps:
            raise UserError("--compare names its two sweeps; drop --sweep")
        sweep_a, sweep_b = resolve_sweeps(store, compare, "--compare")
        rows_a = load_runs(store, _with_sweep(filters, sweep_a))
        rows_b = load_runs(store, _with_sweep(filters, sweep_b))
        for sweep, rows in ((sweep_a, rows_a), (sweep_b, rows_b)):
            if not rows:
                report.notes.append(f"sweep {sweep}: no runs match")
        report.comparison = compare_sweeps(sweep_a, rows_a, sweep_b, rows_b)
        return report
    rows = load_runs(store, filters)
    if not rows:
        report.notes.append("no runs match these filters")
        return report
    report.groups, report.ks = summarize(rows, ks)
    report.matrix = task_matrix(rows)
    report.notes += _notes(report.groups)
    return report


def attempts(rows: list[RunRow]) -> list[RunRow]:
    """One run per spec: its latest completed run, else its latest finished one (see module doc)."""
    best: dict[str, RunRow] = {}
    for row in rows:
        if not _attempt(row):
            continue
        current = best.get(row.spec_hash)
        if current is None or _rank(row) > _rank(current):
            best[row.spec_hash] = row
    return sorted(best.values(), key=lambda r: (r.task_id, r.run_id))


def summarize(rows: list[RunRow], ks: list[int] | None = None) -> tuple[list[GroupSummary], list[int]]:
    """One summary per (agent, model), and the k values their pass@k columns hold."""
    by_group: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        by_group[row.group].append(row)
    summaries = [_summary(group, by_group[group], ks) for group in sorted(by_group)]
    shown = sorted({k for s in summaries for k in s.pass_at}) if ks is None else sorted(set(ks))
    for s in summaries:
        s.pass_at = {k: s.pass_at.get(k) for k in shown}
    return summaries, shown


def _summary(group: tuple[str, str], rows: list[RunRow], ks: list[int] | None) -> GroupSummary:
    chosen = attempts(rows)
    completed = [r for r in chosen if r.status == "completed"]
    counts = _per_task_counts(chosen)
    min_n = min((n for n, _ in counts.values()), default=0)
    wanted = report_ks(min_n) if ks is None else ks
    mean, interval = mean_interval([r.reward for r in completed if r.reward is not None])
    spent = [r for r in rows if r.status != "running"]  # a running run's steps are not stored yet
    finished = [r for r in rows if _attempt(r)]
    return GroupSummary(
        agent=group[0],
        model=group[1],
        runs=len(rows),
        running=sum(r.status == "running" for r in rows),
        canceled=sum(r.status == "canceled" for r in rows),
        infrastructure=sum(r.infrastructure for r in rows),
        superseded=len(finished) - len(chosen),
        attempts=len(chosen),
        completed=len(completed),
        errors=sum(r.status == "error" for r in chosen),
        timeouts=sum(r.status == "timeout" for r in chosen),
        solved=sum(r.solved for r in chosen),
        mean_reward=mean,
        interval=interval,
        pass_at={k: mean_pass_at_k(counts.values(), k) for k in wanted},
        median_wall_s=median_or_none([r.wall_seconds for r in completed if r.wall_seconds is not None]),
        tokens_in=_sum_or_none(r.tokens_in for r in spent),
        tokens_out=_sum_or_none(r.tokens_out for r in spent),
        cost_usd=_sum_or_none(r.cost_usd for r in spent),
        unpriced_steps=sum(r.unpriced_steps for r in spent),
    )


def task_matrix(rows: list[RunRow]) -> TaskMatrix:
    """Solved / attempts per task and (agent, model)."""
    by_group: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        by_group[row.group].append(row)
    cells = {}
    for group, group_rows in by_group.items():
        for task, cell in _cells(attempts(group_rows)).items():
            cells[(task, group)] = cell
    tasks = sorted({task for task, _ in cells} | {r.task_id for r in rows})
    return TaskMatrix(tasks=tasks, groups=sorted(by_group), cells=cells)


def compare_sweeps(sweep_a: str, rows_a: list[RunRow], sweep_b: str, rows_b: list[RunRow]) -> Comparison:
    """Tasks solved (any attempt) in one sweep and not the other, per (agent, model)."""
    cells_a, cells_b = _group_cells(rows_a), _group_cells(rows_b)
    tallies, flips = [], []
    for group in sorted(set(cells_a) | set(cells_b)):
        a, b = cells_a.get(group, {}), cells_b.get(group, {})
        both = sorted(set(a) & set(b))
        changed = [Flip(group[0], group[1], t, a[t], b[t]) for t in both if (a[t].solved > 0) != (b[t].solved > 0)]
        flips += changed
        tallies.append(
            CompareTally(
                agent=group[0],
                model=group[1],
                tasks=len(both),
                solved_a=sum(a[t].solved > 0 for t in both),
                solved_b=sum(b[t].solved > 0 for t in both),
                gained=sum(f.change == "gained" for f in changed),
                lost=sum(f.change == "lost" for f in changed),
                only_a=len(set(a) - set(b)),
                only_b=len(set(b) - set(a)),
            )
        )
    return Comparison(sweep_a=sweep_a, sweep_b=sweep_b, tallies=tallies, flips=flips)


# ---------------------------------------------------------------- helpers


def _attempt(row: RunRow) -> bool:
    return row.status not in NOT_ATTEMPTS and not row.infrastructure


def _rank(row: RunRow) -> tuple[bool, float, int]:
    return row.status == "completed", row.ended, row.record_seq


def _per_task_counts(chosen: list[RunRow]) -> dict[str, tuple[int, int]]:
    return {task: (cell.attempts, cell.solved) for task, cell in _cells(chosen).items()}


def _cells(chosen: list[RunRow]) -> dict[str, Cell]:
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for row in chosen:
        counts = tally[row.task_id]
        counts[0] += row.solved
        counts[1] += 1
        counts[2] += row.status in ("error", "timeout")
    return {task: Cell(*counts) for task, counts in tally.items()}


def _group_cells(rows: list[RunRow]) -> dict[tuple[str, str], dict[str, Cell]]:
    by_group: dict[tuple[str, str], list[RunRow]] = defaultdict(list)
    for row in rows:
        by_group[row.group].append(row)
    return {group: _cells(attempts(group_rows)) for group, group_rows in by_group.items()}


def _with_sweep(filters: Filters, sweep: str) -> Filters:
    return Filters((sweep,), filters.agents, filters.models, filters.tasks, filters.since)


def _notes(groups: list[GroupSummary]) -> list[str]:
    notes = []
    running = sum(g.running for g in groups)
    canceled = sum(g.canceled for g in groups)
    infrastructure = sum(g.infrastructure for g in groups)
    superseded = sum(g.superseded for g in groups)
    if running:
        notes.append(f"{running} run(s) still running: not counted as attempts")
    if canceled:
        notes.append(f"{canceled} canceled run(s): not counted as attempts")
    if infrastructure:
        notes.append(
            f"{infrastructure} run(s) failed by the infrastructure (a host or worker that went away): "
            "not counted as attempts; resume=true runs what has no attempt yet"
        )
    if superseded:
        notes.append(f"{superseded} run(s) superseded by a later run of the same spec: not counted")
    if any(g.unpriced_steps for g in groups):
        notes.append("cost_usd is the sum of known prices; unpriced steps are counted beside it")
    return notes


_Num = TypeVar("_Num", int, float)


def _sum_or_none(values: Iterable[_Num | None]) -> _Num | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
