"""Finds and removes containers whose crucible owner process died without cleaning up.

Workspaces remove their own container on every way out of their ``async with`` block,
but a SIGKILL, an OOM kill or a power cut skips all of that. Every container crucible
starts is labelled with its owner (``engine.runtimes.owner``); any crucible command can
then sweep up after dead owners with one cheap ``containers.list``. Containers of other
hosts (a shared remote engine) are never touched: their owners cannot be checked from here.
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from engine.errors import EngineUnavailable
from engine.runtimes.owner import LABEL_OWNER_HOST, LABEL_OWNER_PID, owner_alive

log = logging.getLogger(__name__)

LABEL_RUN_ID = "crucible.run_id"
LABEL_PURPOSE = "crucible.purpose"


def being_removed(exc: Exception) -> bool:
    """Whether a Docker API error says another caller is removing the container already (409):
    another command's reaper, or its owner's own teardown. Gone either way."""
    return getattr(exc, "status_code", None) == 409 and "already in progress" in str(exc)


def reap_orphans(client: Any = None) -> list[str]:
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
        raise EngineUnavailable(f"Docker engine unreachable ({exc}); start it with `crucible doctor --fix`") from exc
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
            if not being_removed(exc):
                log.warning("could not remove orphaned container %s: %s", name, exc)
            continue
        log.info("removed orphaned container %s (owner pid %s gone)", name, labels.get(LABEL_OWNER_PID))
        reaped.append(name)
    return reaped + _reap_volumes(client, host)


def _reap_volumes(client: Any, host: str) -> list[str]:
    """The bridge relays' volumes (relay.py) of dead owners, once their containers are gone."""
    import docker.errors
    import requests.exceptions

    try:
        volumes = client.api.volumes(filters={"label": LABEL_OWNER_PID}).get("Volumes") or []
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        log.warning("could not list volumes to reap: %s", exc)
        return []
    reaped = []
    for volume in volumes:
        labels = volume.get("Labels") or {}
        if labels.get(LABEL_OWNER_HOST) != host or owner_alive(labels):
            continue
        try:
            client.api.remove_volume(volume["Name"], force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            # In use (409): by a container another caller is still removing; reaped next time.
            level = logging.DEBUG if exc.status_code == 409 else logging.WARNING
            log.log(level, "could not remove orphaned volume %s: %s", volume["Name"], exc)
            continue
        reaped.append(volume["Name"])
    return reaped
