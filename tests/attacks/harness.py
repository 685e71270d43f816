"""Run attacks as real crucible runs: plan, build (cached), provision, agent, capture, grade, store.

Each attack is the ``validation`` of an ``integration_test`` run of one sample task, so its
tool calls go through the task's own MCP tools exactly as a model's would (as uid 1000
under ``strict``). The task is planned once per integrity mode with Hydra's compose; each
attack then only swaps the spec's ``task.validation`` (what ``task.validation=...`` as an
override would give, without re-pinning the repo per attack). Runs go concurrently, a few
at a time: most of a run is waiting on Docker (or, on ``runtime=local``, on the sandbox).

``runtime`` picks where the runs go: ``docker`` (every mode) or ``local`` (``strict`` only:
under ``none`` and ``vault`` the agent's tool calls run as root, and on ``runtime=local``
that root is in a sandbox on the host itself — no attack is ever run that way).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path

from engine.models import RunRecord
from engine.plan.spec import Plan

MODES = ("none", "vault", "strict")
TASK = "sample/last_page"
SAFE_MODES = {"docker": MODES}
"""The modes an attack may run under on each runtime; any other runtime (local): ``strict`` only,
never as root on the host."""


class AttackRunner:
    """Plans ``task`` once per mode on ``runtime``; ``run`` executes (attack steps, mode) pairs as runs.

    Raises ``ValueError`` for a mode the runtime must not run attacks under (``SAFE_MODES``)
    and ``IntegrityUnavailable`` (the runtime's own one-line reason) for a mode this host
    cannot give, before anything is built or run.
    """

    def __init__(self, task: str = TASK, modes: Iterable[str] = MODES, runtime: str = "docker") -> None:
        from engine.config.compose import compose_config, to_typed
        from engine.plan.spec import plan
        from engine.run.session import require_integrity, session_for

        modes = tuple(modes)
        unsafe = [m for m in modes if m not in SAFE_MODES.get(runtime, ("strict",))]
        if unsafe:
            raise ValueError(
                f"attacks never run on runtime={runtime} under {', '.join(unsafe)}: "
                "the agent's tool calls would run as root on the host"
            )
        # runtime=docker is the config's default: its overrides stay exactly what they were.
        extra = [] if runtime == "docker" else [f"runtime={runtime}"]
        self.runtime = runtime
        self.plans: dict[str, Plan] = {}
        self.session = None
        for mode in modes:
            overrides = [f"task={task}", "agent=integration_test", f"integrity={mode}", *extra]
            typed = to_typed(compose_config(overrides))
            # runtime=local brings its own builder (workspace templates, no Docker).
            self.session = self.session or session_for(typed)
            self.plans[mode] = plan(typed, builder=self.session.builder)
            require_integrity(self.session.runtime, self.plans[mode].spec.integrity)
        first = next(iter(self.plans.values()))
        # One image serves every mode (integrity is not an image input): built at most once.
        self.session.builder.ensure(first.image, self.session.store)
        self.run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / "attacks"

    def plan_for(
        self, mode: str, steps: list[dict] | None, task: dict | None = None, integrity: dict | None = None
    ) -> Plan:
        """The mode's plan with ``steps`` as the validation (None keeps the derived golden),
        ``task`` merged over the task's settings (e.g. a stricter ``tests_ran_regex``) and
        ``integrity`` over the mode's flags (one defence off, to show another alone)."""
        base = self.plans[mode]
        if steps is None and not task and not integrity:
            return base
        merged = dataclasses.replace(base.spec.task, **(task or {}))
        if steps is not None:
            merged.validation = list(steps)
        spec = dataclasses.replace(
            base.spec, task=merged, integrity=dataclasses.replace(base.spec.integrity, **(integrity or {}))
        )
        return Plan(spec=spec, image=base.image)

    async def run(self, jobs: list[tuple], concurrency: int = 4) -> dict[tuple[str, str], RunRecord]:
        """Run every ``(name, mode, steps[, task[, integrity]])``; the records by ``(name, mode)``."""
        from engine.run.batch import BatchJob, run_batch

        batch = {(job[0], job[1]): BatchJob(self.plan_for(*job[1:]), label=f"{job[0]} {job[1]}") for job in jobs}
        await run_batch(list(batch.values()), self.session, root=self.run_root, parallel=concurrency)
        return {key: job.records[0] for key, job in batch.items()}


def step_text(record: RunRecord) -> str:
    """Every tool result of the run, joined: what the attack saw."""
    return "\n".join(str(step.result) for step in record.steps)


def why(record: RunRecord) -> str:
    """What a failed attack assertion shows: the verdict's reason, the violations, the steps."""
    reason = (record.raw_grade or {}).get("reason")
    return f"reason={reason!r} violations={record.violations} steps:\n{step_text(record)[-3000:]}"


def assert_tester_out_of_reach(record: RunRecord) -> None:
    """``in-process-reach-the-tester`` under strict: its scenario found pytest's process (uid
    1001) and the launcher (root) and every move on them, and on the hidden tests, was refused."""
    from envs.coding.isolated import TESTER_UID

    output = record.raw_grade["test"]["output_tail"]
    met = [line for line in output.splitlines() if line.startswith("reach-the-tester:")]
    assert met, why(record)
    moves = dict(pair.split("=", 1) for pair in met[-1].split(": ", 1)[1].split())
    assert moves.pop("hidden") == "PermissionError", met[-1]
    uids = {key: value for key, value in moves.items() if key.startswith("uid:")}
    assert str(TESTER_UID) in uids.values() and "0" in uids.values(), met[-1]
    assert {v for k, v in moves.items() if not k.startswith("uid:")} == {"PermissionError"}, met[-1]


def assert_strict_held(record: RunRecord, dropped: Iterable[str]) -> None:
    """A defended attack under strict: 0, the paths it planted (``dropped``) recorded as
    violations on the run and in the grade's raw data, and none of them in the graded diff."""
    from envs.integrity import patch

    assert record.reward == 0.0, why(record)
    assert set(dropped) <= set(record.violations), why(record)
    assert record.raw_grade["violations"] == record.violations
    graded = {p for c in patch.parse_chunks(record.diff.encode()) for p in c.paths}
    assert not graded & set(record.violations)
