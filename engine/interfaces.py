"""The small typed interfaces that carry crucible's pipeline.

Read this file first. Every stage of the pipeline talks to the next through one of these
Protocols, and every backend of an interface passes one shared conformance suite.

    RunSpec --ImageBuilder--> image --Workspace--> Flavor.setup --> Agent.run
            --> Flavor.capture --> Flavor.grade (fresh Workspace) --> Store

Errors are typed (``engine.errors``); each carries the pipeline phase it happened in.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from engine.models import (
    BuildRecord,
    CapturedSubmission,
    ExecResult,
    GateRole,
    ImageInputs,
    ImageRef,
    RunRecord,
    RunSpec,
    SetupScript,
    Step,
    TaskLimits,
    TerminalRecord,
    TtySize,
    UpstreamFix,
    Verdict,
)

if TYPE_CHECKING:
    from engine.config.schema import EnvConfig, IntegrityConfig, TaskConfig

ROOT_UID = 0
AGENT_UID = 1000
BRIDGE_PATH = "/run/crucible"
"""Where a workspace provisioned with a bridge sees it: a host directory holding the run's
host-side endpoints as unix sockets (its MCP server, ``mcp.sock``), reached without any
network, read-only inside."""


@runtime_checkable
class Process(Protocol):
    """A running command with streaming stdin/stdout, for SSH sessions and tmux.

    stdout and stderr are merged (``read``) unless it was opened with ``separate_stderr``;
    with a ``tty`` both go to the terminal, so ``read`` gives everything it shows.
    """

    async def write(self, data: bytes) -> None:
        """Send bytes to the process's stdin. Raises BrokenPipeError once it has exited or
        its stdin was closed."""

    async def close_stdin(self) -> None:
        """Send EOF on stdin (on a terminal: type the EOF character, ^D). A second call (or one
        after the stdin broke) does nothing."""

    async def read(self, n: int = 65536) -> bytes:
        """Next chunk of output; b"" at end of stream."""

    async def wait(self, timeout: float | None = None) -> int:
        """Exit code. Raises TimeoutError if it does not exit in time (process left running)."""

    async def kill(self) -> None:
        """SIGKILL the whole process group. Idempotent."""

    async def read_stderr(self, n: int = 65536) -> bytes:
        """Next chunk of stderr when opened with ``separate_stderr`` (b"" at its end); without it
        (stderr is in ``read``'s stream) b"" at once. Never raises for a process that has exited."""

    async def resize(self, size: TtySize) -> None:
        """Set the terminal's size (the command gets SIGWINCH) when opened with a ``tty``;
        without one it does nothing. Never raises for a process that has exited."""


@runtime_checkable
class Workspace(Protocol):
    """Where a run's commands execute: a container (runtime=docker) or a host dir (runtime=local).

    An async context manager: ``async with runtime.provision(...) as ws:``. Leaving the
    block always destroys the workspace (success, failure, timeout, cancellation).
    """

    network: bool
    """Whether commands in this workspace can reach any network. Fixed at provision time."""
    bridge: str | None
    """``BRIDGE_PATH`` when provisioned with a bridge, else None."""

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

        ``env`` replaces the environment entirely (None = a minimal default: PATH, HOME, LANG); it never inherits the
        engine's environment. ``timeout`` kills the whole process group with SIGKILL and returns
        ``ExecResult(timed_out=True, exit_code=124)``. Output (stdout and stderr, each separately) is read concurrently
        so a chatty process never blocks; past ``max_output`` bytes the middle is dropped, the first and last
        ``max_output // 2`` bytes are kept, ``truncated`` is set and ``*_bytes_total`` count everything. Raises
        ``WorkspaceError`` if the backend fails (not for a non-zero exit code)."""

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        tty: TtySize | None = None,
        separate_stderr: bool = False,
    ) -> Process:
        """Start ``argv`` with streaming stdin/stdout (merged). For SSH and tmux.

        ``separate_stderr``: stderr is its own stream (``Process.read_stderr``), not in ``read``'s. ``tty``: the command
        runs on a fresh terminal of that size (its controlling terminal, owned by ``user``; stdin, stdout and stderr all
        are the terminal, so ``separate_stderr`` does not apply), resized with ``Process.resize``; what is written is
        typed on it, and what it shows (echo included, lines ending CR LF) is ``read``. Raises ``WorkspaceError`` when
        the backend cannot start it, ``ValueError`` for an empty ``argv`` or a size < 1."""

    async def read_file(self, path: str) -> bytes:
        """Whole file, read as root. Raises FileNotFoundError, IsADirectoryError."""

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o644, owner: int = ROOT_UID) -> None:
        """Create or replace ``path`` (parents created, owned by root) with ``data``."""

    async def close(self) -> None:
        """Destroy the workspace. Idempotent; never raises for an already-gone workspace."""

    async def __aenter__(self) -> Workspace: ...

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None: ...


class Runtime(Protocol):
    """Makes workspaces. Selected by the ``runtime`` config group (``_target_``)."""

    name: str

    def supports(self, integrity: IntegrityConfig) -> str | None:
        """None if this runtime can give the integrity mode, else one line saying why not."""

    def require(self, integrity: IntegrityConfig) -> None:
        """Raise ``IntegrityUnavailable`` (with ``supports``' reason) unless the mode can be had."""

    def image_builder(self, *, ca_bundle: str | None) -> ImageBuilder:
        """What builds the images this runtime provisions from (content-addressed Docker
        images; a runtime without Docker brings its own templates)."""

    def provision(
        self,
        image: ImageRef,
        *,
        run_id: str,
        network: bool,
        purpose: str,
        bridge: str | None = None,
        limits: TaskLimits | None = None,
    ) -> Workspace:
        """A not-yet-started workspace; entering its context starts it. ``purpose`` is 'agent' or 'grade' (a label for
        reaping and debugging). ``bridge``: a host directory that appears read-only at ``BRIDGE_PATH`` inside (the host
        must be the runtime's). ``limits``: a task's cpus and memory, over the runtime's own (passed only when the spec
        has some; a runtime whose ``limits_resources`` is not True cannot apply them, and the run's warnings say so)."""


class ImageBuilder(Protocol):
    default_base: str | None
    """The base this builder builds every image FROM whatever a plan asks (a runtime's own templates), or None: the
    plan's choice stands."""

    def fallback_base(self) -> str:
        """What to build FROM when neither this builder, the env nor ``build.base`` names a base (Docker's: the
        bootstrapped offline base, made now if missing)."""

    def plan(self, dockerfile: Path, context_dir: Path, build_args: Mapping[str, str], purpose: str) -> ImageRef:
        """Compute the input-addressed tag without building anything. A base that this builder planned but has not built
        yet (the task image under an agent's layer) counts by its inputs. Raises BuildError when a base image is neither
        present nor planned, UserError for a missing Dockerfile or context."""

    def status(self, ref: ImageRef) -> str:
        """'cached' or 'missing' (one inspect)."""

    def ensure(self, ref: ImageRef, store: RecordsBuilds | None = None) -> BuildRecord:
        """Build ``ref`` unless an image with its tag exists (then no build reaches the daemon); record the build in
        ``store``. Raises BuildError naming the build log."""


class Agent(Protocol):
    """Works on the task through its capabilities and returns the steps it took.

    An agent whose ``timeout`` stop means its work was cut off mid-way (a coding CLI killed at
    its wall clock) sets ``timeout_ends_run = True``: the run is then recorded as ``timeout``
    (steps kept) and not graded; otherwise a timed-out agent's workspace is still graded."""

    takes_model: bool
    deterministic: bool
    capabilities: tuple[str, ...] | Callable[[RunSpec], tuple[str, ...]]
    """The run's capabilities it connects to (of ``engine.capabilities.CAPABILITIES``), or a function of the run's spec
    saying so (``integration_test``: ssh only for a task whose golden steps use it): the run serves only these, so an
    agent that declares none (``noop``, an agent working through its workspace alone) gets no servers, and does not wait
    for their code to load. A plug-in that declares nothing gets all."""

    async def run(self, ctx: AgentContext) -> AgentOutcome: ...


@dataclass
class AgentContext:
    """What an agent gets: the run's spec, its workspace and the uid to act as there, how to reach the run's
    capabilities, the golden's tool calls (for ``integration_test``) and the prompt. Defined once, here."""

    spec: RunSpec
    capabilities: Mapping[str, str]
    """capability name -> how to reach it: 'mcp' and 'ssh' as URLs from the host; 'mcp_socket' the same MCP server as a
    unix socket path inside the workspace (HTTP at ``/mcp/``), for an agent that works in a workspace without a
    network."""
    capability_auth: Mapping[str, str]
    """capability name -> credential (bearer token, password)."""
    validation: Sequence[Any]
    prompt: str
    workspace: Workspace | None = None
    """The run's workspace, for an agent that works inside it (a coding CLI): provisioned from the agent's own image
    when its config declares needs (``agent.image``: a layer over the task image), else from the task image. Grading
    never uses the agent's image."""
    uid: int = AGENT_UID
    """The uid the agent must act as in the workspace (1000 under the uid wall, else 0)."""
    workdir: str = "/"
    bridge_host: str | None = None
    """The host side of the workspace's bridge (the directory it sees at ``BRIDGE_PATH``), for an agent that serves a
    host-side endpoint of its own there as a unix socket (a coding CLI's model proxy); None when the workspace has no
    bridge."""
    setup_done: Awaitable[None] | None = None
    """Resolves once the task's setup is done (the agent starts beside it, and the run's tools wait for it): an agent
    acting on the workspace outside those tools (a coding CLI's own shell) must wait for it first. None: setup is
    already done."""
    terminals: TerminalSink | None = None
    """Where an agent that works in a terminal (a coding CLI in tmux) records it; None: nowhere."""


class TerminalSink(Protocol):
    """Where an agent's terminals are recorded (seed 001's terminal lifecycle): the run's store, through the spool
    (engine/store/terminals.py ``TerminalLog``). Never raises for a store that is busy: the record then waits in the
    spool."""

    run_id: str

    @property
    def every(self) -> float:
        """Seconds between periodic snapshots of a running terminal."""

    @property
    def final_lines(self) -> int:
        """Lines of scrollback at most in a terminal's final snapshot."""

    async def start(self, record: TerminalRecord) -> None: ...

    async def snapshot(self, terminal_id: str, text: str) -> None: ...

    async def end(
        self,
        terminal_id: str,
        *,
        state: str,
        reason: str,
        tmux_server: str = "",
        tmux_session: str = "",
        owner: str = "",
        final_text: str | None = None,
    ) -> None:
        """``state``: closing (ended normally), failed or stale."""


@dataclass
class AgentOutcome:
    steps: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stop_reason: str = "done"
    answer: str = ""


class ToolSet(Protocol):
    """The tools a flavor serves the agent (the run's MCP capability; ssh/2 opens a shell onto the same workspace as
    ``user`` in ``workdir``)."""

    user: int
    workdir: str

    def specs(self) -> list[dict[str, Any]]:
        """MCP tool descriptions: ``{name, description, inputSchema}``."""

    async def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """Run one tool call: (text, is_error). Never raises for the agent's mistakes."""


@runtime_checkable
class RecordsServedCalls(Protocol):
    """What an agent working from outside crucible adds (optional; agent ``external``): the run serves it
    ``served_tools(tools)`` instead of the flavor's tools (each call recorded, tools of its own added), and its SSH
    server reports each command or session to ``record_step``, since such an agent records no steps of its own."""

    def served_tools(self, tools: ToolSet) -> ToolSet: ...

    def record_step(self, step: Step) -> None: ...


@dataclass(frozen=True)
class PlanContext:
    """What the engine hands a flavor at plan time."""

    env: EnvConfig
    base_image: Callable[[], str]
    """The image tasks build FROM (the env's, ``build.base``, or the offline base), resolved
    only when called: a flavor whose image does not need it pays nothing."""
    dockerfile: Path
    """The project's single image definition (Dockerfile.hud)."""
    cache_dir: Path
    """Where a flavor keeps build contexts and other derived files, shared across runs."""
    pins: Mapping[str, str] | None = None
    """Pins recorded by an earlier plan (``crucible rerun``): use these, check they exist."""
    integrity: IntegrityConfig | None = None
    """The run's integrity mode: a flavor refuses in one line what that mode cannot grade
    (``strict`` refuses a verdict read from text alone)."""


@dataclass(frozen=True)
class PlannedTask:
    """A flavor's plan of one task: the task with ``id``, ``pins`` and anything derived
    filled in (it goes into the spec whole, so the hash covers it), and the image inputs."""

    task: TaskConfig
    image: ImageInputs
    limits: TaskLimits | None = None
    """The task's own limits (agent and grading time, cpus, memory, network), where it names
    any: planning folds them into the spec, the runtime applies them (``TaskLimits``)."""


class Flavor(Protocol):
    """A task flavor: one room under ``envs/`` (or ``swe_tasks/``), plugged in by ``_target_``.

    The engine knows nothing of any flavor beyond this. A flavor instance serves ONE run
    (``setup`` ... ``grade`` on one object, so it may keep per-run state such as a mock
    remote); planning uses an instance of its own. Everything raises the typed errors of
    ``engine.errors``: ``ConfigError`` at plan time, ``SetupError`` in setup,
    ``CaptureError`` in capture, ``GradeError`` when grading itself breaks (never a score).
    """

    name: str
    task_schema: ClassVar[type]
    """A dataclass extending ``TaskConfig``: every ``task.*`` key is validated against it."""
    roles: ClassVar[Mapping[str, GateRole]]
    """The shipping gate's sides (``golden``, ``baseline``): which agent, which reward."""

    def plan_task(self, task: Any, ctx: PlanContext) -> PlannedTask:
        """Pin the task (refs -> SHAs), derive what it leaves out (validation), name its
        image's inputs. Pure planning: nothing is built or started. Raises ConfigError."""

    def tools(self, ws: Workspace, spec: RunSpec) -> ToolSet:
        """The agent's tools on ``ws`` (as the uid the integrity mode says)."""

    async def setup(self, ws: Workspace, spec: RunSpec) -> None:
        """Make the task ready for the agent (vault history, fresh repo, services, ...)."""

    async def prepare_grading(self, ws: Workspace, spec: RunSpec) -> None:
        """Get the FRESH grading workspace ready while the agent works (may do nothing).
        Never needed for correctness: ``grade`` does whatever was not done."""

    async def capture(self, ws: Workspace, spec: RunSpec) -> CapturedSubmission:
        """Take what the agent produced, as data, from the agent's workspace."""

    async def grade(self, ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> Verdict:
        """Grade ``submission`` in ``ws``, a FRESH workspace from the same image."""

    def regrade(self, spec: RunSpec, raw: Mapping[str, Any]) -> Verdict:
        """The verdict again from a stored raw grade alone: grading is a pure function of
        what was captured."""

    def explain(self, raw: Mapping[str, Any]) -> list[str]:
        """A few lines saying why a raw grade came out as it did (the reason, the test
        command's exit code, the last lines of its output): what ``crucible check`` prints.
        It reads every top-level key of ``raw`` but those the flavor names, each with why, in an
        optional ``explain_omits: ClassVar[Mapping[str, str]]`` (``crucible selfcheck`` checks:
        engine/cli/selfcheck, which holds every flavor to this Protocol)."""


@runtime_checkable
class GradesInMany(Protocol):
    """What a flavor that grades in more than one FRESH workspace adds (optional): e.g. a
    differential re-run of the hidden tests, whose verdict must agree with the first.

    The engine provisions ``grading_workspaces(spec)`` grading workspaces from the task image, all started together
    beside the agent's (so a second costs little wall time), calls ``prepare_grading`` on the first and
    ``prepare_extra_grading`` on each other one while the agent works, then ``grade_many`` instead of ``grade``. With a
    count of 1 nothing changes. Raises as ``prepare_grading`` and ``grade`` do.
    """

    def grading_workspaces(self, spec: RunSpec) -> int:
        """How many fresh grading workspaces grading ``spec`` takes (at least 1)."""

    async def prepare_extra_grading(self, ws: Workspace, spec: RunSpec, index: int) -> None:
        """As ``prepare_grading``, for extra workspace ``index`` (1, 2, ...); may do nothing."""

    async def grade_many(
        self, workspaces: Sequence[Workspace], spec: RunSpec, submission: CapturedSubmission
    ) -> Verdict:
        """Grade ``submission`` using every workspace (``workspaces[0]`` is the one
        ``prepare_grading`` had): one verdict, with what each workspace gave in its raw grade."""


@runtime_checkable
class RunServices(Protocol):
    """What a flavor that runs a per-run service beside the workspace adds (optional).

    ``services`` is entered once per run, before the task's setup in the agent's workspace, and left after grading,
    whatever happened (so grading may still use what it holds, e.g. a mock remote's repository). ``bridge_dir`` is the
    HOST side of the agent workspace's bridge: what the service puts there (a unix socket, a small client script)
    appears read-only at ``BRIDGE_PATH`` inside, reached without any network; state it must keep from the agent belongs
    elsewhere on the host. Raises ``SetupError``.
    """

    def services(self, spec: RunSpec, bridge_dir: str) -> AbstractAsyncContextManager[None]: ...


@runtime_checkable
class SetsUpInImage(Protocol):
    """A flavor whose setup begins with a command of its spec alone (optional): the engine bakes it into a layer over
    the agent's image, and ``setup`` then does only the rest (``script_done``); without a layer, all of it."""

    def setup_script(self, spec: RunSpec) -> SetupScript | None:
        """The command (as ``setup`` would run it), or None for a spec with none to bake."""

    async def setup(self, ws: Workspace, spec: RunSpec, *, script_done: bool = False) -> None: ...


@runtime_checkable
class TaskAuthoring(Protocol):
    """What a flavor that can make a task from an upstream fix adds (``crucible task new``)."""

    @classmethod
    def new_task(cls, fix: UpstreamFix) -> Path:
        """Write the task's repo and YAML; the YAML's path. Raises ConfigError (one line)
        for a fix that cannot become a task (e.g. its split leaves a side empty)."""


@runtime_checkable
class AdvisesAuthors(Protocol):
    """What a flavor tells a task's author in ``crucible check``'s output (optional): what
    fixes a failed gate side, and what is worth knowing of a task even when it ships.

    ``spec`` is the gate side's run spec, ``raw`` its raw grade. Neither method raises."""

    def remedy(self, spec: RunSpec, raw: Mapping[str, Any]) -> str | None:
        """The command or change that fixes this failed side, where the flavor knows one
        (e.g. "run `crucible lock task=SET/NAME`"); None otherwise."""

    def notes(self, spec: RunSpec, raw: Mapping[str, Any]) -> list[str]:
        """One line each, on the task whether or not it ships: a prompt still as generated,
        a defence its config turns off (and why)."""

    def lock_refusal(self, spec: RunSpec) -> str | None:
        """Why ``crucible lock`` can derive no test lists for the planned task (its grading
        reads no named test results), in one line naming what to change; None where it can."""


class RecordsBuilds(Protocol):
    """Where ``ImageBuilder.ensure`` records its builds: a ``Store``, or a run's stand-in that
    keeps them for its early writes (``engine.run.records.BuildRecords``)."""

    def record_build(self, record: BuildRecord, *, ingest: bool = True) -> None: ...


class Store(Protocol):
    def record_run(self, record: RunRecord, *, ingest: bool = True) -> None:
        """Durably write the run's record beside its outputs, then ingest it (retried);
        ``ingest=False`` leaves it for the next ingest (every read ingests first)."""

    def record_build(self, record: BuildRecord, *, ingest: bool = True) -> None: ...

    def record_terminal_event(self, run_id: str, event: dict[str, Any]) -> Any:
        """Spool and ingest one event of a run's terminal (engine/store/terminals.py)."""

    def completed_run_for(self, spec_hash: str) -> RunRecord | None: ...

    def completed_runs_for(self, spec_hashes: list[str]) -> dict[str, RunRecord]: ...

    def link_sweep_run(self, sweep_id: str, run_id: str) -> None:
        """Record that sweep ``sweep_id`` reused the completed run ``run_id`` (``resume=true``)."""

    def query(self, sql: str, *, ours: bool = False) -> tuple[list[str], list[tuple[Any, ...]]]: ...
