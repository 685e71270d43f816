"""The repo lifecycle (seed 002), engine-side: never visible to the agent.

``setup_repo`` hands the agent a repo in ``task.workdir``. With the vault (integrity
vault/strict) that is a FRESH one-commit repo — no history, refs, remotes or reflog to
mine — while the real history stays in the root-only vault. Without it (integrity none)
the agent gets a copy of the vault, history as cloned, and the vault stays trusted.

``capture_diff`` takes the agent's full diff against the pinned baseline through the
TRUSTED vault objects and a throwaway index, never through the agent's ``.git``: hooks,
config, attributes files or fake objects the agent planted there cannot change it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import uuid
from collections.abc import Mapping, Sequence

from engine.errors import CaptureError, SetupError, WorkspaceError
from engine.interfaces import ROOT_UID, Workspace
from engine.models import CapturedSubmission, ExecResult, SetupScript
from engine.util import shell
from envs.coding import held as held_capture
from envs.coding import protect
from envs.coding.defences import CodingIntegrity
from envs.coding.gitops import (
    GIT_ENV,
    KEPT_INDEX_ENV,
    SCRATCH_DIR,
    SCRIPT_CWD,
    VAULT,
    brief,
    run_script,
    script_argv,
)
from envs.coding.schema import CodingTaskConfig
from envs.integrity import patch

log = logging.getLogger(__name__)

FRESH_DATE = "2000-01-01T00:00:00+0000"
"""Fixed identity and date: the fresh commit's SHA depends only on the baseline tree."""


def setup_command(task: CodingTaskConfig, integrity: CodingIntegrity) -> SetupScript:
    """What makes ``task.workdir`` the agent's repo: one script of the spec alone (no run's
    state enters it), so the engine may run it once into an image layer (``SetsUpInImage``)."""
    setup = "setup_fresh.sh" if integrity.vault else "setup_history.sh"
    script = shell.script(__file__, setup) + shell.script(__file__, "ownership.sh")
    args = [workdir_of(task), baseline_of(task), VAULT, "1" if integrity.uid_wall else "0"]
    env = {**GIT_ENV, "FRESH_DATE": FRESH_DATE}
    return SetupScript(argv=tuple(script_argv(script, args)), env=tuple(sorted(env.items())), cwd=SCRIPT_CWD)


async def setup_repo(
    ws: Workspace, task: CodingTaskConfig, integrity: CodingIntegrity, *, timeout: float = 300.0
) -> None:
    """Make ``task.workdir`` the agent's repo. Raises ``SetupError``."""
    command = setup_command(task, integrity)
    try:
        result = await ws.exec(
            list(command.argv), user=ROOT_UID, cwd=command.cwd, env=dict(command.env), timeout=timeout
        )
    except WorkspaceError as exc:
        raise SetupError(f"repo setup could not run: {exc}") from exc
    if not result.ok:
        raise SetupError(f"repo setup failed in {task.workdir}: {brief(result)}")


MAX_DIFF_BYTES = 512 << 20
"""A bigger diff is refused (CaptureError) rather than held in memory."""


async def capture_diff(
    ws: Workspace,
    task: CodingTaskConfig,
    integrity: CodingIntegrity,
    *,
    timeout: float = 120.0,
    hidden_paths: Sequence[str] = (),
    held: held_capture.HeldCapture | None = None,
) -> CapturedSubmission:
    """The agent's diff against the baseline; the task's test paths (``hidden_paths``, the
    hidden change's, and ``task.test_paths``) and protected paths dropped when the mode
    asks. ``held``: this capture, started ahead (``hold_capture``). Raises ``CaptureError``."""
    args, env = capture_args(task), capture_env(integrity)
    try:
        chunks = await _captured_chunks(ws, args, env, timeout, held)
    except WorkspaceError as exc:
        raise CaptureError(f"capture could not run: {exc}") from exc
    except ValueError as exc:
        raise CaptureError(f"git produced a diff crucible cannot parse: {exc}") from exc
    return submission_from_chunks(chunks, task, integrity, hidden_paths)


async def _run_capture(
    ws: Workspace,
    args: list[str],
    env: Mapping[str, str],
    binary_paths: list[str],
    timeout: float,
    what: str = "capture",
) -> ExecResult:
    scratch = f"{SCRATCH_DIR}/capture-{uuid.uuid4().hex}"
    # Twice the bound: the output buffer keeps the first half of its limit whole.
    # One exec (sh/capture.sh): the diff comes back on stdout, the scratch dir goes with it.
    result = await run_script(
        ws,
        shell.script(__file__, "capture.sh"),
        [*args, scratch, *binary_paths],
        env=env,
        timeout=timeout,
        max_output=2 * MAX_DIFF_BYTES,
    )
    if not result.ok:
        raise CaptureError(f"{what} failed: {brief(result)}")
    if result.truncated:
        raise CaptureError(f"{what}: the diff is larger than {MAX_DIFF_BYTES >> 20} MiB")
    return result


def capture_args(task: CodingTaskConfig) -> list[str]:
    return [workdir_of(task, CaptureError), baseline_of(task, CaptureError), VAULT]


def capture_env(integrity: CodingIntegrity) -> dict[str, str]:
    """The capture starts from the image's kept index of the baseline (sh/shadow.sh) only
    behind the uid wall: without it the agent is root and could have rewritten that index's
    stat data to hide a change of its own from the capture."""
    return {KEPT_INDEX_ENV: "1"} if integrity.uid_wall else {}


async def hold_capture(ws: Workspace, task: CodingTaskConfig, integrity: CodingIntegrity) -> held_capture.HeldCapture:
    """``task``'s capture started in ``ws`` now, waiting for the agent to be done (envs/coding/held.py)."""
    return await held_capture.hold(ws, capture_args(task), capture_env(integrity))


async def _captured_chunks(
    ws: Workspace,
    args: list[str],
    env: Mapping[str, str],
    timeout: float,
    held: held_capture.HeldCapture | None = None,
) -> list[patch.FileChunk]:
    result = None
    if held is not None and held.ws is ws and held.args == args and held.env == env:
        result = await held_capture.finish(held, 2 * MAX_DIFF_BYTES)
    if result is None:  # none held, or it did not end well: a fresh exec, whose answer stands
        result = await _run_capture(ws, args, env, [], timeout)
    elif result.truncated:
        raise CaptureError(f"capture: the diff is larger than {MAX_DIFF_BYTES >> 20} MiB")
    for line in result.stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("crucible: "):
            log.warning("%s", line[len("crucible: ") :])
    chunks = patch.parse_chunks(result.stdout)
    if all(_is_utf8(c) for c in chunks):
        return chunks
    return await _with_binary_fallback(ws, args, env, chunks, timeout)


async def _with_binary_fallback(
    ws: Workspace, args: list[str], env: Mapping[str, str], chunks: list[patch.FileChunk], timeout: float
) -> list[patch.FileChunk]:
    """A second pass (rare: only for non-UTF-8 text) that re-diffs those paths as binary."""
    bad = [c for c in chunks if not _is_utf8(c)]
    specs = sorted({f":(literal){p}" for c in bad for p in c.paths})
    result = await _run_capture(ws, args, env, specs, timeout, what="capture (binary re-diff)")
    rebuilt = patch.parse_chunks(result.stdout)
    if not all(_is_utf8(c) for c in rebuilt):
        raise CaptureError("capture: a re-diffed chunk is still not UTF-8")
    return [c for c in chunks if _is_utf8(c)] + rebuilt


def submission_from_chunks(
    chunks: list[patch.FileChunk], task: CodingTaskConfig, integrity: CodingIntegrity, hidden_paths: Sequence[str] = ()
) -> CapturedSubmission:
    """What of a diff counts: its chunks less the task's test paths and protected paths where
    the mode drops them (recorded as violations). Any flavor that captures a diff its own way
    (sdlc's pull request) applies the coding flavor's rule through this."""
    touched = sorted({p for c in chunks for p in c.paths})
    kept, violations = chunks, list[str]()
    if integrity.restore_test_paths:
        # Test paths are the task's: dropped here, they stay as the baseline has them, which
        # is the test ref's content for every path the hidden change does not write itself.
        kept, violations = protect.split_test_paths(kept, task, hidden_paths)
    if integrity.drop_protected:
        kept, more = protect.split_protected(kept, task, hidden_paths)
        violations = sorted({*violations, *more})
    diff = b"".join(c.data for c in kept).decode("utf-8")
    return CapturedSubmission(diff=diff, files_changed=touched, violations=violations)


def untouched_key(
    task: CodingTaskConfig, integrity: CodingIntegrity, image_id: str, script_done: bool, code_version: str
) -> str:
    """What the capture of a workspace no agent acted on reads (engine/run/untouched.py): the
    image it starts from, the setup script run in it (into the layer, where ``script_done``),
    the capture's arguments and index, what ``submission_from_chunks`` drops (the task's paths,
    the hidden change at its pins, the mode's switches: the whole task and mode), and the code
    (``code_version``: the spec's ``engine_version``, every file of it)."""
    setup = setup_command(task, integrity)
    parts = [
        image_id,
        script_done,
        [setup.argv, setup.env, setup.cwd],
        capture_args(task),
        capture_env(integrity),
        dataclasses.asdict(task),
        dataclasses.asdict(integrity),
        code_version,
    ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _is_utf8(chunk: patch.FileChunk) -> bool:
    try:
        chunk.data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def workdir_of(task: CodingTaskConfig, error: type[Exception] = SetupError) -> str:
    workdir = str(task.workdir or "/app").rstrip("/") or "/"
    if not workdir.startswith("/"):
        raise error(f"task workdir must be absolute, got {workdir!r}")
    return workdir


def baseline_of(task: CodingTaskConfig, error: type[Exception] = SetupError) -> str:
    try:
        return str(task.pins["baseline"])
    except (KeyError, TypeError) as exc:
        raise error("task has no pinned baseline SHA (task.pins.baseline)") from exc


__all__ = [
    "FRESH_DATE",
    "baseline_of",
    "capture_args",
    "capture_diff",
    "hold_capture",
    "setup_command",
    "setup_repo",
    "workdir_of",
]
