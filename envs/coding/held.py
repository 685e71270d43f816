"""A capture started ahead: sh/capture.sh waiting in the agent's workspace until the agent is done.

A capture is one ``docker exec`` after the agent's turn, on the run's critical path before
grading: ~0.04 s of the engine creating and starting it (runc, its seccomp filter) and of bash
reading its script, before git reads a byte. Started while the agent works instead, as root, it
makes its scratch repository and then reads nothing of the workspace until it is told to begin
(``go`` on its stdin); from there it is the capture exec's script, word for word, and its output
is read as an exec's is.

What an agent can do to it: under the uid wall, nothing (uid 1000 can neither signal nor trace a
root process, and its scratch directory is in the root-only /var/lib/crucible). Without the wall
the agent is root and could kill it, as it could replace the git any capture runs. So a held
capture that does not end well is never believed: the run captures with a fresh exec, as it
always did, and that answer (or error) stands.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from engine.errors import WorkspaceError
from engine.interfaces import ROOT_UID, Process, Workspace
from engine.models import ExecResult
from engine.util import shell
from engine.util.aio import finish_even_if_cancelled
from envs.coding.gitops import GIT_ENV, SCRATCH_DIR, SCRIPT_CWD, script_argv

HELD_ENV = "CRUCIBLE_CAPTURE_HELD"
"""Set for a capture started ahead: sh/capture.sh waits for ``go`` before it reads the workspace."""
STDERR_LIMIT = 1 << 20


@dataclass
class HeldCapture:
    ws: Workspace
    args: list[str]
    """The capture's arguments (workdir, baseline, vault), its scratch directory aside."""
    env: dict[str, str]
    """What the capture's environment adds to ``GIT_ENV`` (``repo.capture_env``)."""
    process: Process


BASELINE_ARG = 1
"""Where the baseline is in a capture's arguments: a held capture is told it with the word."""


async def hold(ws: Workspace, args: list[str], env: Mapping[str, str]) -> HeldCapture:
    """Start the capture of ``args`` in ``ws`` now; it waits for ``finish``. Its command line
    names no baseline (that comes with the word): what the agent may read of it all the while
    is what it knows already."""
    scratch = f"{SCRATCH_DIR}/capture-{uuid.uuid4().hex}"
    shown = [*args[:BASELINE_ARG], "-", *args[BASELINE_ARG + 1 :]]
    process = await ws.open_process(
        script_argv(shell.script(__file__, "capture.sh"), [*shown, scratch]),
        user=ROOT_UID,
        cwd=SCRIPT_CWD,
        env={**GIT_ENV, **env, HELD_ENV: "1"},
        separate_stderr=True,
    )
    return HeldCapture(ws=ws, args=list(args), env=dict(env), process=process)


async def finish(held: HeldCapture, limit: int) -> ExecResult | None:
    """Tell the held capture to begin and read it to its end: its result (``truncated`` past
    ``limit`` bytes of diff), or None where it did not run to a good end (capture afresh then).
    Cancelled (the capture's timeout), it is killed before this returns."""
    process, ended = held.process, False
    try:
        try:
            await process.write(f"go {held.args[BASELINE_ARG]}\n".encode())
            await process.close_stdin()
            (out, out_total), (err, err_total) = await asyncio.gather(
                _drain(process.read, limit), _drain(process.read_stderr, STDERR_LIMIT)
            )
            code = await process.wait()
        except (OSError, WorkspaceError):  # gone already (killed by a root agent), or cut off
            return None
        ended = True
    finally:
        if not ended:
            with contextlib.suppress(WorkspaceError):
                await finish_even_if_cancelled(process.kill())
    if code != 0:
        return None
    return ExecResult(
        exit_code=code,
        stdout=out,
        stderr=err,
        truncated=out_total > limit,
        stdout_bytes_total=out_total,
        stderr_bytes_total=err_total,
    )


async def _drain(read: Callable[[int], Awaitable[bytes]], limit: int) -> tuple[bytes, int]:
    """Everything ``read`` gives until its end: the first ``limit`` bytes, and how many it gave."""
    kept, total = bytearray(), 0
    while chunk := await read(1 << 16):
        total += len(chunk)
        if len(kept) < limit:
            kept += chunk[: limit - len(kept)]
    return bytes(kept), total


__all__ = ["HELD_ENV", "HeldCapture", "finish", "hold"]
