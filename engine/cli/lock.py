"""``crucible lock``: derive a task's named tests and write its lock file.

For every selected task, the flavor's golden and baseline are run (planned as if the task had
no lock; ``--check N`` runs each N more times) and the named test results of the two sides
give the fail-to-pass and pass-to-pass lists (``engine.plan.lock.derive_lists``). A task whose
grading reads no named results (the flavor says so: ``AdvisesAuthors.lock_refusal``) is one
line before anything runs. They go into
the task's lock file with the resolved SHAs and the image's input hash. A task whose F2P comes
out empty is not shippable: nothing is written for it, and the command fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from engine.cli.check import Job, plan_jobs
from engine.errors import ConfigError
from engine.interfaces import AdvisesAuthors
from engine.plan import lock
from engine.run.batch import run_batch
from engine.run.progress import TaskProgress
from engine.run.session import housekeeping
from engine.util import paths
from engine.util.tables import format_table

SIDES = ("baseline", "golden")
"""The gate roles a lock is derived from: what fails before the fix, what passes after it."""


def run_lock(overrides: list[str], *, check: int = 0, parallel: int = 2, echo: Callable[[str], object] = print) -> int:
    jobs, session = plan_jobs(overrides, use_lock=False)
    by_task: dict[str, dict[str, Job]] = {}
    for job in jobs:
        by_task.setdefault(job.task_id, {})[job.role] = job
    for task_id, roles in by_task.items():
        missing = [side for side in SIDES if side not in roles]
        if missing:
            raise ConfigError(f"task '{task_id}': its flavor has no {' or '.join(missing)} role to derive a lock from")
        task = roles["golden"].batch.plan.spec.task
        if task.fail_to_pass or task.pass_to_pass:
            raise ConfigError(f"task '{task_id}' lists fail_to_pass/pass_to_pass itself: a lock would not be used")
        if lock.lock_path(task_id) is None:
            raise ConfigError(f"task '{task_id}' has no config file to put a lock beside")
        flavor = roles["golden"].flavor
        refused = flavor.lock_refusal(roles["golden"].batch.plan.spec) if isinstance(flavor, AdvisesAuthors) else None
        if refused:  # said before anything runs: every run would end in "read no named test results"
            raise ConfigError(refused)
    housekeeping(session.store)
    with TaskProgress("lock", len(jobs) * (1 + check)) as progress:  # on stderr; the table below on stdout
        asyncio.run(
            run_batch(
                [job.batch for job in jobs],
                session,
                root=paths.runs_dir() / "lock",
                parallel=parallel,
                reuse=True,
                repeats=check,
                progress=progress,
            )
        )
    rows, failed = [], 0
    for task_id, roles in sorted(by_task.items()):
        problem = _problem(roles)
        lists: dict[str, list[str]] = {"fail_to_pass": [], "pass_to_pass": [], "flaky": []}
        if problem is None:
            lists = lock.derive_lists(*([r.tests for r in roles[side].records] for side in SIDES))
            if not lists["fail_to_pass"]:
                problem = "not shippable: no test fails on the baseline and passes on the golden"
        path = lock.lock_path(task_id)
        assert path is not None  # checked above
        if problem is None:
            spec = roles["golden"].batch.plan.spec
            lock.write_lock(
                path,
                task_id=task_id,
                pins=spec.task.pins,
                input_hash=str(spec.image["input_hash"]),
                task_inputs=lock.task_inputs(spec.task),
                lists=lists,
                repeats=1 + check,
            )
        failed += problem is not None
        rows.append(
            (
                task_id,
                len(lists["fail_to_pass"]),
                len(lists["pass_to_pass"]),
                len(lists["flaky"]),
                "FAIL" if problem else str(path),
            )
        )
        if problem:
            echo(f"FAIL {task_id}: {problem}")
        for name in lists["flaky"]:
            echo(f"flaky {task_id}: {name} (status differs across repeats; in neither list)")
    echo(format_table(["task", "fail_to_pass", "pass_to_pass", "flaky", "lock"], rows))
    return 1 if failed else 0


def _problem(roles: dict[str, Job]) -> str | None:
    """Why the runs of a task cannot give it a lock, or None."""
    for side in SIDES:
        for record in roles[side].records:
            if record.status != "completed":
                return f"the {side} run {record.run_id} ended {record.status} in {record.error_phase}: {record.error}"
    for side in SIDES:
        # Every run must have named results: a baseline run whose report was lost (a timeout,
        # a crash) would make every test the golden passes look like fail-to-pass.
        unnamed = [r.run_id for r in roles[side].records if not r.tests]
        if unnamed:
            return (
                f"the {side} run {unnamed[0]} read no named test results (results.format none, a timeout, "
                "or the runner wrote no report): a lock needs them from every run"
            )
    return None
