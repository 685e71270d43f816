"""Real sdlc runs for the test_sdlc_* modules: compose, plan and run through the batch API."""

from __future__ import annotations

import asyncio

from engine.config.compose import compose_config, to_typed


def planned(task: str, *overrides: str, validation: list[dict] | None = None, change=None):
    """(session, plan) for ``task``; ``validation`` replaces the derived golden calls, and
    ``change(task)`` edits the typed task (keys its YAML does not set cannot be overridden)."""
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={task}", *overrides]))
    if validation is not None:
        typed.task.validation = validation
    if change is not None:
        change(typed.task)
    session = session_for(typed)
    return session, plan(typed, builder=session.builder)


def real_run(run_dir, task: str, *overrides: str, validation: list[dict] | None = None, change=None):
    from engine.run.batch import run_one

    session, plan = planned(task, *overrides, validation=validation, change=change)
    return asyncio.run(run_one(plan, session, run_dir=run_dir))


def golden_parts(task: str) -> tuple[list[dict], list[dict], list[dict]]:
    """The derived golden of an sdlc task as (read the issue, the fix's edits, push + open the PR)."""
    _, plan = planned(task, "agent=integration_test")
    steps = list(plan.spec.task.validation)
    return steps[:1], steps[1:-2], steps[-2:]


def bash(command: str) -> dict:
    return {"name": "bash", "arguments": {"command": command}}
