"""Who owns a workspace: labels naming a crucible process, and whether that process still lives.

Every runtime marks what it makes with its owner (host, pid and the pid's start time: Docker
as container labels, the local runtime in its run roots), so that any crucible command can
clean up after owners that died without doing so (a SIGKILL, an OOM kill, a power cut). The
start time matters: pids are reused, and a live process that happens to hold a dead owner's
pid must not keep its workspaces alive.
"""

from __future__ import annotations

import os
import socket

LABEL_OWNER_PID = "crucible.owner_pid"
LABEL_OWNER_HOST = "crucible.owner_host"
LABEL_OWNER_STARTED = "crucible.owner_started"


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = _proc_stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _proc_stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from field 3 (the state) on; None without such a process or /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields resume after the last ")".
    return stat[stat.rfind(")") + 2 :].split()


def owner_labels() -> dict[str, str]:
    """Labels naming this process as a container's owner."""
    return {
        LABEL_OWNER_PID: str(os.getpid()),
        LABEL_OWNER_HOST: socket.gethostname(),
        LABEL_OWNER_STARTED: process_start_time(os.getpid()) or "",
    }


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the owner named by ``labels`` (a process on this host) is still running."""
    try:
        pid = int(labels.get(LABEL_OWNER_PID, ""))
    except ValueError:
        return False
    if pid <= 0:
        return False
    fields = _proc_stat_fields(pid)
    if fields is None or len(fields) <= 19:
        return _pid_exists(pid)  # no /proc (not Linux): the pid is all we can check
    if fields[0] in ("Z", "X"):
        # Dead, not yet waited for: a killed sweep worker is re-parented to init, and an
        # init that reaps slowly (or never, in some containers) would keep it a zombie.
        return False
    recorded = labels.get(LABEL_OWNER_STARTED, "")
    return not recorded or recorded == fields[19]


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
