"""What flows between a run's pipeline stages (the plan, the image, the workspace, the grade):
loaded by ``engine.models`` on first use, so the commands that only read the store (``query``,
``show``, ``report``) never create these classes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.models.records import TestResult, spec_hash_of


@dataclass
class ExecResult:
    exit_code: int
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    truncated: bool = False
    stdout_bytes_total: int = 0
    stderr_bytes_total: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def text(self) -> str:
        """stdout then stderr, decoded leniently (for logs and tool results)."""
        out = self.stdout.decode("utf-8", "replace")
        err = self.stderr.decode("utf-8", "replace")
        return out + (("\n" if out and not out.endswith("\n") else "") + err if err else "")


@dataclass(frozen=True)
class ImageRef:
    """An image named by its inputs. ``tag`` is derived from ``input_hash``."""

    tag: str
    input_hash: str
    dockerfile: str
    context_dir: str
    build_args: tuple[tuple[str, str], ...] = ()
    base: str = ""
    purpose: str = ""
    inputs: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    arg_roles: tuple[tuple[str, str], ...] = field(default=(), hash=False, compare=False)
    """``ImageInputs.arg_roles``, carried to the builder that names a failed step by them."""


@dataclass(frozen=True)
class ImageInputs:
    """What a flavor says its task image is made of; the builder names the image by their hash."""

    dockerfile: str
    context_dir: str
    build_args: dict[str, str] = field(default_factory=dict)
    missing_base_hint: str = ""
    """What to tell a user whose base image is neither here nor pullable (the flavor knows
    where its images come from; the engine does not). Not an input of the image."""
    arg_roles: dict[str, str] = field(default_factory=dict)
    """What a build arg is to the task's author (``INSTALL_CMD`` -> "the task's `install:`
    step"): a build step that fails while using it is named so, with its value, where
    Docker would name only its shell text. Not an input of the image."""


@dataclass(frozen=True)
class SetupScript:
    """The part of a task's setup that depends on its spec alone (``SetsUpInImage``): one
    command, run as root, that the engine runs once into a layer over the agent's image
    (``engine/plan/setup_layer.py``) so that every run's workspace starts set up, or runs in
    ``Flavor.setup`` whole where no layer could be made."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    """Set for the command, over the image's own environment (as an exec's is)."""
    cwd: str = "/"


@dataclass(frozen=True)
class GateRole:
    """One side of the shipping gate (``crucible check``): run ``agent``, expect ``reward``."""

    agent: str
    reward: float


@dataclass(frozen=True)
class TaskLimits:
    """A task's own limits (a Harbor ``task.toml``'s ``[agent]``/``[verifier]``/``[environment]``),
    named by its flavor at plan time (``PlannedTask.limits``). Planning folds them into the run
    spec (``RunSpec.limits``, and the timeouts and the agent's network they set): the task's
    value wins over the run's config, whose values stay the limits of tasks that name none.
    None = the run's own. Network only ever narrows: ``network=True`` gives the agent none
    under a mode without ``agent_network`` (``strict``), and the run's warnings say so."""

    agent_timeout: float | None = None
    """Seconds of the agent's turn (``timeouts.agent``)."""
    grade_timeout: float | None = None
    """Seconds of grading (``timeouts.grade``)."""
    cpus: float | None = None
    """CPUs of every workspace of the run (the agent's and grading's), where the runtime can
    limit them (docker: ``nano_cpus``; local: not at all, said in the run's warnings)."""
    memory_bytes: int | None = None
    """Memory of every workspace of the run (docker: ``mem_limit``)."""
    network: bool | None = None
    """Whether the agent may have a network: False takes it away in every mode, True gives it
    only where the integrity mode does."""


@dataclass(frozen=True)
class RunSpec:
    """Everything that can change a verdict, pinned at plan time. Frozen; hashed whole.

    Its parts are the typed configs (``engine/config/schema.py``; the task as its flavor's
    ``task_schema``, with ``id`` and ``pins`` filled by planning); they are serialised only
    for the hash and the record (``to_dict``).
    """

    engine_version: str
    task: Any
    env: Any
    flavor: Any
    agent: Any
    model: str | None
    integrity: Any
    runtime: Any
    image: dict[str, Any]
    timeouts: Any
    seed: int
    attempt: int
    agent_image: dict[str, Any] | None = None
    """The image the agent works in when it declares needs (``agent.image``): ``tag`` and
    ``input_hash`` of a layer over ``image``. None = it works in ``image``. ``image`` is
    always the task image, the one grading uses."""
    limits: TaskLimits | None = None
    """The task's own limits (``TaskLimits``), as its flavor planned them; None = the run's."""

    def to_dict(self) -> dict[str, Any]:
        """The spec as stored and hashed. Keys added after specs were first stored are left
        out while empty (no agent image, an agent declaring no image needs), so every spec
        that does not use them keeps the hash it always had; so is a field of the task's or the
        integrity schema marked ``omit_default`` (``metadata={"spec": "omit_default"}``) while it
        holds its default: a task key added later, a flavor's defence while off."""
        data = dataclasses.asdict(self)
        if data["agent_image"] is None:
            del data["agent_image"]
        if data.get("limits") is None:
            data.pop("limits", None)
        agent = data.get("agent")
        if isinstance(agent, dict) and isinstance(agent.get("image"), dict) and not any(agent["image"].values()):
            del agent["image"]
        for part in ("task", "integrity", "runtime"):
            _omit_defaults(getattr(self, part), data.get(part))
        return data

    @functools.cached_property
    def spec_hash(self) -> str:
        """Computed once a spec (a run asks for it four times: ~1 ms of ``asdict`` each). The
        spec is frozen and its parts (the typed config's own objects) are never changed once
        planned: one changed after its hash was read would leave the hash stale, so a change is
        a new spec (``dataclasses.replace``, with its own hash)."""
        return spec_hash_of(self.to_dict())

    @property
    def task_id(self) -> str:
        return str(self.task.id)

    @property
    def agent_name(self) -> str:
        return str(self.agent.name)


def _omit_defaults(typed: Any, stored: Any) -> None:
    """Drop from ``stored`` (``typed`` as a dict) each field ``typed``'s schema marks
    ``omit_default`` while it holds its default, and each it marks ``omit``: where a run is
    placed (a runtime's Docker hosts, how its bridge is carried) is no part of what it is, so
    a run placed elsewhere, or resumed on other hosts, is the same spec."""
    if not (dataclasses.is_dataclass(typed) and isinstance(stored, dict)):
        return
    for part in dataclasses.fields(typed):
        if part.metadata.get("spec") == "omit":
            stored.pop(part.name, None)
            continue
        if part.metadata.get("spec") != "omit_default" or part.name not in stored:
            continue
        default = part.default_factory() if part.default_factory is not dataclasses.MISSING else part.default
        if stored[part.name] == default:
            del stored[part.name]


@dataclass
class CapturedSubmission:
    """What the agent produced, taken from its workspace as data by the flavor's ``capture``.

    ``diff`` is the submission's text as stored (``runs.diff``): a diff for the coding flavor,
    whatever text form another flavor's deliverable has (a patch, a pushed head and PR).
    """

    diff: str
    files_changed: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """What the agent changed that it must not, dropped from the submission and recorded
    (coding: protected paths under integrity=strict)."""
    kind: str = "diff"
    data: dict[str, Any] = field(default_factory=dict)
    """Anything else the flavor's grader needs, as plain data (so a stored run regrades)."""


@dataclass
class Verdict:
    reward: float
    subscores: dict[str, float] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    """The raw grade: apply output, exit code, test output tail, durations, reason."""
    tests: list[TestResult] = field(default_factory=list)
    """Every named test result the grade read (empty where the flavor reads none); a pure
    function of ``raw`` like the reward, so a regrade gives them again."""


@dataclass(frozen=True)
class UpstreamFix:
    """``crucible task new``: a task to be made from one upstream fix commit."""

    task_id: str
    """``SET/NAME``."""
    repo: str
    """A local path or git URL holding ``fix``."""
    fix: str
    base: str | None
    """The commit the task starts from; None = the fix's first parent."""
    tests: Sequence[str]
    """Which of the fix's paths are its test change (globs); empty = the flavor's defaults."""
    prompt: str | None
    """The task's prompt; None = the fix commit's message."""
    install: str
    packages: Sequence[str]
    test_command: str | None
    """None = the flavor's default for the project."""
    conf_dir: Path
    """The config dir the task's YAML goes under (``<conf_dir>/task/SET/NAME.yaml``)."""
    repos_dir: Path
    """Where the task's own repo is written (``<repos_dir>/SET/NAME``)."""


@dataclass(frozen=True)
class TtySize:
    """A terminal's size in character cells, for ``open_process(tty=...)`` and ``Process.resize``."""

    cols: int
    rows: int
