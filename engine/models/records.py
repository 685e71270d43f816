"""What the store keeps (one-to-one with the DuckDB tables, ``engine/store/schema.py``) and the
one serialisation every hash is taken over: loaded with ``engine.models`` itself, by every command.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

RUN_STATUSES = ("running", "completed", "error", "canceled", "timeout")
PHASES = ("plan", "build", "provision", "setup", "agent", "capture", "grade", "store")


def canonical_json(value: Any) -> str:
    """The one serialisation every hash in crucible is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(text: str | bytes) -> str:
    import hashlib  # here: loading OpenSSL costs ~2 ms, and the read commands hash nothing

    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def spec_hash_of(spec: dict[str, Any]) -> str:
    """The hash of a spec as stored (``RunSpec.to_dict``)."""
    return sha256_hex(canonical_json(spec))


@dataclass
class BuildRecord:
    build_id: str
    tag: str
    input_hash: str
    purpose: str
    cache_hit: bool
    seconds: float
    size_bytes: int | None
    inputs: dict[str, Any]
    log_path: str | None
    started_at: str
    error: str | None = None


@dataclass
class Step:
    """One tool call (or model turn) an agent made."""

    idx: int
    kind: str  # "tool_call" | "model" | "warning"
    capability: str | None = None
    tool: str | None = None
    arguments: Any = None
    result: str | None = None
    is_error: bool = False
    started_at: str | None = None
    seconds: float = 0.0
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    note: str | None = None


TEST_STATUSES = ("PASSED", "FAILED", "SKIPPED", "ERROR")
"""A named test's outcome, in the SWE-bench Pro parser format's words (an xfail is SKIPPED)."""


@dataclass(frozen=True)
class TestResult:
    """One named test's outcome in a graded run (the ``test_results`` table)."""

    __test__ = False  # not a pytest test class, whatever its name says

    name: str
    status: str
    """One of ``TEST_STATUSES``."""


TERMINAL_STATES = ("running", "closing", "completed", "failed", "stale")
"""A terminal's lifecycle (seed 001): ``running`` while its CLI works; ``closing`` once its run
ended it normally, kept viewable until ``closes_at``; ``completed`` after that retention (its
periodic snapshots pruned, the final one kept); ``failed`` when the CLI crashed, was cancelled
or killed; ``stale`` when it was never ended (its tmux server went away under it, or its run
ended without ending it). Every state but ``running`` has a ``closes_at``; a terminal whose
``closed_at`` is set (retention over, or dismissed) is no longer listed."""


@dataclass
class TerminalRecord:
    """One terminal (a CLI's TUI in a private tmux server) of a run (the ``terminals`` table)."""

    terminal_id: str
    run_id: str
    owner: str
    """Who started it, as that caller names itself; never used to find the terminal again (an end
    event may name its owner differently): ``terminal_id``, the tmux server and session, or the run are."""
    tmux_server: str
    """The private server's socket name (``tmux -L``), unique per terminal."""
    tmux_session: str
    state: str
    """One of ``TERMINAL_STATES``."""
    started_at: str
    cwd: str | None = None
    width: int = 0
    height: int = 0
    ended_at: str | None = None
    end_reason: str | None = None
    """Why it ended (``done``, the CLI's failure, ``canceled``, what made it stale)."""
    closes_at: str | None = None
    closed_at: str | None = None
    closed_by: str | None = None
    """``retention`` (its window passed) or ``dismissed``."""
    last_snapshot_at: str | None = None


@dataclass
class TerminalSnapshot:
    """What a terminal's pane showed at one moment (the ``terminal_snapshots`` table): periodic
    ones while it runs (the newest few kept), and one final one with its scrollback."""

    terminal_id: str
    seq: int
    """Orders a terminal's snapshots (the spool's record sequence)."""
    taken_at: str
    final: bool
    text: str


@dataclass
class RunRecord:
    run_id: str
    spec_hash: str
    spec: dict[str, Any]
    status: str
    task_id: str
    agent: str
    model: str | None
    flavor: str
    runtime: str
    integrity_requested: str
    integrity_obtained: str | None
    attempt: int
    seed: int
    sweep_id: str | None
    started_at: str
    ended_at: str | None = None
    reward: float | None = None
    subscores: dict[str, float] = field(default_factory=dict)
    raw_grade: dict[str, Any] = field(default_factory=dict)
    tests: list[TestResult] = field(default_factory=list)
    diff: str | None = None
    violations: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    error_phase: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    run_dir: str | None = None
    image_tag: str | None = None
    from_cache: bool = False
    owner_pid: int | None = None
    owner_host: str | None = None
    infrastructure: bool = False
    """Whether the run's error was the machinery's (``InfrastructureError``: a host or worker
    that went away), not the task's or the agent's: such a run is never scored, is retried by
    policy and is counted apart."""
    host: str | None = None
    """Where the run's workspaces ran: a Docker host's URL (``runtime.docker.hosts``) or a
    worker's name; None for this machine's own engine."""
    retry_of: str | None = None
    """The run this one retries after an infrastructure error (its run id); None for a first try."""
    final_answer: str | None = None
    """The agent's last answer in its own words (a model's final reply, a coding CLI's result
    event or the answer block its TUI showed last); None when it gave none. Never graded."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        data = dict(data)
        data["steps"] = [Step(**s) for s in data.get("steps", [])]
        data["tests"] = [TestResult(**t) for t in data.get("tests", [])]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
