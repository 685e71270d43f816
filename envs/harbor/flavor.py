"""The ``harbor`` flavor: a Harbor task folder as a crucible task (docs/harbor.md).

plan -> the folder read (``folder.py``): instruction.md as the prompt, task.toml's limits as the
run's (``limits``: the agent's time, grading's, cpus, memory, network), the parts' content hashes
as pins, the golden as Harbor's ``oracle`` (solution/ carried in through the agent's own bash tool
into /solution, solve.sh run, then emptied); the image = environment/ built like any
image (``image.py``). The agent works through the coding tools in the Dockerfile's WORKDIR;
capture is the binary diff of that directory against the baseline the image committed
(``sh/capture.sh``); grading, in a fresh workspace, applies it and runs tests/test.sh
(``grader.py``), and the reward is Harbor's reward file (``reward.py``).
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from engine.config.schema import IntegrityConfig
from engine.errors import CaptureError, ConfigError, SetupError, WorkspaceError
from engine.interfaces import AGENT_UID, ROOT_UID, PlanContext, PlannedTask, Workspace
from engine.models import CapturedSubmission, GateRole, RunSpec, TaskLimits, Verdict
from engine.util import shell
from envs.coding import protect
from envs.coding.defences import DROP_PROTECTED, VAULT
from envs.coding.tools import CodingTools
from envs.harbor import folder as harbor_folder
from envs.harbor import grader, image, reward
from envs.harbor.schema import HarborTaskConfig
from envs.integrity import patch
from envs.integrity.catalogue import register

ORACLE_DIR = "/solution"
"""Where the golden (Harbor's oracle) unpacks solution/ for the run of solve.sh, and empties it
after: Harbor's own place, since real solve.sh files name their helpers by absolute path
(``python3 /solution/solve.py``). The image's tail makes it, empty, writable by uid 1000."""
_PAYLOAD = "/tmp/.crucible-oracle.b64"
ORACLE_SLACK = 30.0
"""Seconds solve.sh's own bash call may run past ``[agent].timeout_sec``: the run's agent limit
(the task's, ``limits``) ends it first, and the run is a timeout as Harbor's would be."""
_CHUNK = 64 * 1024
"""Base64 characters per tool call carrying solution/ (well under the kernel's argument limit)."""


@dataclass
class HarborIntegrity(IntegrityConfig):
    """Harbor's integrity config: the engine's isolation, the vault (the image's history, see
    sh/setup.sh) and protected paths dropped from the graded diff."""

    vault: bool = VAULT.field()
    drop_protected: bool = DROP_PROTECTED.field()


register("harbor", HarborIntegrity)


class HarborFlavor:
    task_schema: ClassVar[type] = HarborTaskConfig
    integrity_schema: ClassVar[type] = HarborIntegrity
    roles: ClassVar[Mapping[str, GateRole]] = {
        "golden": GateRole("integration_test", 1.0),
        "baseline": GateRole("noop", 0.0),
    }
    """golden = solution/solve.sh run as the agent (Harbor's ``oracle``); baseline = nothing (``nop``)."""

    def __init__(self, name: str = "harbor") -> None:
        self.name = name

    def plan_task(self, task: HarborTaskConfig, ctx: PlanContext) -> PlannedTask:
        found = harbor_folder.read(Path(task.path))
        if not found.workdir:
            raise ConfigError(
                f"harbor task {task.id}: environment/Dockerfile sets no WORKDIR; crucible captures "
                "the task's working directory, so name it (e.g. WORKDIR /app)"
            )
        task = dataclasses.replace(
            task,
            prompt=found.instruction,
            workdir=found.workdir,
            agent_timeout_sec=found.agent_timeout,
            verifier_timeout_sec=found.verifier_timeout,
            verifier_env=found.verifier_env,
            cpus=found.cpus,
            memory_mb=found.memory_mb,
            allow_internet=found.allow_internet,
            shape=found.shape,
            capture=found.capture,
            sidecars=found.sidecars,
            pins=harbor_folder.pins(found),
        )
        if ctx.pins and dict(ctx.pins) != task.pins:
            raise ConfigError(f"harbor task {task.id}: its folder changed since the run was planned")
        if task.validation is None:
            task.validation = oracle_calls(found.path / "solution", found.agent_timeout + ORACLE_SLACK)
        return PlannedTask(task=task, image=image.inputs(found, task.base_image, ctx), limits=limits(found))

    def tools(self, ws: Workspace, spec: RunSpec) -> CodingTools:
        env = spec.env
        return CodingTools(
            ws,
            workdir=spec.task.workdir,
            user=AGENT_UID if spec.integrity.uid_wall else ROOT_UID,
            bash_timeout=float(env.bash_timeout),
            max_output_bytes=int(env.max_output_bytes),
            enabled=list(env.tools),
        )

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        """Nothing to stage (the image holds the task at its baseline, tests and solution never);
        a compose task with services beside ``main`` is refused in one line."""
        if spec.task.capture == "live" and spec.integrity.uid_wall:
            raise SetupError(
                f"harbor task {spec.task.id} needs the agent's live container to grade "
                '([metadata].crucible_capture = "live"); strict grades only in a fresh container: '
                "run it under integrity=none or vault (graded from its file changes, processes lost)"
            )
        if spec.task.sidecars:
            raise SetupError(
                f"harbor task {spec.task.id}: docker-compose.yaml services beside main "
                f"({', '.join(spec.task.sidecars)}) are not supported yet: only the main service's "
                "image is built, and its sidecars would need the flavor's services hook"
            )

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        return None

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        """The working directory's diff; under ``none`` (no vault) also what the agent left in
        /logs/verifier and /tests, which Harbor's verifier, in the agent's own container, meets;
        for a task capturing its container (``container``, ``live``) every file changed outside it."""
        carry = "0" if spec.integrity.vault else "1"
        whole = "1" if spec.task.capture in ("container", "live") else "0"
        mark = f"CRUCIBLE-{secrets.token_hex(8)}"
        try:
            result = await ws.exec(
                ["bash", "-c", shell.script(__file__, "capture.sh"), "crucible", spec.task.workdir, carry, whole, mark],
                timeout=float(spec.timeouts.capture),
                max_output=256 << 20,
            )
        except WorkspaceError as exc:
            raise CaptureError(f"capture could not run: {exc}") from exc
        if result.timed_out or result.truncated or result.exit_code != 0:
            raise CaptureError(
                f"capture of {spec.task.workdir} failed (exit {result.exit_code}"
                f"{', output truncated' if result.truncated else ''}): {result.stderr[-400:]!r}"
            )
        out, *sections = result.stdout.split(f"{mark} ".encode())
        data = {"carried": "", "container": ""}
        for section in sections:
            name, _, body = section.partition(b"\n")
            data[name.decode()] = body.strip().decode("ascii")
        out, violations = _protected_dropped(out) if spec.integrity.drop_protected else (out, [])
        try:
            text = out.decode("utf-8")
        except UnicodeDecodeError:
            text = out.decode("utf-8", "replace")
            data["diff_b64"] = base64.b64encode(out).decode("ascii")
        return CapturedSubmission(diff=text, kind="harbor-workdir-diff", data=data, violations=violations)

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        return self.regrade(spec, await grader.grade(ws, spec, submission))

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        return reward.verdict(raw)

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        return reward.explain(raw)

    # ------------------------------------------------------------ AdvisesAuthors
    def remedy(self, spec: RunSpec, raw: Mapping[str, Any]) -> str | None:
        """A test.sh that reached for the internet: grading has no network (most Terminal-Bench 2
        test.sh files download uv and pytest there), so name the fix."""
        output = reward.decode(raw.get("output")) if raw else ""
        if any(sign in output for sign in OFFLINE_SIGNS):
            return (
                "test.sh reached for the internet, and crucible grades without a network: install its "
                "test runner (uv, pytest, curl) in environment/Dockerfile instead of in tests/test.sh"
            )
        return None

    def notes(self, spec: RunSpec, raw: Mapping[str, Any]) -> list[str]:
        """A missing oracle. (task.toml's limits are the run's: ``limits`` below; a network
        the integrity mode withholds is in the run's warnings.)"""
        if not (Path(spec.task.path) / "solution" / harbor_folder.SOLVE).is_file():
            return ["no solution/solve.sh: the golden (Harbor's oracle) has nothing to run"]
        return []

    def lock_refusal(self, spec: RunSpec) -> str | None:
        return (
            f"harbor task {spec.task.id} is graded by the reward file tests/test.sh writes, not by named "
            "test results: there are no test lists to lock"
        )


PROTECTED = protect.Policy(
    hidden_tests=(),
    patterns=patch.PYTEST_PROTECTED,
    import_roots=("",),
    test_packages=(),
    shadowed=protect.SHADOWED,
    command_files=(),
)
"""``strict``'s protected paths in a Harbor task's working directory (envs/coding/protect.py):
test-runner configuration, interpreter start-up files, bytecode and package metadata at any
depth, and new top-level modules shadowing the standard library or the pytest stack (a test.sh
running ``python -m pytest`` from the working directory imports those first)."""


def _protected_dropped(diff: bytes) -> tuple[bytes, list[str]]:
    """The diff less its changes to protected paths, and those paths (the run's violations)."""
    kept, violations = PROTECTED.split(patch.parse_chunks(diff))
    return b"".join(chunk.data for chunk in kept), violations


OFFLINE_SIGNS = (
    "Could not resolve host",
    "Temporary failure resolving",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Failed to establish a new connection",
)
"""What a download in test.sh prints when grading, which has no network, runs it."""
GRADE_SLACK = 60.0
"""Seconds of grading beyond test.sh's limit and the grader's own margin (writing the diff and
tests in, reading the rewards): the grader's limit fires first, with its own reason."""


def limits(found: harbor_folder.HarborFolder) -> TaskLimits:
    """task.toml's limits as the run's (engine/models/pipeline.py ``TaskLimits``): ``[agent].timeout_sec``
    the agent's turn, ``[verifier].timeout_sec`` (with the grader's margin) grading,
    ``[environment]`` cpus and memory every workspace's; ``allow_internet`` the agent's network
    where task.toml names it (false takes it away in every mode; true never gives ``strict`` one)."""
    return TaskLimits(
        agent_timeout=found.agent_timeout,
        grade_timeout=found.verifier_timeout + grader.MARGIN + GRADE_SLACK,
        cpus=found.cpus,
        memory_bytes=None if found.memory_mb is None else found.memory_mb << 20,
        network=found.allow_internet if found.internet_named else None,
    )


def oracle_calls(solution: Path, timeout: float) -> list[dict]:
    """Harbor's ``oracle`` as tool calls: solution/ carried in as a base64 tar in chunks through
    the agent's bash tool, solve.sh run from it in the working directory, the copy removed.
    No solution/solve.sh: no calls (the golden then does nothing, and the gate says so)."""
    if not (solution / harbor_folder.SOLVE).is_file():
        return []
    payload = harbor_folder.b64_tarball(solution)
    empty = f"find {ORACLE_DIR} -mindepth 1 -delete"
    calls = [{"name": "bash", "arguments": {"command": f"mkdir -p {ORACLE_DIR} && {empty}; rm -f {_PAYLOAD}"}}]
    for start in range(0, len(payload), _CHUNK):
        calls.append(
            {"name": "bash", "arguments": {"command": f"printf %s '{payload[start : start + _CHUNK]}' >> {_PAYLOAD}"}}
        )
    run = textwrap.dedent(f"""\
        mkdir -p {ORACLE_DIR} && base64 -d {_PAYLOAD} | tar -xf - -C {ORACLE_DIR} && rm -f {_PAYLOAD} \\
          && bash {ORACLE_DIR}/solve.sh; s=$?; {empty}; rm -f {_PAYLOAD}; exit $s""")
    calls.append({"name": "bash", "arguments": {"command": run, "timeout": timeout}})
    return calls


__all__ = ["HarborFlavor", "oracle_calls"]
