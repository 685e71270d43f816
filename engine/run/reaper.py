"""Finds and removes containers whose crucible owner process died without cleaning up.

Workspaces remove their own container on every way out of their ``async with`` block,
but a SIGKILL, an OOM kill or a power cut skips all of that. Every container crucible
starts is labelled with its owner (host, pid and the pid's start time); any crucible
command can then sweep up after dead owners with one cheap ``containers.list``.

The start time matters: pids are reused, and a live process that happens to hold a
dead owner's pid must not keep its containers alive. Containers of other hosts (a
shared remote engine) are never touched: their owners cannot be checked from here.
"""
from __future__ import annotations

import logging
import os
import shutil
import socket
from pathlib import Path

from engine.errors import EngineUnavailable

log = logging.getLogger(__name__)

LABEL_RUN_ID = "crucible.run_id"
LABEL_PURPOSE = "crucible.purpose"
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
    return stat[stat.rfind(")") + 2:].split()


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


def reap_orphans(client=None) -> list[str]:
    """Force-remove crucible containers of dead owners on this host; return their names.

    Raises ``EngineUnavailable`` when no Docker engine can be reached.
    """
    import docker
    import docker.errors
    import requests.exceptions

    try:
        client = client or docker.from_env(timeout=60)
        # The low-level list carries the labels; the high-level one would inspect each container.
        containers = client.api.containers(all=True, filters={"label": LABEL_OWNER_PID})
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise EngineUnavailable(
            f"Docker engine unreachable ({exc}); start it with `crucible doctor --fix`"
        ) from exc
    host = socket.gethostname()
    reaped = []
    for container in containers:
        labels = container.get("Labels") or {}
        if labels.get(LABEL_OWNER_HOST) != host or owner_alive(labels):
            continue
        name = (container.get("Names") or [container["Id"][:12]])[0].lstrip("/")
        try:
            client.api.remove_container(container["Id"], force=True, v=True)
        except docker.errors.NotFound:
            pass  # another process reaped it first
        except docker.errors.APIError as exc:
            log.warning("could not remove orphaned container %s: %s", name, exc)
            continue
        log.info("removed orphaned container %s (owner pid %s gone)", name,
                 labels.get(LABEL_OWNER_PID))
        reaped.append(name)
    return reaped


BRIDGE_PREFIX = "crucible-bridge-"
BRIDGE_ROOT = Path("/tmp")
"""Where runs make their bridge directories (short: unix socket paths are limited to 108 bytes)."""


def bridge_prefix() -> str:
    """A bridge directory's name prefix naming its owner (this pid and its start time), so a
    bridge left by a killed run can be told from a live one's."""
    return f"{BRIDGE_PREFIX}{os.getpid()}.{process_start_time(os.getpid()) or 0}-"


def reap_orphan_bridges(root: Path = BRIDGE_ROOT) -> list[str]:
    """Remove the bridge directories of dead owners (a run killed with -9 leaves its bridge);
    return their paths. A name without an owner (made by an older crucible) is left alone."""
    reaped = []
    for path in root.glob(f"{BRIDGE_PREFIX}*"):
        owner, _, _ = path.name[len(BRIDGE_PREFIX):].partition("-")
        pid, _, started = owner.partition(".")
        if not pid.isdigit() or not started.isdigit():
            continue
        labels = {LABEL_OWNER_PID: pid, LABEL_OWNER_STARTED: "" if started == "0" else started}
        if owner_alive(labels):
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            log.info("removed orphaned bridge %s (owner pid %s gone)", path, pid)
            reaped.append(str(path))
    return reaped
