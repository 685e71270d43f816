"""What the conformance checks (``engine.runtimes.conformance``) see of ``runtime=docker``
from outside its containers: leftovers by run label, and the image's declared ENV."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.interfaces import Workspace
from engine.runtimes.conformance import DOCKER_CONTAINER, EXEC_BACKSTOP, LEFTOVERS
from engine.runtimes.docker.reaper import LABEL_RUN_ID

if TYPE_CHECKING:
    from engine.runtimes.docker.runtime import DockerRuntime


class DockerProbe:
    capabilities = frozenset({LEFTOVERS, DOCKER_CONTAINER, EXEC_BACKSTOP})

    def __init__(self, runtime: DockerRuntime) -> None:
        self.runtime = runtime

    def leftovers(self, run_id: str) -> list[str]:
        """Containers, running or not, labelled with the run: on this machine's engine, or on
        every listed host that is up (``runtime.hosts``)."""
        pool = self.runtime.pool
        clients = [self.runtime.client] if pool is None else pool.clients_up()
        label = {"label": f"{LABEL_RUN_ID}={run_id}"}
        return [found["Names"][0] for client in clients for found in client.api.containers(all=True, filters=label)]

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """The image's declared ENV (Docker always applies it; it is part of the image, not
        of the engine) and the shell's PWD."""
        declared = (await ws.exec(["cat", "/proc/1/environ"])).stdout.split(b"\0")
        return {item.split(b"=", 1)[0].decode() for item in declared if item} | {"PWD"}


def probe(runtime: DockerRuntime) -> DockerProbe:

    return DockerProbe(runtime)
