"""Checks of ``exec``: exit code and streams, user and cwd, env, timeouts and cancels, output limits, stdin."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator

from engine.errors import WorkspaceError
from engine.interfaces import AGENT_UID, Workspace
from engine.models import ExecResult
from engine.runtimes.conformance._core import Probe, check, expect, raises
from engine.runtimes.conformance._helpers import expect_no_sleepers, kill_sleepers, marker, wait_for_sleepers


def _env(result: ExecResult) -> dict[str, str]:
    return dict(line.split("=", 1) for line in result.stdout.decode().splitlines())


@contextlib.contextmanager
def _engine_env(name: str, value: str) -> Iterator[None]:
    """Set a variable in the engine's own environment for the block."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


@check()
async def check_workspace_satisfies_the_protocol(ws: Workspace) -> None:
    """The workspace is a ``Workspace`` and, provisioned without network, says so."""
    expect(isinstance(ws, Workspace), f"{type(ws).__name__} does not satisfy the Workspace protocol")
    expect(ws.network is False, f"ws.network is {ws.network!r} for a workspace provisioned with network=False")


@check()
async def check_exec_reports_exit_code_and_stdout_stderr_separately(ws: Workspace) -> None:
    """exec reports the exit code, and stdout and stderr apart, with their byte counts."""
    result = await ws.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    got = (result.exit_code, result.stdout, result.stderr)
    expect(got == (3, b"out\n", b"err\n"), f"(exit_code, stdout, stderr) is {got}, expected (3, b'out\\n', b'err\\n')")
    expect(not result.timed_out and not result.truncated, f"timed_out/truncated set on a plain command: {result}")
    totals = (result.stdout_bytes_total, result.stderr_bytes_total)
    expect(totals == (4, 4), f"byte totals are {totals}, expected (4, 4)")
    expect(result.seconds > 0, f"seconds is {result.seconds}, expected > 0")


@check()
async def check_exec_runs_as_root_by_default_and_as_the_agent_uid_when_asked(ws: Workspace) -> None:
    """exec runs as uid/gid 0 by default, as 1000/1000 (not root's group) with user=AGENT_UID."""
    root = (await ws.exec(["sh", "-c", "id -u; id -g"])).stdout.split()
    agent = (await ws.exec(["sh", "-c", "id -u; id -g"], user=AGENT_UID)).stdout.split()
    expect(root == [b"0", b"0"], f"default user has uid/gid {root}, expected 0/0")
    expect(agent == [b"1000", b"1000"], f"user=AGENT_UID has uid/gid {agent}, expected 1000/1000")


@check()
async def check_exec_runs_in_the_given_cwd(ws: Workspace) -> None:
    """exec runs in ``cwd``."""
    for cwd in ("/tmp", "/usr/share"):
        got = (await ws.exec(["pwd"], cwd=cwd)).stdout
        expect(got == f"{cwd}\n".encode(), f"pwd with cwd={cwd} printed {got!r}")


@check(uses_probe=True)
async def check_exec_env_replaces_the_engine_environment(ws: Workspace, *, probe: Probe) -> None:
    """The default env is PATH, HOME, LANG; a given env replaces it; the engine's never leaks."""
    with _engine_env("CRUCIBLE_SECRET_CANARY", "leaked"):
        default_root = _env(await ws.exec(["env"]))
        default_agent = _env(await ws.exec(["env"], user=AGENT_UID))
        given = _env(await ws.exec(["env"], env={"PATH": "/usr/bin:/bin", "ONLY_THIS": "1"}))
    expect(default_root.get("HOME") == "/root", f"root's default HOME is {default_root.get('HOME')!r}")
    expect(default_agent.get("HOME") == "/tmp", f"the agent's default HOME is {default_agent.get('HOME')!r}")
    expect(default_root.get("LANG") == "C.UTF-8", f"default LANG is {default_root.get('LANG')!r}")
    expect(
        "/usr/bin" in default_root.get("PATH", "").split(":"),
        f"default PATH {default_root.get('PATH')!r} lacks /usr/bin",
    )
    expect(
        given.get("ONLY_THIS") == "1" and given.get("PATH") == "/usr/bin:/bin",
        f"the given env was not applied: {given}",
    )
    baseline = await probe.baseline_env_names(ws)
    for who, listing in (("root default", default_root), ("agent default", default_agent), ("given", given)):
        expect("CRUCIBLE_SECRET_CANARY" not in listing, f"the engine's environment leaked into the {who} env")
        extra = set(listing) - baseline - {"PATH", "HOME", "LANG", "ONLY_THIS"}
        expect(not extra, f"the {who} env has unexpected variables: {sorted(extra)}")


@check()
async def check_exec_timeout_kills_the_whole_process_group(ws: Workspace) -> None:
    """A timeout kills the command's background grandchild as well as the child: exit 124."""
    seconds = marker()
    result = await ws.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"], timeout=1)
    expect(
        result.timed_out and result.exit_code == 124,
        f"timed_out={result.timed_out} exit_code={result.exit_code}, expected True and 124",
    )
    expect(1 <= result.seconds < 8, f"a 1 s timeout took {result.seconds:.2f} s")
    await expect_no_sleepers(ws, seconds, "the timeout")


@check()
async def check_cancelling_an_exec_kills_its_command(ws: Workspace) -> None:
    """Cancelling the awaiting task kills the command and its background children."""
    seconds = marker()
    task = asyncio.ensure_future(ws.exec(["bash", "-c", f"sleep {seconds} & sleep {seconds}"]))
    try:
        await wait_for_sleepers(ws, seconds, 2)
    finally:
        task.cancel()
        with raises(asyncio.CancelledError, "awaiting a cancelled exec"):
            await task
    await expect_no_sleepers(ws, seconds, "the exec was cancelled")


@check()
async def check_exec_that_finishes_in_time_is_not_timed_out(ws: Workspace) -> None:
    """A command that exits 124 by itself is not reported as timed out."""
    result = await ws.exec(["sh", "-c", "exit 124"], timeout=30)
    expect(result.exit_code == 124 and not result.timed_out, f"exit 124 within the deadline gave {result}")


@check()
async def check_exec_returns_when_the_command_exits_though_a_background_child_holds_its_output(ws: Workspace) -> None:
    """exec returns when the command exits, not when a background child closes its output."""
    seconds = marker()
    result = await ws.exec(["bash", "-c", f"sleep {seconds} & echo started"], timeout=60)
    try:
        expect(result.ok and result.stdout == b"started\n", f"unexpected result {result}")
        expect(result.seconds < 10, f"took {result.seconds:.1f} s: waited for the background child")
    finally:
        await kill_sleepers(ws, seconds)
    await expect_no_sleepers(ws, seconds, "killing them")


@check()
async def check_exec_keeps_head_and_tail_of_huge_output_without_deadlock(ws: Workspace) -> None:
    """Past max_output, the first and last halves of each stream are kept and totals count all."""
    script = (
        "echo HEAD; echo head >&2; head -c 20000000 /dev/zero; head -c 20000000 /dev/zero >&2; echo TAIL; echo tail >&2"
    )
    result = await ws.exec(["sh", "-c", script], max_output=64 * 1024, timeout=120)
    expect(result.ok and result.truncated, f"ok={result.ok} truncated={result.truncated}, expected both")
    sizes = (len(result.stdout), len(result.stderr))
    expect(sizes == (64 * 1024, 64 * 1024), f"kept {sizes} bytes, expected 65536 of each")
    expect(
        result.stdout.startswith(b"HEAD\n\0") and result.stdout.endswith(b"\0TAIL\n"), "stdout lost its head or tail"
    )
    expect(
        result.stderr.startswith(b"head\n\0") and result.stderr.endswith(b"\0tail\n"), "stderr lost its head or tail"
    )
    totals = (result.stdout_bytes_total, result.stderr_bytes_total)
    expect(totals == (20_000_010, 20_000_010), f"byte totals are {totals}, expected 20000010 each")


@check()
async def check_exec_feeds_stdin_while_reading_output(ws: Workspace) -> None:
    """stdin larger than any pipe buffer is fed while output is read; empty stdin is EOF."""
    data = os.urandom(3 << 20)
    result = await ws.exec(["cat"], stdin=data, max_output=4 << 20, timeout=120)
    expect(
        result.ok and not result.truncated,
        f"cat of 3 MiB stdin: {result.exit_code=} {result.timed_out=} {result.truncated=}",
    )
    expect(result.stdout == data, f"cat gave back {len(result.stdout)} bytes, not the 3 MiB fed")
    count = (await ws.exec(["wc", "-c"], stdin=b"")).stdout.strip()
    expect(count == b"0", f"wc -c of empty stdin printed {count!r}")


@check()
async def check_exec_of_a_missing_program_exits_127(ws: Workspace) -> None:
    """A program not found exits 127 (not an exception)."""
    code = (await ws.exec(["no-such-program-here"])).exit_code
    expect(code == 127, f"exit code {code}, expected 127")


@check()
async def check_exec_in_a_missing_cwd_raises_workspace_error(ws: Workspace) -> None:
    """A cwd that does not exist raises WorkspaceError."""
    with raises(WorkspaceError, "exec in a missing cwd"):
        await ws.exec(["pwd"], cwd="/no/such/dir")


@check()
async def check_exec_leaves_the_event_loop_free(ws: Workspace) -> None:
    """Three concurrent 1 s execs leave the event loop ticking."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    task = asyncio.ensure_future(ticker())
    try:
        results = await asyncio.gather(*(ws.exec(["sleep", "1"]) for _ in range(3)))
    finally:
        task.cancel()
    expect(all(r.ok for r in results), f"sleep 1 failed: {results}")
    expect(ticks >= 10, f"the loop ticked {ticks} times in ~1 s (expected ~20 at 50 ms): exec blocked it")
