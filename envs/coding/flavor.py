"""The ``coding`` flavor's host side: three-branch tasks graded by a test command's exit code.

setup -> ``envs.coding.repo.setup_repo``; capture -> ``capture_diff``; grade -> the hidden
tests are read from the HOST repo at the pinned test SHA (the answer key never enters
the agent's workspace, only the grading one) and handed to ``envs.coding.grader.grade``.
"""
from __future__ import annotations

import asyncio

from engine.errors import ConfigError, CrucibleError, GradeError
from engine.interfaces import AGENT_UID, ROOT_UID, Workspace
from engine.models import CapturedSubmission, RunSpec, Verdict
from envs.coding import grader, repo
from envs.coding.tools import CodingTools


class CodingFlavor:
    def __init__(self, name: str = "coding") -> None:
        self.name = name
        self._hidden: asyncio.Future | None = None
        self._hidden_for: tuple | None = None
        self._prepared: tuple[Workspace, grader.staging.Staging] | None = None

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        # The hidden tests are read from the host repo while the agent works, not between
        # capture and grading, where those git processes (~0.05 s) would hold up the run.
        self._prefetch_hidden(spec.task)
        await repo.setup_repo(ws, spec.task, spec.integrity, timeout=float(spec.timeouts["setup"]))

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        return await repo.capture_diff(ws, spec.task, spec.integrity, timeout=float(spec.timeouts["capture"]))

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        """Optional, ahead of ``grade`` on the same fresh workspace (the runner calls it while the
        agent works): grading's commands start there and wait for the submission."""
        self._prepared = (ws, await grader.prepare(ws, spec.task, spec.integrity))

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        hidden = await self._prefetch_hidden(spec.task)
        prepared, self._prepared = self._prepared, None
        return await grader.grade(ws, spec.task, spec.integrity, submission, hidden,
                                  timeout=float(spec.timeouts["grade"]),
                                  prepared=prepared[1] if prepared is not None and prepared[0] is ws else None)

    def _prefetch_hidden(self, task: dict) -> asyncio.Future:
        """Start reading ``task``'s hidden tests (host git; maybe a repo generator) once per task."""
        stale = self._hidden is None or self._hidden.get_loop() is not asyncio.get_running_loop()
        if stale or self._hidden_for != _hidden_key(task):
            self._hidden_for = _hidden_key(task)
            self._hidden = asyncio.ensure_future(asyncio.to_thread(hidden_files, task))
            # A run that ends before grading never awaits it: its error is not news then.
            self._hidden.add_done_callback(lambda fut: fut.cancelled() or fut.exception())
        return self._hidden

    def tools_for(self, ws: Workspace, spec: RunSpec) -> CodingTools:
        """The agent's tools on ``ws``, as uid 1000 under the uid wall, else root."""
        env = spec.env
        try:
            return CodingTools(
                ws,
                workdir=repo.workdir_of(spec.task, ConfigError),
                user=AGENT_UID if spec.integrity.get("uid_wall") else ROOT_UID,
                bash_timeout=float(env.get("bash_timeout", 120.0)),
                max_output_bytes=int(env.get("max_output_bytes", 32768)),
                enabled=list(env.get("tools") or ["bash", "str_replace_based_edit_tool"]),
            )
        except ValueError as exc:
            raise ConfigError(f"env {env.get('name')!r}: {exc}") from exc


def _hidden_key(task: dict) -> tuple:
    return (task.get("repo"), str((task.get("pins") or {}).get("test")), tuple(task.get("hidden_tests") or ()))


def hidden_files(task: dict) -> dict[str, bytes]:
    """The hidden test files at the pinned test SHA, read from the host repo."""
    from engine.plan.repos import git_bytes, resolve_repo

    try:
        test_sha = task["pins"]["test"]
        repo_path = resolve_repo(task["repo"])
        return {path: git_bytes(repo_path, "show", f"{test_sha}:{path}") for path in task["hidden_tests"]}
    except (KeyError, TypeError) as exc:
        raise GradeError(f"task {task.get('id')!r} lacks pins.test, repo or hidden_tests: {exc}") from exc
    except CrucibleError as exc:
        raise GradeError(f"cannot read the hidden tests of task {task.get('id')!r}: {exc}") from exc
