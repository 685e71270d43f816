"""Checks only some backends are held to (a probe capability each): Docker's init and labels, the exec backstop."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING

from engine.runtimes.conformance._core import DOCKER_CONTAINER, EXEC_BACKSTOP, check, expect
from engine.runtimes.conformance._helpers import expect_no_sleepers, marker

if TYPE_CHECKING:
    from engine.runtimes.docker.runtime import DockerWorkspace


@check(needs=(DOCKER_CONTAINER,))
async def check_container_runs_an_init_with_owner_labels(ws: DockerWorkspace) -> None:
    """PID 1 is an init (removal is instant), no network, labels name the owner and the run."""
    from engine.runtimes.docker.reaper import LABEL_RUN_ID
    from engine.runtimes.owner import LABEL_OWNER_PID, LABEL_OWNER_STARTED, process_start_time

    attrs = await asyncio.to_thread(ws.client.api.inspect_container, ws.container_id)
    expect(attrs["HostConfig"]["Init"] is True, f"HostConfig.Init is {attrs['HostConfig']['Init']!r}")
    expect(attrs["HostConfig"]["NetworkMode"] == "none", f"NetworkMode is {attrs['HostConfig']['NetworkMode']!r}")
    # No network sandbox made at all (the cheaper start; runtime.py says why).
    expect(
        attrs["Config"].get("NetworkDisabled") is True,
        f"Config.NetworkDisabled is {attrs['Config'].get('NetworkDisabled')!r}",
    )
    labels = attrs["Config"]["Labels"]
    expected = {
        LABEL_OWNER_PID: str(os.getpid()),
        LABEL_OWNER_STARTED: process_start_time(os.getpid()),
        LABEL_RUN_ID: ws.run_id,
    }
    got = {key: labels.get(key) for key in expected}
    expect(got == expected, f"labels are {got}, expected {expected}")


@check(needs=(EXEC_BACKSTOP,))
async def check_backstop_reports_a_timeout_when_the_in_container_timeout_fails(ws: DockerWorkspace) -> None:
    """With a `timeout` that ignores its deadline first on PATH, the host-side backstop still
    kills the command and reports a timeout."""
    seconds = marker()
    await ws.write_file("/opt/broken/timeout", b'#!/bin/sh\nshift 3\nexec "$@"\n', mode=0o755)
    grace, ws.backstop_grace = ws.backstop_grace, 1.0
    try:
        result = await ws.exec(["sleep", seconds], timeout=0.5, env={"PATH": "/opt/broken:/usr/bin:/bin"})
    finally:
        ws.backstop_grace = grace
    expect(
        result.timed_out and result.exit_code == 124,
        f"timed_out={result.timed_out} exit_code={result.exit_code}, expected True and 124",
    )
    expect(1.5 <= result.seconds < 10, f"took {result.seconds:.2f} s, expected deadline + grace (1.5 s) to 10 s")
    await expect_no_sleepers(ws, seconds, "the backstop fired")
