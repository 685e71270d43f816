"""The small typed interfaces that carry crucible's pipeline.

Read this file first. Every stage of the pipeline talks to the next through one of
these Protocols, and every backend of an interface passes one shared conformance
suite (``tests/test_workspace_conformance.py`` for workspaces).

    RunSpec --ImageBuilder--> image --Workspace--> Flavor.setup --> Agent.run
            --> Flavor.capture --> Flavor.grade (fresh Workspace) --> Store

Errors are typed (``engine.errors``); each carries the pipeline phase it happened in.
"""
from __future__ import annotations

from pathlib import Path
from typing import AsyncIterator, Mapping, Protocol, Sequence, runtime_checkable

from engine.models import (
    BuildRecord,
    CapturedSubmission,
    ExecResult,
    ImageRef,
    RunRecord,
    RunSpec,
    Step,
    Verdict,
)

ROOT_UID = 0
AGENT_UID = 1000


@runtime_checkable
class Process(Protocol):
    """A running command with streaming stdin/stdout, for SSH sessions and tmux.

    stdout and stderr are merged unless the backend says otherwise.
    """

    async def write(self, data: bytes) -> None:
        """Send bytes to the process's stdin. Raises BrokenPipeError once it has exited or
        its stdin was closed."""

    async def close_stdin(self) -> None:
        """Send EOF on stdin. A second call (or one after the stdin broke) does nothing."""

    async def read(self, n: int = 65536) -> bytes:
        """Next chunk of output; b"" at end of stream."""

    async def wait(self, timeout: float | None = None) -> int:
        """Exit code. Raises TimeoutError if it does not exit in time (process left running)."""

    async def kill(self) -> None:
        """SIGKILL the whole process group. Idempotent."""


@runtime_checkable
class Workspace(Protocol):
    """Where a run's commands execute: a container (runtime=docker) or a host dir (runtime=local).

    An async context manager: ``async with runtime.provision(...) as ws:``. Leaving the
    block always destroys the workspace (success, failure, timeout, cancellation).
    """

    network: bool
    """Whether commands in this workspace can reach any network. Fixed at provision time."""

    async def exec(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        max_output: int = 1 << 20,
    ) -> ExecResult:
        """Run ``argv`` (no shell unless argv asks for one) as uid ``user``.

        ``env`` replaces the environment entirely (None = a minimal default: PATH, HOME,
        LANG); it never inherits the engine's environment. ``timeout`` kills the whole
        process group with SIGKILL and returns ``ExecResult(timed_out=True, exit_code=124)``.
        Output (stdout and stderr, each separately) is read concurrently so a chatty
        process never blocks; past ``max_output`` bytes the middle is dropped, the first
        and last ``max_output // 2`` bytes are kept, ``truncated`` is set and
        ``*_bytes_total`` count everything. Raises ``WorkspaceError`` if the backend fails
        (not for a non-zero exit code).
        """

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Process:
        """Start ``argv`` with streaming stdin/stdout (merged). For SSH and tmux."""

    async def read_file(self, path: str) -> bytes:
        """Whole file, read as root. Raises FileNotFoundError, IsADirectoryError."""

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o644, owner: int = ROOT_UID) -> None:
        """Create or replace ``path`` (parents created, owned by root) with ``data``."""

    async def close(self) -> None:
        """Destroy the workspace. Idempotent; never raises for an already-gone workspace."""

    async def __aenter__(self) -> "Workspace": ...

    async def __aexit__(self, *exc: object) -> None: ...


class Runtime(Protocol):
    """Makes workspaces. Selected by the ``runtime`` config group (``_target_``)."""

    name: str

    def supports(self, integrity: Mapping[str, object]) -> str | None:
        """None if this runtime can give the integrity mode, else one line saying why not."""

    def require(self, integrity: Mapping[str, object]) -> None:
        """Raise ``IntegrityUnavailable`` (with ``supports``' reason) unless the mode can be had."""

    def provision(self, image: ImageRef, *, run_id: str, network: bool, purpose: str) -> Workspace:
        """A not-yet-started workspace; entering its context starts it. ``purpose`` is
        'agent' or 'grade' (a label for reaping and debugging)."""


class ImageBuilder(Protocol):
    def plan(self, dockerfile: "Path", context_dir: "Path", build_args: Mapping[str, str], purpose: str) -> ImageRef:
        """Compute the input-addressed tag without building anything. Raises BuildError
        when a base image is missing, UserError for a missing Dockerfile or context."""

    def status(self, ref: ImageRef) -> str:
        """'cached' or 'missing' (one inspect)."""

    def ensure(self, ref: ImageRef, store: "Store | None" = None) -> BuildRecord:
        """Build ``ref`` unless an image with its tag exists (then no build reaches the
        daemon); record the build in ``store``. Raises BuildError naming the build log."""


class Agent(Protocol):
    """Works on the task through its capabilities and returns the steps it took."""

    takes_model: bool
    deterministic: bool

    async def run(self, ctx: "AgentContext") -> "AgentOutcome": ...


class AgentContext(Protocol):
    spec: RunSpec
    capabilities: Mapping[str, str]
    """capability name ('mcp', 'ssh') -> how to reach it (a URL)."""
    capability_auth: Mapping[str, str]
    """capability name -> credential (bearer token, password) for the engine-side client."""
    validation: Sequence[Mapping[str, object]]
    prompt: str


class AgentOutcome(Protocol):
    steps: list[Step]
    warnings: list[str]
    stop_reason: str
    answer: str


class Flavor(Protocol):
    """A task flavor's host side: prepares the workspace, captures, grades."""

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        """Make the task ready for the agent (vault history, fresh repo, ...)."""

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        """Take what the agent produced, as data (a diff), from the agent's workspace."""

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        """Grade ``submission`` in ``ws``, a FRESH workspace from the same image.

        Pure in the sense that matters: the verdict depends only on the spec and the
        captured submission, so any stored run can be graded again.
        Raises ``GradeError`` when grading itself breaks (never a score of 0 for that).
        """


class Store(Protocol):
    def record_run(self, record: RunRecord) -> None:
        """Durably write the run's record beside its outputs, then ingest it (retried)."""

    def record_build(self, record: BuildRecord) -> None: ...

    def completed_run_for(self, spec_hash: str) -> RunRecord | None: ...

    def query(self, sql: str) -> tuple[list[str], list[tuple]]: ...


__all__ = [
    "AGENT_UID",
    "ROOT_UID",
    "Agent",
    "AgentContext",
    "AgentOutcome",
    "Flavor",
    "ImageBuilder",
    "Process",
    "Runtime",
    "Store",
    "Workspace",
    "AsyncIterator",
]
