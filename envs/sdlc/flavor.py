"""The ``sdlc`` flavor: work an issue through a mock GitHub; the deliverable is a pushed
branch with a pull request, graded on the PR's head.

It is the coding flavor (same repos, refs, hidden tests, grading in a fresh workspace) with:
services -> the run's bare remote on the host, relayed into the workspace over the bridge
(``remote.py``), ``main`` = what the agent starts from; setup -> the coding repo setup, then
``origin`` pointed at the relay; tools -> the coding tools + ``github_*`` (``github.py``);
capture -> the latest open PR and its head AS THE REMOTE HOLDS IT NOW, diffed against main
on the host; grade -> tests (the coding grader on that diff) 0.8 + the PR check 0.2.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from engine.errors import CaptureError, ConfigError, SetupError
from engine.interfaces import PlanContext, PlannedTask, Workspace
from engine.models import CapturedSubmission, RunSpec, UpstreamFix, Verdict
from engine.plan import repos
from engine.util import shell
from envs.coding import judging, repo
from envs.coding.defences import RUNTIME_EVIDENCE, CodingIntegrity
from envs.coding.flavor import CodingFlavor
from envs.coding.gitops import brief, run_script
from envs.coding.schema import CodingTaskConfig
from envs.integrity import patch
from envs.integrity.catalogue import register
from envs.sdlc import prcheck, remote
from envs.sdlc.github import MockGitHub
from envs.sdlc.schema import SdlcTaskConfig
from envs.sdlc.tools import SdlcTools

TESTS_WEIGHT, PR_WEIGHT = 0.8, 0.2
RELAY = f"/run/crucible/{remote.RELAY_NAME}"
SHOWN_CALLS = 40

register("sdlc", CodingIntegrity, *RUNTIME_EVIDENCE)  # graded by the coding grader: its defences, its schema


class SdlcFlavor(CodingFlavor):
    task_schema: ClassVar[type] = SdlcTaskConfig

    def __init__(self, name: str = "sdlc") -> None:
        super().__init__(name)
        self._github: MockGitHub | None = None
        self._remote: remote.Remote | None = None

    @classmethod
    def new_task(cls, fix: UpstreamFix) -> Path:
        """Not for sdlc (yet): the issues a task is worked from are not in a fix commit."""
        raise ConfigError(
            "crucible task new cannot make an sdlc task: make a coding task (--flavor coding), then "
            "add the flavor override and its issues by hand (docs/sdlc.md)"
        )

    # ------------------------------------------------------------ plan
    def plan_task(self, task: CodingTaskConfig, ctx: PlanContext) -> PlannedTask:
        if not isinstance(task, SdlcTaskConfig):  # typed by task_schema at the edge: always one
            raise ConfigError(f"task '{task.id}' is not an sdlc task")
        _check_issues(task)
        derive = task.validation is None
        if "python3" not in task.system_packages:  # the relay (relay.py) runs in the workspace
            task.system_packages = [*task.system_packages, "python3"]
        planned = super().plan_task(task, ctx)
        if derive:  # the golden: the fix's edits, then a branch pushed and a PR opened through the tools
            task.validation = [*golden_steps_before(task), *(task.validation or []), *golden_steps_after(task)]
        return planned

    # ------------------------------------------------------------ run
    @contextlib.asynccontextmanager
    async def services(self, spec: RunSpec, bridge_dir: str) -> AsyncIterator[None]:
        """The run's remote, seeded with main and served on the bridge, for the whole run."""
        task: SdlcTaskConfig = spec.task
        async with remote.serving(bridge_dir) as served:
            try:
                source = await asyncio.to_thread(repos.resolve_repo, task.repo)
                await asyncio.to_thread(
                    served.seed, source, repo.baseline_of(task), fresh=spec.integrity.vault, fresh_date=repo.FRESH_DATE
                )
            except Exception as exc:
                raise SetupError(f"the mock remote of task {task.id!r} could not be seeded: {exc}") from exc
            self._remote = served
            self._github_for(task).remote = served
            yield

    def tools(self, ws: Workspace, spec: RunSpec) -> SdlcTools:  # type: ignore[override]  # a ToolSet still
        return SdlcTools(super().tools(ws, spec), self._github_for(spec.task))

    holds_capture: ClassVar[bool] = False  # its submission is the remote's PR, not the workspace's diff

    async def setup(self, ws: Workspace, spec: RunSpec, *, script_done: bool = False) -> None:
        await super().setup(ws, spec, script_done=script_done)  # the repo's; then its origin, per run
        workdir = repo.workdir_of(spec.task)
        args = [workdir, RELAY, "1" if spec.integrity.uid_wall else "0"]
        result = await run_script(
            ws, shell.script(__file__, "setup_origin.sh"), args, timeout=float(spec.timeouts.setup)
        )
        if not result.ok:
            raise SetupError(f"origin setup failed in {workdir}: {brief(result)}")
        # The first fetch, as the agent: origin/main exists, and the relay is proven to work.
        user = self.tools(ws, spec).user
        fetched = await ws.exec(
            ["git", "fetch", "-q", "origin"], user=user, cwd=workdir, timeout=float(spec.timeouts.setup)
        )
        if not fetched.ok:
            raise SetupError(f"the agent's repo cannot fetch from the mock remote: {brief(fetched)}")

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        """The latest open PR's head as the remote holds it once the agent is done (a
        force-push after opening counts), diffed against main on the host."""
        task: SdlcTaskConfig = spec.task
        github, served = self._github_for(task), self._remote
        if served is None:
            raise CaptureError("the run has no mock remote (services were not started)")
        # Frozen first: what is captured is what the remote holds once the agent is done,
        # and nothing left running in the workspace can move a branch after this.
        await served.freeze()
        change = await self._prefetch_hidden(task)
        data: dict[str, Any] = {
            "main": served.main,
            "reason": None,
            "pull_request": None,
            "transcript": list(github.transcript),
            "pushes": list(served.pushes),
        }
        pull = github.latest_open_pull()
        if pull is None:
            data["reason"] = "no open pull request"
            return CapturedSubmission(diff="", kind="pull_request", data=data)
        head_sha = await asyncio.to_thread(served.head_of, pull.head)
        data["pull_request"] = {
            "number": pull.number,
            "title": pull.title,
            "body": pull.body,
            "head": pull.head,
            "base": pull.base,
            "head_sha": head_sha,
        }
        if head_sha is None:
            data["reason"] = f"the pull request's head branch {pull.head!r} is not on the remote"
            return CapturedSubmission(diff="", kind="pull_request", data=data)
        try:
            raw_diff = await asyncio.to_thread(served.diff, served.main, head_sha)
            chunks = patch.parse_chunks(raw_diff)
        except Exception as exc:
            raise CaptureError(f"cannot diff the PR head {head_sha[:12]} against main: {exc}") from exc
        # The coding flavor's own rule for what of a diff counts (test and protected paths
        # dropped and recorded as violations under the modes that say so).
        kept = repo.submission_from_chunks(chunks, task, spec.integrity, [f.path for f in change])
        return CapturedSubmission(
            diff=kept.diff, files_changed=kept.files_changed, violations=kept.violations, kind="pull_request", data=data
        )

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        return await self._graded(spec, submission, lambda: super(SdlcFlavor, self).grade(ws, spec, submission))

    async def grade_many(
        self, workspaces: Sequence[Workspace], spec: RunSpec, submission: CapturedSubmission
    ) -> Verdict:
        """The PR's tests graded with the coding flavor's differential re-run."""
        return await self._graded(
            spec, submission, lambda: super(SdlcFlavor, self).grade_many(workspaces, spec, submission)
        )

    async def _graded(
        self, spec: RunSpec, submission: CapturedSubmission, tests_verdict: Callable[[], Awaitable[Verdict]]
    ) -> Verdict:
        task: SdlcTaskConfig = spec.task
        raw: dict[str, Any] = dict(submission.data)
        if raw.get("reason"):
            return self.regrade(spec, raw)
        tests = await tests_verdict()
        raw["tests"] = tests.raw
        pull = raw["pull_request"]
        if task.pr_rubric:
            raw["pr_check"] = await prcheck.judge(task, pull, submission.diff)
        else:
            raw["pr_check"] = {"kind": "structural", "checks": prcheck.structural(pull, prcheck.issue_number(task))}
        return self.regrade(spec, raw)

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        """tests 0.8 + PR check 0.2; nothing at all without a PR whose head the remote has."""
        if raw.get("reason") or raw.get("tests") is None:
            return Verdict(reward=0.0, subscores={"tests": 0.0, "pr_check": 0.0}, raw=dict(raw))
        tests = judging.regrade(raw["tests"], spec.task)
        pr = prcheck.score(raw.get("pr_check") or {})
        subscores = {"tests": tests.reward, "pr_check": pr, **{f"tests.{k}": v for k, v in tests.subscores.items()}}
        reward = round(TESTS_WEIGHT * tests.reward + PR_WEIGHT * pr, 6)
        return Verdict(reward=reward, subscores=subscores, raw=dict(raw), tests=tests.tests)

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        pull = raw.get("pull_request") or {}
        lines = [
            json.dumps(
                {
                    "reason": raw.get("reason"),
                    "pull_request": pull.get("number"),
                    "head": pull.get("head"),
                    "head_sha": pull.get("head_sha"),
                    "main": raw.get("main"),
                },
                sort_keys=True,
            )
        ]
        pushes = list(raw.get("pushes") or [])
        lines.append(
            f"pushes ({len(pushes)}):"
            + "".join(
                f" [exit {p.get('exit_code')}: "
                + ", ".join(f"{b} {str(sha)[:12]}" for b, sha in sorted((p.get("branches") or {}).items()))
                + "]"
                for p in pushes[:SHOWN_CALLS]
            )
        )
        if raw.get("pr_check"):
            lines.append("PR check: " + prcheck.describe(raw["pr_check"]))
        calls = list(raw.get("transcript") or [])
        lines.append(f"github calls ({len(calls)}):" + ("" if calls else " none"))
        lines += [
            f"  {c.get('seq')} {'ERR' if c.get('is_error') else 'ok '} {c.get('tool')} "
            f"{json.dumps(c.get('arguments'))[:100]}"
            for c in calls[:SHOWN_CALLS]
        ]
        if len(calls) > SHOWN_CALLS:
            lines.append(f"  ... and {len(calls) - SHOWN_CALLS} more")
        if raw.get("tests"):
            lines += super().explain(raw["tests"])
        return lines

    def _github_for(self, task: SdlcTaskConfig) -> MockGitHub:
        if self._github is None:
            self._github = MockGitHub(list(task.issues))
        return self._github


def _check_issues(task: SdlcTaskConfig) -> None:
    numbers = [i.number for i in task.issues]
    if not numbers:
        raise ConfigError(f"task '{task.id}': task.issues is empty (an sdlc task works from at least one issue)")
    if len(set(numbers)) != len(numbers) or any(n < 1 for n in numbers):
        raise ConfigError(f"task '{task.id}': task.issues numbers must be distinct and positive, got {numbers}")
    if task.issue is not None and task.issue not in numbers:
        raise ConfigError(f"task '{task.id}': task.issue {task.issue} is not one of task.issues {numbers}")
    if task.pr_rubric and not task.judge.model:
        raise ConfigError(f"task '{task.id}': task.pr_rubric needs task.judge.model (provider/name)")


def golden_steps_before(task: SdlcTaskConfig) -> list[dict]:
    return [{"name": "github_get_issue", "arguments": {"number": prcheck.issue_number(task)}}]


def golden_steps_after(task: SdlcTaskConfig) -> list[dict]:
    number = prcheck.issue_number(task)
    issue = next(i for i in task.issues if i.number == number)
    branch = shlex.quote(task.branch)
    push = (
        f"git checkout -q -b {branch} && git add -A && git commit -q -m {shlex.quote(f'Fix #{number}')} "
        f"&& git push -q origin {branch}"
    )
    return [
        {"name": "bash", "arguments": {"command": push}},
        {
            "name": "github_create_pull_request",
            "arguments": {
                "title": f"Fix #{number}: {issue.title}",
                "head": task.branch,
                "base": "main",
                "body": f"Fixes #{number}.\n\n{issue.title}: fixed, as the issue describes.",
            },
        },
    ]
