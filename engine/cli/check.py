"""``crucible check``: the shipping gate.

For every selected task: the golden, staged by ``integration_test`` through the task's
own tools, must score 1.0, and the untouched baseline (``noop``) must score 0.0. A run
with validation warnings, a grading error or any other status fails the gate.

Verdicts are cached like Nix outputs: a spec that already has a completed run with a
deterministic agent is not run again (the table says "store"); ``--rebuild`` runs anyway,
``--check N`` runs each spec N more times and fails on any differing verdict.

A flavor that advises authors (``AdvisesAuthors``) adds a ``note`` line per task for what is
worth knowing even of a task that ships, and names the fix on a FAIL line where it knows one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from engine.cli.answers import answering
from engine.config.compose import combinations, compose_config, to_typed
from engine.config.plugins import instantiate
from engine.config.tree import no_task_selected
from engine.errors import ConfigError
from engine.interfaces import AdvisesAuthors, Flavor
from engine.models import RunRecord
from engine.plan.spec import plan
from engine.run.batch import BatchJob, run_batch
from engine.run.progress import TaskProgress
from engine.run.records import LIMIT_NOTICE
from engine.run.session import Session, housekeeping, require_integrity, session_for
from engine.util import paths
from engine.util.inputs import not_recorded
from engine.util.tables import format_table


@dataclass
class Job:
    """One side of the gate for one task: a batch job, and what its verdict must be."""

    task_id: str
    role: str
    expected: float
    flavor: Flavor
    batch: BatchJob

    @property
    def records(self) -> list[RunRecord]:
        return self.batch.records

    @property
    def from_store(self) -> bool:
        return self.batch.from_store


def plan_jobs(overrides: list[str], *, use_lock: bool = True) -> tuple[list[Job], Session]:
    """One job per task and gate role; the roles (which agent, which reward) are the task's
    flavor's (``Flavor.roles``). ``use_lock=False``: planned as if no task had a lock."""
    if any(o.split("=", 1)[0].lstrip("+~") in ("agent", "model") for o in overrides):
        raise ConfigError(
            "crucible check chooses the agents itself (the flavor's golden and baseline); drop agent=/model="
        )
    jobs: list[Job] = []
    session = None
    for combo in combinations(overrides):
        cfg = compose_config(combo)
        typed = to_typed(cfg)
        flavor = instantiate(typed.flavor, where="flavor")
        by_agent = {typed.agent.name: (cfg, typed)}  # each role's agent composed once
        for role, gate in flavor.roles.items():
            if gate.agent not in by_agent:
                composed = compose_config([*combo, f"agent={gate.agent}"])
                by_agent[gate.agent] = (composed, to_typed(composed))
            cfg, typed = by_agent[gate.agent]
            session = session or session_for(typed)
            planned = plan(typed, builder=session.builder, use_lock=use_lock)
            require_integrity(session.runtime, planned.spec.integrity)
            batch = BatchJob(
                planned,
                config=cfg,
                label=f"{planned.spec.task_id} {role}",
                retries=typed.retries.infrastructure,
            )
            jobs.append(Job(planned.spec.task_id, role, gate.reward, flavor, batch))
    if session is None:
        raise no_task_selected()
    return jobs, session


def _failures(job: Job) -> list[str]:
    expected = job.expected
    problems = []
    for record in job.records:
        if record.status != "completed":
            problems.append(f"status {record.status} in {record.error_phase}: {record.error}")
        elif record.reward != expected:
            problems.append(f"reward {record.reward} (expected {expected})")
        warnings = [w for w in record.warnings or [] if not w.startswith(LIMIT_NOTICE)]  # notices, not failures
        if warnings:  # the golden's replay warns when a validation step failed
            problems.append(f"validation warnings: {'; '.join(warnings)}")
    if len(job.records) > 1 and not _agree(job):
        problems.append(f"not reproducible: verdicts differ across {len(job.records)} runs: {_verdicts(job)}")
    return problems


def _verdicts(job: Job) -> list[float | str | None]:
    """Each run's verdict: its reward, or its status where it did not complete."""
    return [r.reward if r.status == "completed" else r.status for r in job.records]


def _agree(job: Job) -> bool:
    """Whether every run of the side completed with one reward (a failure is no verdict)."""
    return all(r.status == "completed" for r in job.records) and len(set(_verdicts(job))) == 1


def _repeats(task_id: str, roles: dict[str, Job]) -> str:
    """One line of what ``--check N`` ran for a task: per side, how many runs (a verdict taken
    from the store counts as one) and whether they agreed, so a pass says it was repeated."""
    sides = []
    for role, job in roles.items():
        said = f"all {_verdicts(job)[0]}" if _agree(job) else f"verdicts differ: {_verdicts(job)}"
        stored = ", the first from the store" if job.from_store else ""
        sides.append(f"{role} {len(job.records)} runs{stored}, {said}")
    return f"repeats {task_id}: {'; '.join(sides)}"


def _notes(job: Job) -> list[str]:
    """What the flavor says the task's author should know, whether or not the task ships."""
    if not isinstance(job.flavor, AdvisesAuthors) or not job.records:
        return []
    return job.flavor.notes(job.batch.plan.spec, job.records[-1].raw_grade or {})


def _remedy(job: Job, record: RunRecord) -> str | None:
    """The flavor's fix for this failed side (a command to run), where it knows one."""
    if not isinstance(job.flavor, AdvisesAuthors):
        return None
    return job.flavor.remedy(job.batch.plan.spec, record.raw_grade or {})


def _raw_summary(job: Job, record: RunRecord) -> str:
    """What the flavor says of the raw grade (the reason, the test command's exit code and
    last lines of output), indented under the FAIL line."""
    lines = job.flavor.explain(record.raw_grade or {}) or [json.dumps(record.raw_grade, sort_keys=True)[:500]]
    return "\n      ".join(lines)


def run_check(
    overrides: list[str],
    *,
    rebuild: bool = False,
    check: int = 0,
    parallel: int = 2,
    echo: Callable[[str], object] = print,
) -> int:
    # What it reads is recorded, so an answer all from the store is given again while none of
    # it changes (engine/cli/answers.py); --rebuild and --check N ask for runs, never that.
    with answering("check", overrides) if not (rebuild or check) else contextlib.nullcontext() as answer:
        # The configured store (store=; one for every combination) is opened by the first session,
        # before the first plan: a path that cannot be a store is one line before anything runs.
        jobs, session = plan_jobs(overrides)
        with not_recorded():  # a chore beside the answer (dead runs, orphaned bridges): none of its inputs
            housekeeping(session.store)
        with TaskProgress("check", len(jobs) * (1 + check)) as progress:  # on stderr; the verdicts below on stdout
            asyncio.run(
                run_batch(
                    [job.batch for job in jobs],
                    session,
                    root=paths.runs_dir() / "check",
                    parallel=parallel,
                    reuse=not rebuild,
                    repeats=check,
                    progress=progress,
                )
            )
        if answer is not None:
            answer.note_store(session.store.path, session.store.spool)
    kept = answer if answer is not None and all(job.from_store for job in jobs) else None  # computed nothing new
    code = _answer(jobs, check, echo if kept is None else kept.echo_through(echo))
    if kept is not None:
        kept.keep(code)
    return code


def _answer(jobs: list[Job], check: int, echo: Callable[[str], object]) -> int:
    """The verdicts' table, the repeats and notes, each failure with its raw grade; the exit code."""
    by_task: dict[str, dict[str, Job]] = {}
    for job in jobs:
        by_task.setdefault(job.task_id, {})[job.role] = job
    role_names = list(dict.fromkeys(job.role for job in jobs))  # the flavors' order: golden, baseline
    rows, failed = [], []
    for task_id, roles in sorted(by_task.items()):
        mine = list(roles.values())
        seconds = sum(_wall(r) for j in mine for r in j.records if not j.from_store or r is not j.records[0])
        stored = [j.from_store for j in mine]
        source = "store" if all(stored) else ("run" if not any(stored) else "store+run")
        rows.append(
            (
                task_id,
                *(roles[name].records[0].reward if name in roles else "" for name in role_names),
                round(seconds, 2),
                source,
                "FAIL" if any(_failures(j) for j in mine) else "ok",
            )
        )
        failed += [(job, problem) for job in mine for problem in _failures(job)]
    echo(format_table(["task", *role_names, "seconds", "verdicts from", "gate"], rows))
    if check:
        for task_id, roles in sorted(by_task.items()):
            echo(_repeats(task_id, roles))
    for task_id, roles in sorted(by_task.items()):
        for note in dict.fromkeys(n for job in roles.values() for n in _notes(job)):
            echo(f"note {task_id}: {note}")
    for job, problem in failed:
        record = job.records[-1]
        fix = _remedy(job, record)
        echo(f"FAIL {job.task_id} ({job.role}, agent {record.agent}): {problem}{f'; {fix}' if fix else ''}")
        echo(f"      raw grade: {_raw_summary(job, record)}")
        echo(f"      run {record.run_id}, logs in {record.run_dir}")
    if failed:
        echo(f"{len({j.task_id for j, _ in failed})} of {len(rows)} task(s) are not shippable")
        return 1
    expected = ", ".join(f"{name} {job.expected:g}" for name, job in {j.role: j for j in jobs}.items())
    echo(f"all {len(rows)} task(s) ship: {expected}")
    return 0


def _wall(record: RunRecord) -> float:
    from datetime import datetime

    if not record.ended_at or not record.started_at:
        return 0.0
    return (
        datetime.fromisoformat(str(record.ended_at)) - datetime.fromisoformat(str(record.started_at))
    ).total_seconds()
