"""The toy flavor: question in, answer out, graded by comparing with the host-side answer."""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import MISSING

from engine.config.schema import TaskConfig
from engine.errors import ConfigError, GradeError
from engine.interfaces import AGENT_UID, ROOT_UID, PlanContext, PlannedTask, Workspace
from engine.models import CapturedSubmission, GateRole, ImageInputs, RunSpec, Verdict
from envs.integrity.catalogue import refusal

WORKDIR = "/toy"
ANSWER = f"{WORKDIR}/answer.txt"
QUESTION = f"{WORKDIR}/question.txt"


@dataclass
class ToyTaskConfig(TaskConfig):
    question: str = MISSING
    answer: str = MISSING
    """Kept host-side: it reaches only the grader, never the agent's workspace."""


class ToyTools:
    """One tool, ``answer``: writes the agent's answer, as the agent's uid."""

    def __init__(self, ws: Workspace, user: int) -> None:
        self.ws, self.user, self.workdir = ws, user, WORKDIR

    def specs(self) -> list[dict]:
        return [
            {
                "name": "answer",
                "description": "Give your answer to the question in question.txt.",
                "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            }
        ]

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        if name != "answer" or not isinstance(arguments.get("text"), str):
            return f"unknown tool or bad arguments: {name} {arguments}", True
        result = await self.ws.exec(
            ["sh", "-c", f"cat > {ANSWER}"], user=self.user, cwd=WORKDIR, stdin=arguments["text"].encode()
        )
        return ("answered", False) if result.ok else (result.text(), True)


class ToyFlavor:
    task_schema: ClassVar[type] = ToyTaskConfig
    roles: ClassVar[Mapping[str, GateRole]] = {
        "golden": GateRole("integration_test", 1.0),
        "baseline": GateRole("noop", 0.0),
    }

    def __init__(self, name: str = "toy") -> None:
        self.name = name

    def plan_task(self, task: ToyTaskConfig, ctx: PlanContext) -> PlannedTask:
        if not task.answer.strip():
            raise ConfigError(f"task '{task.id}': answer is empty")
        task.pins = {"answer_sha256": hashlib.sha256(task.answer.encode()).hexdigest()}
        if task.validation is None:  # the golden: answer right, through the task's own tool
            task.validation = [{"name": "answer", "arguments": {"text": task.answer}}]
        context = ctx.cache_dir / "toy-context"
        context.mkdir(parents=True, exist_ok=True)
        dockerfile = Path(__file__).with_name("Dockerfile")
        return PlannedTask(task=task, image=ImageInputs(str(dockerfile), str(context), {"BASE": ctx.base_image()}))

    def tools(self, ws: Workspace, spec: RunSpec) -> ToyTools:
        return ToyTools(ws, AGENT_UID if spec.integrity.uid_wall else ROOT_UID)

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        await ws.write_file(QUESTION, spec.task.question.encode(), owner=AGENT_UID)

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        return None

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        try:
            text = (await ws.read_file(ANSWER)).decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        return CapturedSubmission(diff=text, kind="answer")

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        """In the fresh workspace: the answer goes in, a comparison runs, its exit code decides."""
        await ws.write_file(ANSWER, submission.diff.encode())
        expected = spec.task.answer.strip()
        result = await ws.exec(["sh", "-c", f'test "$(cat {ANSWER})" = {shlex.quote(expected)}'], timeout=30)
        if result.timed_out:
            raise GradeError("the comparison timed out")
        return self.regrade(spec, {"answer": submission.diff, "exit_code": result.exit_code})

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        """Right or wrong by the comparison's exit code; a right answer one of the mode's
        defences refuses (the flavor's ``integrity_schema``: none here) scores 0 with its reason."""
        right = raw.get("exit_code") == 0
        refused = refusal(spec.integrity, raw) if right else None
        passed = right and not refused
        return Verdict(
            reward=1.0 if passed else 0.0,
            subscores={"answer": 1.0 if passed else 0.0},
            raw={**raw, "reason": refused or ("right answer" if right else "wrong answer")},
        )

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        return [
            f"reason: {raw.get('reason')}; the comparison exited {raw.get('exit_code')}; "
            f"answer given: {str(raw.get('answer'))[:80]!r}"
        ]


class ToyManyFlavor(ToyFlavor):
    """The toy flavor grading in ``workspaces`` fresh workspaces (the engine's ``GradesInMany``):
    each is asked for its hostname (the container's) and whether another grading's mark is
    already there, and the answer is compared in every one of them."""

    def __init__(self, name: str = "toy_many", workspaces: int = 3) -> None:
        super().__init__(name)
        self.workspaces = workspaces
        self.prepared: dict[int, str] = {}

    def grading_workspaces(self, spec: RunSpec) -> int:
        return self.workspaces

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        self.prepared[0] = await self._hostname(ws)

    async def prepare_extra_grading(self, ws: Workspace, spec: RunSpec, index: int) -> None:
        self.prepared[index] = await self._hostname(ws)

    async def grade_many(self, workspaces, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        seen = []
        for ws in workspaces:  # one after another: a mark left in a shared workspace would show
            marked = await ws.exec(["sh", "-c", "test -e /toy/graded; echo $?; hostname; touch /toy/graded"])
            fresh, host = marked.stdout.decode().split()
            seen.append({"host": host, "fresh": fresh == "1"})
        verdicts = [await self.grade(ws, spec, submission) for ws in workspaces]
        raw = {
            **verdicts[0].raw,
            "gradings": seen,
            "prepared": [self.prepared.get(i) for i in range(len(workspaces))],
            "rewards": [v.reward for v in verdicts],
        }
        return Verdict(reward=min(v.reward for v in verdicts), subscores=verdicts[0].subscores, raw=raw)

    async def _hostname(self, ws: Workspace) -> str:
        return (await ws.exec(["hostname"])).stdout.decode().strip()
