"""Run attacks as real crucible runs: plan, build (cached), provision, agent, capture, grade, store.

Each attack is the ``validation`` of an ``integration_test`` run of one sample task, so its
tool calls go through the task's own MCP tools exactly as a model's would (as uid 1000
under ``strict``). The task is planned once per integrity mode with Hydra's compose; each
attack then only swaps the spec's ``task.validation`` (what ``task.validation=...`` as an
override would give, without re-pinning the repo per attack). Runs go concurrently, a few
at a time: most of a run is waiting on Docker.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path
from typing import Iterable

from engine.models import RunRecord
from engine.spec import Plan

MODES = ("none", "vault", "strict")
TASK = "sample/last_page"


class AttackRunner:
    """Plans ``task`` once per mode; ``run`` executes (attack steps, mode) pairs as runs."""

    def __init__(self, task: str = TASK, modes: Iterable[str] = MODES) -> None:
        from engine.config import compose_config, to_typed
        from engine.session import session_for
        from engine.spec import plan

        self.plans: dict[str, Plan] = {}
        self.session = None
        for mode in modes:
            typed = to_typed(compose_config([f"task={task}", "agent=integration_test", f"integrity={mode}"]))
            self.session = self.session or session_for(typed)
            self.plans[mode] = plan(typed, builder=self.session.builder)
        first = next(iter(self.plans.values()))
        # One image serves every mode (integrity is not an image input): built at most once.
        self.session.builder.ensure(first.image, self.session.store)
        self.run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "attacks"

    def plan_for(self, mode: str, steps: list[dict] | None, task: dict | None = None) -> Plan:
        """The mode's plan with ``steps`` as the validation (None keeps the derived golden) and
        ``task`` merged over the task's settings (e.g. a stricter ``tests_ran_regex``)."""
        base = self.plans[mode]
        if steps is None and not task:
            return base
        merged = {**base.spec.task, **(task or {})}
        if steps is not None:
            merged["validation"] = list(steps)
        spec = dataclasses.replace(base.spec, task=merged)
        return Plan(spec=spec, image=base.image, repo_path=base.repo_path)

    async def run(self, jobs: list[tuple], concurrency: int = 4) -> dict[tuple[str, str], RunRecord]:
        """Run every ``(name, mode, steps[, task])``; the records by ``(name, mode)``."""
        from engine.runner import Runner, new_run_id

        runner = Runner(store=self.session.store, builder=self.session.builder, runtime=self.session.runtime)
        gate = asyncio.Semaphore(concurrency)

        async def one(name: str, mode: str, steps, task=None) -> tuple[tuple[str, str], RunRecord]:
            async with gate:
                run_id = new_run_id()
                record = await runner.execute(self.plan_for(mode, steps, task), self.run_root / run_id, run_id=run_id)
                return (name, mode), record

        return dict(await asyncio.gather(*(one(*job) for job in jobs)))


def step_text(record: RunRecord) -> str:
    """Every tool result of the run, joined: what the attack saw."""
    return "\n".join(str(step.result) for step in record.steps)
