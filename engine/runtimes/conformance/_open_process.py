"""Checks of ``open_process``: streaming stdin and merged output, ``close_stdin``, ``wait``, ``kill``;
stderr kept apart, and a terminal (``tty``: size, owner, resize)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from engine.interfaces import AGENT_UID, Process, Workspace
from engine.models import TtySize
from engine.runtimes.conformance._core import ConformanceFailure, check, expect, raises
from engine.runtimes.conformance._helpers import expect_no_sleepers, marker, processes_sleeping, wait_for_sleepers
from engine.util.aio import within


async def _read_until(process: Process, needle: bytes, limit: float = 10.0) -> bytes:
    seen = b""
    try:
        async with asyncio.timeout(limit):
            while needle not in seen:
                chunk = await process.read()
                if not chunk:
                    break
                seen += chunk
    except TimeoutError:
        raise ConformanceFailure(f"{needle!r} not read within {limit:.0f} s (read so far: {seen[-200:]!r})") from None
    return seen


@check()
async def check_open_process_streams_stdin_to_merged_output(ws: Workspace) -> None:
    """open_process: writes reach stdin, stdout and stderr come merged, then exit code and EOF."""
    process = await ws.open_process(["sh", "-c", "cat; echo bye >&2; exit 5"], user=AGENT_UID)
    try:
        expect(isinstance(process, Process), f"{type(process).__name__} does not satisfy the Process protocol")
        await process.write(b"ping\n")
        first = await _read_until(process, b"ping\n")
        await process.write(b"pong\n")
        second = await _read_until(process, b"pong\n")
        await process.close_stdin()
        rest = await _read_until(process, b"bye\n")
        code = await process.wait(timeout=10)
        eof = await process.read()
        with raises(BrokenPipeError, "write after the process exited"):
            await process.write(b"too late")
    finally:
        await process.kill()
    got = (first, second, rest, code, eof)
    expect(got == (b"ping\n", b"pong\n", b"bye\n", 5, b""), f"(echo, echo, stderr, exit code, eof) were {got}")


@check()
async def check_after_close_stdin_a_write_fails_and_a_second_close_does_nothing(ws: Workspace) -> None:
    """With stdin closed and the process still running, neither a write nor a second close hangs."""
    process = await ws.open_process(["sh", "-c", "cat >/dev/null; echo drained; sleep 30"])
    try:
        await process.write(b"some input\n")
        await process.close_stdin()
        await _read_until(process, b"drained\n")
        try:
            async with asyncio.timeout(5):
                await process.close_stdin()
                with raises(BrokenPipeError, "write after close_stdin"):
                    await process.write(b"too late")
        except TimeoutError:
            raise ConformanceFailure("a second close_stdin or a write after it hung") from None
    finally:
        await process.kill()
    code = await process.wait(timeout=10)
    expect(code != 0, f"a killed process exited {code}")


@check()
async def check_open_process_kill_ends_the_whole_group(ws: Workspace) -> None:
    """wait(timeout) gives up and leaves the process be; kill ends its whole group; kill is idempotent."""
    seconds = marker()
    process = await ws.open_process(["bash", "-c", f"sleep {seconds} & sleep {seconds}"])
    try:
        await wait_for_sleepers(ws, seconds, 2)
        with raises(TimeoutError, "wait(timeout=0.3) on a running process"):
            await process.wait(timeout=0.3)
        running = await processes_sleeping(ws, seconds)
        expect(running == 2, f"after wait gave up {running} sleepers run, expected both")
    finally:
        await process.kill()
    code = await process.wait(timeout=10)
    await process.kill()  # idempotent
    expect(code != 0, f"a killed process exited {code}")
    await expect_no_sleepers(ws, seconds, "kill")


@check()
async def check_open_process_can_keep_stderr_apart(ws: Workspace) -> None:
    """separate_stderr: stderr comes from read_stderr, stdout alone from read, both to their end."""
    process = await ws.open_process(
        ["sh", "-c", "echo err >&2; echo out; echo more err >&2; exit 4"], user=AGENT_UID, separate_stderr=True
    )
    try:
        out, err = await within(asyncio.gather(_read_all(process.read), _read_all(process.read_stderr)), 10)
        code = await process.wait(timeout=10)
    finally:
        await process.kill()
    got = (out, err, code)
    expect(got == (b"out\n", b"err\nmore err\n", 4), f"(stdout, stderr, exit code) were {got}")


async def _read_all(read: Callable[[], Awaitable[bytes]]) -> bytes:
    seen = b""
    while chunk := await read():
        seen += chunk
    return seen


@check()
async def check_open_process_with_a_tty_gives_the_command_a_sized_terminal_it_owns(ws: Workspace) -> None:
    """tty: stdin is a terminal (named in the workspace, owned by the uid) of the asked size;
    resize changes the size the command sees; stderr shows on the terminal too; close_stdin
    types the EOF character, and a write after it fails."""
    script = (
        'tty; stat -c "owner %u" "$(tty)"; stty size; echo on-stderr >&2; read line; stty size; '
        'echo "got $line"; cat; echo cat-ended'
    )
    process = await ws.open_process(["sh", "-c", script], user=AGENT_UID, tty=TtySize(cols=97, rows=31))
    try:
        first = await _read_until(process, b"on-stderr")
        await process.resize(TtySize(cols=120, rows=40))
        await process.write(b"typed\r")
        rest = await _read_until(process, b"got typed")
        await process.close_stdin()
        rest += await _read_until(process, b"cat-ended")
        with raises(BrokenPipeError, "write after close_stdin on a terminal"):
            await process.write(b"too late")
        code = await process.wait(timeout=10)
    finally:
        await process.kill()
    lines = first.decode(errors="replace").split("\r\n")
    expect(lines[0].startswith("/dev/pts/"), f"`tty` said {lines[0]!r}, not a terminal named in the workspace")
    expect(
        lines[1:3] == [f"owner {AGENT_UID}", "31 97"],
        f"owner and size were {lines[1:3]}, expected uid {AGENT_UID}, 31 97",
    )
    expect(b"40 120\r\n" in rest, f"after resize to 120x40 the command saw {rest!r}")
    expect(code == 0, f"the command exited {code}")
