"""Grading's two commands, started in the fresh grading workspace before the submission exists.

Starting a command in a container costs ~0.07 s (the daemon and runc), more than most of
what grading's commands then do. Both are known before the agent has finished, so they start
early (the runner starts them while the agent works) and wait on their stdin:

- the stager (root, sh/stager.sh) resets the tree to the baseline at once, then waits for
  the submission: a header line and the pieces (patch variants, hidden tests, paths to hand
  over) back to back. It applies the diff, writes the hidden tests AFTER it (so the agent's
  edits to them are lost) and hands what it staged to uid 1000;
- the tester (the test user) waits for "go", then runs the test command.

Nothing of the agent's runs in the grading workspace before the tester's "go", which is sent
only once the stager succeeded. Records the stager prints: "<nonce> apply <variant> <exit
code>" after each apply's output, "<nonce> hidden <began> <ended>" (the hidden tests'
writing, by the clock in there); "<nonce> received <npatch> <nhidden>" first, so what the
reset printed is not taken for the first apply's output.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import WorkspaceError
from engine.interfaces import ROOT_UID, Process, Workspace
from engine.util import shell
from engine.util.aio import within
from envs.coding.gitops import GIT_ENV, SCRATCH_DIR, VAULT, script_argv

if TYPE_CHECKING:
    from envs.coding.canary import Canary
    from envs.coding.isolated import Plan

GRADE_DIR = f"{SCRATCH_DIR}/grade"
"""The stager's scratch dir (root-only), left behind: a grading workspace is used once."""
NOT_APPLIED = 10
"""The stager's exit code when no variant of the diff applies."""
DRAIN_GRACE = 0.5
"""Seconds to keep reading after a command exited while something still holds its output open."""
KILL_WAIT = 10.0

# The tester's own prefix: nothing runs before "go"; then the end markers' tokens (one line,
# maybe empty: envs/coding/runner_end.py), kept in shell variables no child inherits; then the
# command gets no stdin (as a plain exec would) and one output stream, interleaved as a
# terminal would show it.
_GO = (
    'IFS= read -r go || exit 97\n[ "$go" = go ] || exit 97\n'
    "read -r crucible_end crucible_runner || true\nexec </dev/null 2>&1\n"
)
_SELF_GATED = "exec 2>&1\n"


@dataclass
class Waiting:
    """A started command waiting for its stdin, which it gets once (``run`` or ``dismiss``)."""

    process: Process
    fed: bool = False


@dataclass
class Staging:
    """A grading workspace's stager and tester, started and waiting."""

    hidden: tuple[str, ...]
    command: str
    user: int
    nonce: str
    stager: Waiting
    tester: Waiting
    hidden_digest: str = ""
    """The hidden change it was prepared for (``grader._digest``)."""
    canary: Canary | None = None
    """The grader's canary (``envs.coding.canary.Canary``), the last of ``hidden``, or None."""
    isolation: Plan | None = None
    """The isolated verdict's plan (``envs.coding.isolated.Plan``), or None: tests in the repo."""
    results_format: str = "none"
    """How the named test results are read (``envs.coding.reading.results_format``)."""
    results_dir: str | None = None
    """Where pytest writes its JUnit report (format ``pytest``), outside the repo."""
    reader: Waiting | None = None
    """The process (as the tests' uid) that prints the JUnit report once told (format ``pytest``)."""
    end: tuple[str, str] | None = None
    """The tokens of the shell's and the runner's end markers (envs/coding/runner_end.py), or
    None: the command marks no end (the isolated verdict's launcher)."""


@dataclass
class Finished:
    delivered: bool
    """Whether the process was still there to get its stdin (else it had ended before)."""
    exit_code: int
    timed_out: bool
    output: bytes
    """All of it, or the first and last ``keep // 2`` bytes of it."""
    output_bytes: int
    seconds: float


async def start(
    ws: Workspace,
    *,
    workdir: str,
    baseline: str,
    uid_wall: bool,
    hidden: Sequence[str],
    command: str,
    user: int,
    support: Sequence[str] = (),
    gates_itself: bool = False,
    shown: str | None = None,
    preamble: bytes = b"",
) -> Staging:
    """Start the stager (its reset begins at once) and the tester. Raises ``WorkspaceError``.

    ``hidden``: the stager's "MODE PATH" entries (sh/stager.sh); ``support`` are absolute
    paths written after them as root's (their contents come with the submission, after the
    hidden tests').
    ``gates_itself``: the command starts at once and waits for "go" on its stdin itself (the
    isolated verdict's launcher, which warms up meanwhile); ``shown`` is the command as the
    record shows it; ``preamble`` is written to its stdin as soon as it started, ahead of "go"
    (the launcher's own code, which so travels in no argv)."""
    nonce = uuid.uuid4().hex
    args = [
        workdir,
        baseline,
        VAULT,
        GRADE_DIR,
        "1" if uid_wall else "0",
        nonce,
        *hidden,
        *(f"644 {path}" for path in support),
    ]
    # Both at once: when the grading workspace comes up late, their starts are on the run's path.
    # The tester's first, and its preamble sent as soon as it is open: the launcher it starts
    # (pytest's start) is the longer chain; the stager's reset has until the submission.
    stager_argv = script_argv(shell.script(__file__, "stager.sh"), args)
    opening_tester = asyncio.ensure_future(
        ws.open_process(["bash", "-c", (_SELF_GATED if gates_itself else _GO) + command], user=user, cwd=workdir)
    )
    opening_stager = asyncio.ensure_future(ws.open_process(stager_argv, user=ROOT_UID, cwd="/", env=GIT_ENV))
    starts = [opening_stager, opening_tester]
    try:
        tester = await opening_tester
        if preamble:
            await _write_preamble(tester, preamble)
        stager = await opening_stager
    except BaseException:
        for opening in starts:
            opening.cancel()  # a no-op for one that already opened: that one is killed below
        for opening in starts:
            try:
                await (await opening).kill()
            except BaseException:
                pass  # it never started, or it is gone with its workspace
        raise
    return Staging(tuple(hidden), shown or command, user, nonce, Waiting(stager), Waiting(tester))


async def _write_preamble(process: Process, data: bytes) -> None:
    try:
        await process.write(data)
    except BrokenPipeError:
        pass  # it has ended already: running it reports how


def submission_input(
    variants: Sequence[tuple[str, bytes]], hidden: Sequence[bytes], owned: list[str] | None, scan: Sequence[str] = ()
) -> bytes:
    """What the stager reads: the header line, then every piece back to back. ``scan``: the
    repo paths whose contents the stager sends back once everything is staged (``scanned``)."""
    own_list = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in owned or [])
    scan_list = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in scan)
    header = [str(len(variants)), "all" if owned is None else "list", str(len(own_list)), str(len(scan_list))]
    header += [f"{label} {len(body)}" for label, body in variants]
    header += [str(len(body)) for body in hidden]
    return " ".join(header).encode() + b"\n" + b"".join([*(body for _, body in variants), *hidden, own_list, scan_list])


def scanned(output: bytes, total: int, nonce: str) -> dict[str, bytes]:
    """The files the stager sent back at its end (``NONCE scan SIZE PATH_BYTES`` then the path
    and the file), by repo path: regular files only, read as root once everything was staged
    and before any test ran. Nothing when the output was cut (over what is kept, its middle is
    gone) or a record is malformed; a path not here is read from the workspace instead."""
    if total != len(output):
        return {}
    marker = f"\n{nonce} scan ".encode()
    found: dict[str, bytes] = {}
    at = output.find(marker)
    while at >= 0:
        line_end = output.find(b"\n", at + len(marker))
        fields = output[at + len(marker) : line_end].split(b" ") if line_end >= 0 else []
        if len(fields) != 2 or not all(f.isdigit() for f in fields):
            return found
        size, path_bytes = int(fields[0]), int(fields[1])
        start = line_end + 1
        if start + path_bytes + size > len(output):
            return found
        path = output[start : start + path_bytes].decode("utf-8", "surrogateescape")
        found[path] = output[start + path_bytes : start + path_bytes + size]
        at = output.find(marker, start + path_bytes + size)
    return found


async def run(waiting: Waiting, stdin: bytes, timeout: float, keep: int) -> Finished:
    """Send ``stdin`` to a waiting command and collect what it does, bounded by ``timeout``
    (then its process group is killed). A command that already ended (its stdin is closed)
    just reports how it ended."""
    if waiting.fed:
        raise ValueError("a waiting command gets its stdin once")
    waiting.fed, process = True, waiting.process
    output = _Output(keep)
    reader = asyncio.ensure_future(_read_all(process, output))
    began, delivered = time.monotonic(), True
    try:
        try:
            await process.write(stdin)
            await process.close_stdin()
        except BrokenPipeError:
            delivered = False
        try:
            code, timed_out = await process.wait(timeout), False
        except TimeoutError:
            await process.kill()
            code, timed_out = 124, True
            try:
                await process.wait(KILL_WAIT)
            except TimeoutError:
                pass  # what it wrote so far is what there is
        await _drain(reader)
    finally:
        if not reader.done():
            reader.cancel()
    return Finished(delivered, code, timed_out, output.value(), output.total, time.monotonic() - began)


async def dismiss(waiting: Waiting) -> None:
    """Let a command that still waits go without running anything: its stdin closes, it exits.
    (Never twice: a second close of a process's stdin is not something to rely on.)"""
    if not waiting.fed:
        waiting.fed = True
        await waiting.process.close_stdin()


async def ended(waiting: Waiting) -> None:
    """Wait for a dismissed command to end (killed past ``KILL_WAIT``), its output discarded."""
    reader = asyncio.ensure_future(_read_all(waiting.process, _Output(0)))
    try:
        try:
            await waiting.process.wait(KILL_WAIT)
        except TimeoutError:
            await waiting.process.kill()
        await _drain(reader)
    except WorkspaceError:
        pass  # gone with its workspace
    finally:
        if not reader.done():
            reader.cancel()


async def _read_all(process: Process, output: _Output) -> None:
    while chunk := await process.read():
        output.add(chunk)


async def _drain(reader: asyncio.Future) -> None:
    """After the exit: the rest of the output, unless a background child holds it open."""
    try:
        await within(asyncio.shield(reader), DRAIN_GRACE)
    except TimeoutError:
        reader.cancel()


class _Output:
    """Keeps the first and the last ``keep // 2`` bytes; counts all."""

    def __init__(self, keep: int) -> None:
        self.half = max(keep, 2) // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.half:  # trimmed lazily: amortised O(1) per byte
            del self.tail[: -self.half]

    def value(self) -> bytes:
        return bytes(self.head) + bytes(self.tail[-self.half :])
