"""Helpers the checks share: find, wait for and kill a check's own ``sleep`` processes (via /proc)."""

from __future__ import annotations

import asyncio
import contextlib
import random

from engine.interfaces import Workspace
from engine.runtimes.conformance._core import ConformanceFailure, expect


def marker() -> str:
    """A sleep duration no other check uses, so its processes can be found in /proc."""
    return str(random.randint(100_000, 999_999))


async def processes_sleeping(ws: Workspace, seconds: str) -> int:
    """How many processes in the workspace run ``sleep SECONDS`` (read from /proc; no ps needed)."""
    listing = await ws.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null; true"])
    return listing.stdout.count(b"sleep\x00" + seconds.encode() + b"\x00")


async def wait_for_sleepers(ws: Workspace, seconds: str, count: int, limit: float = 20.0) -> None:
    try:
        async with asyncio.timeout(limit):
            while await processes_sleeping(ws, seconds) < count:
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise ConformanceFailure(f"{count} `sleep {seconds}` processes did not appear within {limit:.0f} s") from None


async def kill_sleepers(ws: Workspace, seconds: str) -> None:
    script = (
        f'for p in /proc/[0-9]*; do [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "sleep {seconds} " ]'
        ' && kill -9 "${p#/proc/}"; done; true'
    )
    await ws.exec(["sh", "-c", script])


async def expect_no_sleepers(ws: Workspace, seconds: str, after: str, limit: float = 10.0) -> None:
    """None left, once the kills have landed: a SIGKILL is delivered when its target next runs,
    so on a loaded machine a process can still be listed a moment after ``kill -9`` returned
    (seen at load 6: one left, read at once)."""
    left = await processes_sleeping(ws, seconds)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit):
            while left:
                await asyncio.sleep(0.05)
                left = await processes_sleeping(ws, seconds)
    expect(left == 0, f"{left} `sleep {seconds}` process(es) still running {limit:.0f} s after {after}")
