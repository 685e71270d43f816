"""``crucible selfcheck task=... [overrides]``: the flavor contract, checked on a flavor's own tasks.

The runtime conformance suite (``engine.runtimes.conformance``) holds every runtime to the
``Workspace`` contract; this holds every flavor (the toy one in tests/, coding, sdlc, SWE-bench
Pro, the next one) to the ``Flavor`` contract, through the engine's interfaces only. For each
selected task (``glob()`` and sweeps select several), the checks of ``checks.CHECKS``:

- ``plan_is_pure_and_hashable``: equal specs and spec hashes from two plans; the config is
  left as it was; the stored form hashes the same; the recorded pins plan the same spec;
- ``golden_and_baseline_gate``: the flavor's gate (``crucible check``'s jobs, run or taken from
  the store's verdict cache): golden 1.0, baseline 0.0;
- ``regrade_equals_the_stored_verdict``: regrading each side's stored raw grade with its
  stored spec gives the stored reward, reason and tests;
- ``explain_covers_every_raw_grade_field``: ``explain`` reads every top-level raw-grade key,
  but for those the flavor names in ``explain_omits`` with why;
- ``a_bad_task_config_is_one_line``: a misspelled task key and a wrong-typed value each fail
  in one ConfigError line naming the key and the task.

Each result is a ``CheckResult`` (check, task, passed, one-line message); the command prints
them as a table and exits 1 on any failure. ``--rebuild`` runs the gate even where the store
has its verdicts. By hand, as the conformance suite: ``python -m engine.cli.selfcheck task=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import typing
from dataclasses import dataclass

from engine.cli.check import Job, plan_jobs
from engine.cli.selfcheck.checks import CHECKS, EXPLAIN_OMITS, Check, SelfCheckFailure, Side, Subject, expect
from engine.config.compose import to_typed
from engine.config.plugins import instantiate
from engine.run.batch import run_batch
from engine.run.session import Session, housekeeping
from engine.util import paths

__all__ = [
    "CHECKS",
    "EXPLAIN_OMITS",
    "Check",
    "CheckResult",
    "SelfCheckFailure",
    "Side",
    "Subject",
    "expect",
    "subjects",
    "run_gate",
    "run_one",
    "run_selfcheck",
    "report",
    "main",
]


@dataclass(frozen=True)
class CheckResult:
    check: str
    task_id: str
    passed: bool
    message: str = ""
    seconds: float = 0.0


def subjects(overrides: list[str]) -> tuple[list[Subject], list[Job], Session]:
    """One subject per selected task, with its gate's jobs planned (``crucible check``'s own);
    a task that two combinations select (``task=`` given twice) is checked once."""
    planned, session = plan_jobs(overrides)
    found: dict[str, Subject] = {}
    jobs = []
    for job in planned:
        subject = found.get(job.task_id)
        if subject is None:
            config = job.batch.config
            typed = to_typed(config)
            flavor = instantiate(typed.flavor, where="flavor")  # its own: no run's state in it
            subject = found[job.task_id] = Subject(job.task_id, config, typed, flavor, session.builder)
        if all(side.role != job.role for side in subject.sides):
            subject.sides.append(Side(job.role, job.expected, job.batch.plan.spec))
            jobs.append(job)
    return list(found.values()), jobs, session


def run_gate(
    subjects_: list[Subject], jobs: list[Job], session: Session, *, rebuild: bool = False, parallel: int = 2
) -> None:
    """Run the gate's jobs (or take their verdicts from the store), then read each side's run
    back from the store: the checks look at what was stored, not at what was in memory."""
    housekeeping(session.store)
    asyncio.run(
        run_batch(
            [job.batch for job in jobs], session, root=paths.runs_dir() / "check", parallel=parallel, reuse=not rebuild
        )
    )
    sides = {(s.task_id, side.role): side for s in subjects_ for side in s.sides}
    stored = session.store.completed_runs_for([job.batch.plan.spec.spec_hash for job in jobs])
    for job in jobs:
        side = sides[(job.task_id, job.role)]
        side.ran = list(job.records)
        side.stored = stored.get(side.spec.spec_hash)


def run_one(check: Check, subject: Subject) -> CheckResult:
    started = time.monotonic()
    try:
        check.run(subject)
    except SelfCheckFailure as exc:
        message = str(exc)
    except Exception as exc:  # every failure is a result, a flavor's crash too
        message = f"{type(exc).__name__}: {exc}"
    else:
        return CheckResult(check.name, subject.task_id, True, "", time.monotonic() - started)
    return CheckResult(check.name, subject.task_id, False, " ".join(message.split()), time.monotonic() - started)


def run_selfcheck(
    overrides: list[str], *, rebuild: bool = False, parallel: int = 2, checks: list[Check] | None = None
) -> list[CheckResult]:
    """Every check (or ``checks``) on every selected task: those needing no run first, then
    the gate, then those reading its stored runs."""
    chosen = CHECKS if checks is None else checks
    found, jobs, session = subjects(overrides)
    results = [run_one(one, s) for s in found for one in chosen if not one.needs_runs]
    if any(one.needs_runs for one in chosen):
        run_gate(found, jobs, session, rebuild=rebuild, parallel=parallel)
        results += [run_one(one, s) for s in found for one in chosen if one.needs_runs]
    order = {(s.task_id, one.name): i for i, (s, one) in enumerate((s, one) for s in found for one in chosen)}
    return sorted(results, key=lambda r: order[(r.task_id, r.check)])  # by task, each in CHECKS' order


def report(results: list[CheckResult]) -> str:
    from engine.util.tables import format_table

    rows = [(r.task_id, r.check, "passed" if r.passed else "FAILED", round(r.seconds, 2), r.message) for r in results]
    failed = sum(1 for r in results if not r.passed)
    return (
        format_table(["task", "check", "result", "seconds", "message"], rows, max_cell=160)
        + f"\n{len(results) - failed} passed, {failed} failed"
    )


def main(args: list[str]) -> int:
    """``crucible selfcheck``: the table of results; exit 1 on any failure."""
    from engine.config.tree import no_task_selected
    from engine.errors import UserError

    class OneLineParser(argparse.ArgumentParser):
        def error(self, message: str) -> typing.NoReturn:
            raise UserError(message)

    parser = OneLineParser(
        prog="crucible selfcheck",
        description="check the selected tasks' flavors against the flavor contract: "
        "pure plans, the gate, regrade, explain, a bad task config",
    )
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--rebuild", action="store_true", help="run the gate even if the store has its verdicts")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="runs in parallel (default 2)")
    ns = parser.parse_args(args)
    if not any(o.startswith("task=") for o in ns.overrides):
        raise no_task_selected()
    results = run_selfcheck(ns.overrides, rebuild=ns.rebuild, parallel=max(1, ns.jobs))
    print(report(results))
    for failed in (r for r in results if not r.passed):  # the table cuts long messages; here they are whole
        print(f"FAIL {failed.task_id} {failed.check}: {failed.message}")
    return 1 if any(not r.passed for r in results) else 0
