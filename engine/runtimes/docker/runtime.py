"""``runtime=docker``: one container per workspace (``DockerWorkspace``,
engine/runtimes/docker/workspace.py), driven through the Docker SDK; its config and the
runtime that makes its workspaces.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.config.schema import RuntimeConfig
from engine.models import ImageRef, TaskLimits
from engine.runtimes.docker.daemon import connect, ensure_engine
from engine.runtimes.docker.placement import DockerHost, HostPool, as_hosts, check_hosts
from engine.runtimes.docker.relay import check_bridge
from engine.runtimes.docker.workspace import HOSTS, KEEPER, DockerWorkspace

__all__ = ["HOSTS", "KEEPER", "DockerRuntime", "DockerRuntimeConfig", "DockerWorkspace"]

if TYPE_CHECKING:
    from engine.build.images import ContentAddressedBuilder
    from engine.config.schema import IntegrityConfig

log = logging.getLogger(__name__)


@dataclass
class DockerRuntimeConfig(RuntimeConfig):
    _target_: str = "engine.runtimes.docker.runtime.DockerRuntime"
    name: str = "docker"
    api_timeout: float = 1800.0
    default_exec_timeout: float = 1800.0
    memory: str | None = None
    cpus: float | None = None
    pids_limit: int | None = 4096
    hosts: list[DockerHost] = field(default_factory=list, metadata={"spec": "omit"})
    """Remote Docker hosts to place runs on (``engine/runtimes/docker/placement.py``); empty:
    this machine's engine. Where a run ran is no part of what it is: never in its spec."""
    bridge: str = field(default="mount", metadata={"spec": "omit"})
    """How a workspace sees the run's bridge: "mount" (a bind mount; this machine's engine) or
    "relay" (engine/runtimes/docker/relay.py; what a listed host always gets)."""
    spare_execs: bool = field(default=False, metadata={"spec": "omit"})  # engine/runtimes/docker/spares.py
    spawner: bool = field(default=True, metadata={"spec": "omit"})
    """Commands started by the container's own process, not ``docker exec`` (engine/runtimes/docker/spawner.py)."""

    def __post_init__(self) -> None:
        check_hosts(self.hosts)
        check_bridge(self.bridge)


class DockerRuntime:
    """Makes ``DockerWorkspace``s. Instantiated by Hydra from ``conf/runtime/docker.yaml``."""

    config_schema = DockerRuntimeConfig

    def __init__(
        self,
        api_timeout: float = 1800.0,
        default_exec_timeout: float = 1800.0,
        memory: str | None = None,
        cpus: float | None = None,
        pids_limit: int | None = 4096,
        name: str = "docker",
        hosts: Sequence[DockerHost | Mapping[str, Any]] = (),
        bridge: str = "mount",
        spare_execs: bool = False,
        spawner: bool = True,
    ) -> None:
        # The SDK's default 60 s read timeout made peers' long test runs fail silently.
        self.api_timeout = float(api_timeout)
        self.default_exec_timeout = float(default_exec_timeout)
        self.memory = memory
        self.cpus = cpus
        self.pids_limit = pids_limit
        self.bridge = check_bridge(bridge)
        self.spare_execs = bool(spare_execs)
        self.spawner = bool(spawner)
        self.name = name
        self._client = None
        self._lock = threading.Lock()
        self._images: dict[str, dict[str, Any]] = {}
        """Image inspects by tag, kept for this runtime's life (a sweep builds nothing once its runs start)."""
        listed = as_hosts(hosts)
        self.pool = HostPool(listed, self.api_timeout) if listed else None
        """The listed hosts (``runtime.hosts``), None when containers run on this machine's engine."""

    @property
    def client(self) -> Any:  # docker.DockerClient: the SDK ships no types
        """The SDK client, created (and the engine pinged) on first use."""
        with self._lock:
            if self._client is None:
                self._client = connect(self.api_timeout)
            return self._client

    def housekeeping(self) -> None:
        """Before a sweep: every listed host connected, so each is rid of the containers of owners that died (a sweep
        killed while its host was away) and a dead one is known."""
        if self.pool is not None:
            self.pool.connect_all()

    def host_down(self, url: str) -> bool:
        """Whether the listed host ``url`` was found unreachable (and is skipped for now): a run
        that failed on it meanwhile failed with it (``Runner.execute``)."""
        pool = self.pool
        return pool is not None and any(pool.url(i) == url and pool.is_down(i) for i in range(len(pool.hosts)))

    def supports(self, integrity: IntegrityConfig) -> str | None:
        """Every mode (None): the uid wall is each command's uid (the spawner's, or docker exec's
        --user), no network is network_mode=none, and grading always gets a fresh container."""
        return None

    def require(self, integrity: IntegrityConfig) -> None:
        return None

    def image_builder(self, *, ca_bundle: str | None) -> ContentAddressedBuilder:
        """Content-addressed Docker images, built by this runtime's engine; ``ca_bundle``
        None forwards the host's bundle ($SSL_CERT_FILE), if any."""
        from engine.build.images import AUTO, BUILD_TIMEOUT, ContentAddressedBuilder

        return ContentAddressedBuilder(ensure_engine(client_timeout=BUILD_TIMEOUT), ca_bundle=ca_bundle or AUTO)

    def image_id(self, tag: str) -> str | None:
        """``tag``'s content ID on this machine's engine (``inspected``); None with listed hosts,
        where each host holds an image of its own, or when there is no such image."""
        inspected = self.inspected(tag)
        return None if inspected is None else str(inspected["Id"])

    def inspected(self, tag: str) -> dict[str, Any] | None:
        """``tag``'s inspect on this machine's engine, one kept for this runtime's life: a sweep
        builds nothing once its runs start, and its runs ask of each image its content ID
        (``image_id``) and the config its containers start with. None with listed hosts, or when
        there is no such image (or no engine: what asks again then says why)."""
        if self.pool is not None:
            return None
        known = self._images.get(tag)
        if known is None:
            try:
                known = self._images[tag] = self.client.api.inspect_image(tag)
            except Exception as exc:  # no such image, an engine that went away
                log.debug("no inspect of %s: %s", tag, exc)
                return None
        return known

    limits_resources = True
    """A task's cpus and memory (``TaskLimits``) are applied: the container's cgroup."""

    def provision(
        self,
        image: ImageRef | str,
        *,
        run_id: str,
        network: bool,
        purpose: str,
        bridge: str | None = None,
        limits: TaskLimits | None = None,
    ) -> DockerWorkspace:
        tag = image.tag if isinstance(image, ImageRef) else str(image)
        return DockerWorkspace(
            self, tag, run_id=run_id, network=network, purpose=purpose, bridge_dir=bridge, limits=limits
        )

    def host_config(self, task: TaskLimits | None = None) -> dict[str, Any]:
        """The container's resource limits: the runtime's own (``runtime.memory``/``cpus``), a
        task's own (``TaskLimits``) over them."""
        limits: dict[str, Any] = {}
        memory = task.memory_bytes if task is not None and task.memory_bytes else self.memory
        cpus = task.cpus if task is not None and task.cpus else self.cpus
        if memory:
            limits["mem_limit"] = memory
        if cpus:
            limits["nano_cpus"] = int(float(cpus) * 1e9)
        if self.pids_limit:
            limits["pids_limit"] = int(self.pids_limit)
        return limits
