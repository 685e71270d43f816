"""A run's bridge directory names its owner, so one left by a run killed with -9 is removed
by the next crucible command's housekeeping, and a live run's bridge is never touched."""

from __future__ import annotations

import os
import subprocess

from engine.run.bridges import BRIDGE_PREFIX, bridge_prefix, reap_orphan_bridges
from engine.runtimes.owner import process_start_time


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_dead_owners_bridge_is_reaped_and_live_or_unowned_ones_stay(tmp_path):
    live = tmp_path / f"{bridge_prefix()}abc123"
    dead = tmp_path / f"{BRIDGE_PREFIX}{_dead_pid()}.12345-def456"
    # This pid, but another start time: the pid was reused, the owner is gone.
    reused = tmp_path / f"{BRIDGE_PREFIX}{os.getpid()}.{int(process_start_time(os.getpid()) or 0) + 1}-ghi789"
    unowned = tmp_path / f"{BRIDGE_PREFIX}k7x2q9"  # an older crucible's name: no owner in it
    for path in (live, dead, reused, unowned):
        path.mkdir()
        (path / "mcp.sock").write_text("")
    reaped = reap_orphan_bridges(tmp_path)
    assert sorted(reaped) == sorted([str(dead), str(reused)])
    assert live.exists() and unowned.exists()
    assert not dead.exists() and not reused.exists()
