"""What the conformance checks (``engine.runtimes.conformance``) see of ``runtime=local``
from outside its sandboxes: a run's roots on disk and any process whose mounts still hold one."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from engine.interfaces import Workspace
from engine.runtimes.conformance import LEFTOVERS
from engine.runtimes.local.template import run_roots

if TYPE_CHECKING:
    from engine.runtimes.local.runtime import LocalRuntime


class LocalProbe:
    capabilities = frozenset({LEFTOVERS})

    def __init__(self, runtime: LocalRuntime) -> None:
        self.runtime = runtime

    def leftovers(self, run_id: str) -> list[str]:
        return [str(root) for root in run_roots(run_id)] + [f"pid {pid}" for pid in sandboxes_of(run_id)]

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """Beyond its env a command sees only the shell's PWD (the wrapper enters cwd with cd)."""
        return {"PWD"}


def probe(runtime: LocalRuntime) -> LocalProbe:
    return LocalProbe(runtime)


def sandboxes_of(run_id: str) -> list[str]:
    """Live processes whose mount namespace still holds one of ``run_id``'s run roots (its sandbox)."""
    return processes_with(f"/local/runs/{run_id}-".encode(), "mountinfo")


def processes_with(needle: bytes, what: str = "cmdline") -> list[str]:
    """Live (not zombie) host processes whose /proc/PID/``what`` contains ``needle``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as source:
                if needle in source.read() and not is_zombie(pid):
                    found.append(pid)
        except OSError:
            pass
    return found


def is_zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True
