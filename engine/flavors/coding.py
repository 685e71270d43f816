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

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        await repo.setup_repo(ws, spec.task, spec.integrity, timeout=float(spec.timeouts["setup"]))

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        return await repo.capture_diff(ws, spec.task, spec.integrity, timeout=float(spec.timeouts["capture"]))

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        hidden = await asyncio.to_thread(hidden_files, spec.task)  # host git; maybe a repo generator
        return await grader.grade(ws, spec.task, spec.integrity, submission, hidden,
                                  timeout=float(spec.timeouts["grade"]))

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


def hidden_files(task: dict) -> dict[str, bytes]:
    """The hidden test files at the pinned test SHA, read from the host repo."""
    from engine.repos import git_bytes, resolve_repo

    try:
        test_sha = task["pins"]["test"]
        repo_path = resolve_repo(task["repo"])
        return {path: git_bytes(repo_path, "show", f"{test_sha}:{path}") for path in task["hidden_tests"]}
    except (KeyError, TypeError) as exc:
        raise GradeError(f"task {task.get('id')!r} lacks pins.test, repo or hidden_tests: {exc}") from exc
    except CrucibleError as exc:
        raise GradeError(f"cannot read the hidden tests of task {task.get('id')!r}: {exc}") from exc
