"""``crucible check``: the shipping gate.

For every selected task: the golden, staged by ``integration_test`` through the task's
own tools, must score 1.0, and the untouched baseline (``noop``) must score 0.0. A run
with validation warnings, a grading error or any other status fails the gate.

Verdicts are cached like Nix outputs: a spec that already has a completed run with a
deterministic agent is not run again (the table says "store"); ``--rebuild`` runs anyway,
``--check N`` runs each spec N more times and fails on any differing verdict.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from omegaconf import OmegaConf

from engine.util import paths
from engine.config.compose import combinations, compose_config, to_typed
from engine.errors import ConfigError
from engine.models import RunRecord
from engine.run.trial import Runner, new_run_id
from engine.run.session import Session, housekeeping, open_store, require_integrity, session_for
from engine.plan.spec import Plan, plan
from engine.util.tables import format_table

ROLES = {"golden": ("integration_test", 1.0), "baseline": ("noop", 0.0)}


@dataclass
class Job:
    task_id: str
    role: str
    plan: Plan
    config_yaml: str
    records: list[RunRecord] = field(default_factory=list)
    from_store: bool = False


def plan_jobs(overrides: list[str]) -> tuple[list[Job], Session]:
    if any(o.split("=", 1)[0].lstrip("+~") in ("agent", "model") for o in overrides):
        raise ConfigError("crucible check chooses the agents itself (integration_test and noop); drop agent=/model=")
    jobs, session = [], None
    for combo in combinations(overrides):
        for role, (agent, _) in ROLES.items():
            cfg = compose_config([*combo, f"agent={agent}"])
            typed = to_typed(cfg)
            session = session or session_for(typed)
            planned = plan(typed, builder=session.builder)
            require_integrity(session.runtime, planned.spec.integrity)
            jobs.append(Job(planned.spec.task_id, role, planned, OmegaConf.to_yaml(cfg)))
    return jobs, session


async def _execute(job: Job, session: Session, gate: asyncio.Semaphore) -> RunRecord:
    async with gate:
        run_id = new_run_id()
        run_dir = paths.runs_dir() / "check" / run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(job.config_yaml)
        runner = Runner(store=session.store, builder=session.builder, runtime=session.runtime)
        return await runner.execute(job.plan, run_dir, run_id=run_id)


async def _run_all(jobs: list[Job], session: Session, *, rebuild: bool, extra: int, parallel: int) -> None:
    gate = asyncio.Semaphore(parallel)
    # Build each distinct image once, before fanning out, so parallel runs never race a build.
    for image in {job.plan.image.tag: job.plan.image for job in jobs}.values():
        await asyncio.to_thread(session.builder.ensure, image, session.store)

    async def one(job: Job) -> None:
        cached = None if rebuild else session.store.completed_run_for(job.plan.spec.spec_hash)
        if cached is not None:
            job.records.append(cached)
            job.from_store = True
        else:
            job.records.append(await _execute(job, session, gate))
        for _ in range(extra):
            job.records.append(await _execute(job, session, gate))

    await asyncio.gather(*(one(job) for job in jobs))


def _failures(job: Job) -> list[str]:
    expected = ROLES[job.role][1]
    problems = []
    for record in job.records:
        if record.status != "completed":
            problems.append(f"status {record.status} in {record.error_phase}: {record.error}")
        elif record.reward != expected:
            problems.append(f"reward {record.reward} (expected {expected})")
        if job.role == "golden" and record.warnings:
            problems.append(f"validation warnings: {'; '.join(record.warnings)}")
    rewards = {r.reward for r in job.records if r.status == "completed"}
    if len(job.records) > 1 and (len(rewards) > 1 or any(r.status != "completed" for r in job.records)):
        problems.append(f"not reproducible: verdicts differ across {len(job.records)} runs: "
                        f"{[r.reward if r.status == 'completed' else r.status for r in job.records]}")
    return problems


def _raw_summary(record: RunRecord) -> str:
    raw = record.raw_grade or {}
    keep = {k: raw[k] for k in ("reason", "exit_code", "test_exit_code", "apply_exit_code") if k in raw}
    tail = raw.get("output_tail") or raw.get("test_output_tail") or ""
    text = json.dumps(keep, sort_keys=True)
    if tail:
        text += "\n      output tail: " + "\n      ".join(str(tail).strip().splitlines()[-8:])
    return text


def run_check(overrides: list[str], *, rebuild: bool = False, check: int = 0, parallel: int = 2,
              echo=print) -> int:
    store = open_store()
    housekeeping(store)
    jobs, session = plan_jobs(overrides)
    asyncio.run(_run_all(jobs, session, rebuild=rebuild, extra=check, parallel=parallel))
    by_task: dict[str, dict[str, Job]] = {}
    for job in jobs:
        by_task.setdefault(job.task_id, {})[job.role] = job
    rows, failed = [], []
    for task_id, roles in sorted(by_task.items()):
        golden, baseline = roles["golden"], roles["baseline"]
        seconds = sum(_wall(r) for j in (golden, baseline) for r in j.records if not j.from_store or r is not j.records[0])
        source = "store" if golden.from_store and baseline.from_store else ("run" if not (golden.from_store or baseline.from_store) else "store+run")
        rows.append((task_id, golden.records[0].reward, baseline.records[0].reward, round(seconds, 2), source,
                     "ok" if not (_failures(golden) or _failures(baseline)) else "FAIL"))
        for job in (golden, baseline):
            for problem in _failures(job):
                failed.append((job, problem))
    echo(format_table(["task", "golden", "baseline", "seconds", "verdicts from", "gate"], rows))
    for job, problem in failed:
        record = job.records[-1]
        echo(f"FAIL {job.task_id} ({job.role}, agent {record.agent}): {problem}")
        echo(f"      raw grade: {_raw_summary(record)}")
        echo(f"      run {record.run_id}, logs in {record.run_dir}")
    if failed:
        echo(f"{len({j.task_id for j, _ in failed})} of {len(rows)} task(s) are not shippable")
        return 1
    echo(f"all {len(rows)} task(s) ship: golden 1.0, baseline 0.0")
    return 0


def _wall(record: RunRecord) -> float:
    from datetime import datetime

    if not record.ended_at or not record.started_at:
        return 0.0
    return (datetime.fromisoformat(str(record.ended_at)) - datetime.fromisoformat(str(record.started_at))).total_seconds()
