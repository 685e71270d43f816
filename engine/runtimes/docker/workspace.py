"""A workspace of ``runtime=docker`` (engine/runtimes/docker/runtime.py): one container.

The engine talks to the container through its own process (the spawner, which starts each
command: engine/runtimes/docker/spawner.py), ``docker exec`` and the archive API, never
through its IP address. The container's PID 1 is docker-init (``init=True``) with the spawner
under it (``sleep infinity`` where there is no spawner), so removal is immediate instead of
waiting out a stop timeout.

The runtime owns what the container runs, whatever image it is: the keeper is the
*entrypoint*, not the command, so an image's own ``ENTRYPOINT`` never wraps it (709 of
SWE-bench Pro's 731 base images set ``ENTRYPOINT ["/bin/bash"]``, which ran ``/bin/bash sleep
infinity`` and exited at once; an entrypoint script that ``exec "$@"`` would run its set-up
first), the image's ``CMD`` is dropped with it (Docker keeps an image's CMD only under the
image's own entrypoint), and its ``HEALTHCHECK`` is off (a probe the image defines would
run inside the task). The image's ``USER`` does not matter: every command names its uid.

Teardown: leaving the ``async with`` block removes the container with ``force=True``
on every path (normal exit, exception, asyncio cancellation, KeyboardInterrupt) from
a ``finally`` that cancellation cannot cut short; SIGTERM reaches it as KeyboardInterrupt or a
task cancellation, which is what the CLI makes of it. What no ``finally`` can survive (SIGKILL,
OOM) is left to ``engine.runtimes.docker.reaper.reap_orphans`` via the owner labels.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import InfrastructureError, WorkspaceError
from engine.interfaces import BRIDGE_PATH, ROOT_UID
from engine.models import ExecResult, TaskLimits, TtySize
from engine.runtimes.docker.exec import (
    BACKSTOP_GRACE,
    DEFAULT_PATH,
    default_env,
    run_exec_or_spare,
    sdk_call,
    start_spare,
)
from engine.runtimes.docker.files import absolute, read_file, single_file_tar, write_file
from engine.runtimes.docker.placement import place
from engine.runtimes.docker.process import DockerProcess
from engine.runtimes.docker.reaper import LABEL_PURPOSE, LABEL_RUN_ID, being_removed
from engine.runtimes.docker.relay import BridgeRelay
from engine.runtimes.docker.spares import Spares, kind_of
from engine.runtimes.docker.spawned import SpawnedProcess, open_spawned, run_spawned
from engine.runtimes.docker.spawner import ENTRYPOINT, MOUNT, Spawner, built
from engine.runtimes.lifecycle import StartedOnce
from engine.runtimes.owner import owner_labels
from engine.util.aio import finish_even_if_cancelled

log = logging.getLogger(__name__)

HOSTS = Path(__file__).with_name("hosts")
"""/etc/hosts of a workspace without network (as Docker writes it for mode none: localhost only)."""
KEEPER = ("sleep", "infinity")
"""What the container runs under docker-init, as its entrypoint, where there is no spawner (the module's docstring)."""
QUIT_WAIT = 10
"""Seconds a container whose spawner was told to quit has to stop before it is removed running."""

if TYPE_CHECKING:
    from engine.runtimes.docker.runtime import DockerRuntime


class DockerWorkspace(StartedOnce):
    """One container: ``exec``, ``open_process``, files through the archive API, ``close``."""

    backstop_grace = BACKSTOP_GRACE

    def __init__(
        self,
        runtime: DockerRuntime,
        image: str,
        *,
        run_id: str,
        network: bool,
        purpose: str,
        bridge_dir: str | None = None,
        limits: TaskLimits | None = None,
    ) -> None:
        self.runtime = runtime
        self.limits = limits
        self.image = image
        self.run_id = run_id
        self.network = bool(network)
        self.bridge_dir = bridge_dir
        self.bridge = BRIDGE_PATH if bridge_dir else None
        self.purpose = purpose
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{run_id}-{purpose}").strip("-.")[:60]
        self.name = f"crucible-{slug}-{secrets.token_hex(3)}"
        self.container_id: str | None = None
        self._path = DEFAULT_PATH
        self._state = "new"  # new -> starting -> running -> closing -> closed
        self._closing: asyncio.Future[None] | None = None
        self._processes: list[DockerProcess | SpawnedProcess] = []
        self._spawner: Spawner | None = None  # the container's own process, when it is the spawner
        self._spares = Spares(lambda kind: start_spare(self.client.api, self._running_id(), kind))
        self._created = False  # set just before the create call: only then is there anything to remove
        self.remote = runtime.pool is not None
        """Placed on a listed Docker host (``runtime.hosts``): nothing of this machine's file
        system reaches the container (no bind mounts; /etc/hosts is written in, the bridge relayed)."""
        self.host: str | None = None
        """The URL of the listed host it runs on, once started (None: this machine's engine)."""
        self._host_index: int | None = None  # its slot in ``runtime.pool``, held from placement to removal
        self._relay: BridgeRelay | None = None  # the bridge over the exec channel (relay.py), when not bind-mounted
        self._placed = asyncio.Event()  # its host slot held (engine.run.resources.Placed)
        if runtime.pool is None:
            self._placed.set()

    @property
    def client(self) -> Any:  # docker.DockerClient
        """The SDK client of the engine this container runs on: its host's, else this machine's."""
        if self._host_index is not None:
            return self.runtime.pool.client(self._host_index)  # type: ignore[union-attr]
        return self.runtime.client

    def __repr__(self) -> str:
        return f"DockerWorkspace({self.name}, image={self.image}, network={self.network}, {self._state})"

    # -- lifecycle -------------------------------------------------------------------------

    async def until_placed(self) -> None:
        """Until it holds a listed host's slot, or never will: a run waits for it first (``resources.Placed``)."""
        await self._placed.wait()

    async def _start(self) -> None:
        if self.runtime.pool is not None:  # a listed host's slot, held until teardown
            try:
                self._host_index = await place(self.runtime.pool, self.run_id)
                self.host = self.runtime.pool.url(self._host_index)
            finally:
                self._placed.set()
        # Shielded: a cancel must not leave the creating thread to finish unseen; close()
        # (StartedOnce) removes whatever it managed to create.
        await finish_even_if_cancelled(asyncio.to_thread(self._create_and_start))
        if self._relay is not None:  # the bridge over the exec channel (relay.py)
            try:
                await self._relay.start()
            except WorkspaceError as exc:
                self._raise_if_lost(exc, "provision")
                raise

    async def _teardown(self) -> None:
        self._state = "closing"
        self._placed.set()  # no place will come now
        for process in self._processes:
            process.abort()
        self._spares.close()
        try:
            await asyncio.to_thread(self._remove)
        finally:
            if self._spawner is not None:
                self._spawner.close()
            if self._relay is not None:  # after the container, which mounts the relay's volume
                await self._relay.close()
            self._state = "closed"
            if self._host_index is not None and self.runtime.pool is not None:
                self.runtime.pool.release(self.run_id)

    def _create_and_start(self) -> None:
        import docker.errors
        import requests.exceptions

        client = self._ready_host() if self.remote else self.runtime.client
        labels = {LABEL_RUN_ID: self.run_id, LABEL_PURPOSE: self.purpose, **owner_labels()}
        if self.bridge_dir and (self.remote or self.runtime.bridge == "relay"):
            relay_labels = {**labels, LABEL_PURPOSE: f"{self.purpose}-bridge"}
            self._relay = BridgeRelay(
                client, self.bridge_dir, name=self.name, labels=relay_labels, host=self.host, phase=self.purpose
            )
        self._created = True
        try:
            if self._relay is not None:  # its image on the engine (moved to a listed host), its volume made
                pool, index, local = self.runtime.pool, self._host_index, lambda: self.runtime.client
                self._relay.prepare(
                    None if pool is None or index is None else lambda t: pool.ensure_image(index, t, local)
                )
            spawner = built() if self.runtime.spawner and not self.remote else None
            binds = {
                **(self._volumes() or {}),
                **({str(spawner): {"bind": MOUNT, "mode": "ro"}} if spawner else {}),
            }
            api = client.api
            host_config = api.create_host_config(
                binds=binds or None,
                init=True,
                network_mode="bridge" if self.network else "none",
                # the spawner's requests and events: held by this engine alone, logged nowhere
                **({"log_config": {"type": "none"}} if spawner else {}),
                **self.runtime.host_config(self.limits),
            )
            created = api.create_container(
                self.image,
                entrypoint=list(ENTRYPOINT if spawner else KEEPER),
                # root whatever the image's USER: the spawner starts each command as the uid asked for
                **({"stdin_open": True, "user": "0:0"} if spawner else {}),
                command=[],
                healthcheck={"test": ["NONE"]},
                name=self.name,
                detach=True,
                labels=labels,
                # No network: NetworkDisabled as well as mode none. Docker then makes no network
                # sandbox for the container (none still gets one: two re-execs of dockerd, the
                # libnetwork-setkey hook and set-ipv6, ~0.13 CPU-s a container, half its start),
                # and the kernel's fresh namespace has the same lone loopback. Docker writes no
                # /etc/hosts then, so localhost's is bound in (HOSTS).
                network_disabled=not self.network,
                volumes=[bind["bind"] for bind in binds.values()] or None,
                host_config=host_config,
            )
            self.container_id = created["Id"]
            config = self._config(api, self.container_id)
            self._path = _image_path({"Config": config}) or DEFAULT_PATH
            if self.remote and not self.network:  # no host file to bind there: written in instead
                api.put_archive(
                    self.container_id, "/etc", single_file_tar("hosts", HOSTS.read_bytes(), 0o644, ROOT_UID)
                )
            if spawner:  # attached before the start: nothing it says is missed
                self._spawner = Spawner.attach(api, self.container_id, config)
            api.start(self.container_id)
        except docker.errors.ImageNotFound as exc:
            raise WorkspaceError(f"image {self.image} not found; build it first (crucible build)") from exc
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            self._raise_if_lost(exc, "provision")
            raise WorkspaceError(f"could not start a container from {self.image}: {exc}") from exc

    def _config(self, api: Any, container_id: str) -> Mapping[str, Any]:
        """The created container's ``Config`` as its spawner needs it (its hostname and environment).
        On this machine's engine, the image's (kept from one inspect a run: ``DockerRuntime.inspected``):
        given no environment and no hostname of its own, a container has the image's environment and
        its ID's first 12 digits for a hostname, and no inspect of each container is needed (~2.5 ms of
        the engine's and dockerd's CPU each). Elsewhere, where the SDK gives the container the proxy
        variables of the Docker client's config (``use_config_proxy``), or where the image has no
        inspect: the container's own."""
        image = None if self.remote or _proxied(api) else self.runtime.inspected(self.image)
        if image is None:
            return dict(api.inspect_container(container_id).get("Config") or {})
        return {"Hostname": container_id[:12], "Env": list((image.get("Config") or {}).get("Env") or [])}

    def _ready_host(self) -> Any:  # docker.DockerClient
        """The client of the host this workspace was placed on, with the image there."""
        pool, index = self.runtime.pool, self._host_index
        assert pool is not None and index is not None, "placed before it is created"
        return pool.with_image(index, self.image, lambda: self.runtime.client)

    def _raise_if_lost(self, exc: BaseException, phase: str) -> None:
        """``InfrastructureError`` (host recorded and marked down) where ``exc`` says its listed host was unreachable."""
        pool, index = self.runtime.pool, self._host_index
        if pool is None or index is None:
            return
        error = pool.lost(index, phase, exc.__cause__ if isinstance(exc, WorkspaceError) and exc.__cause__ else exc)
        if isinstance(error, InfrastructureError):
            raise error from exc

    def _volumes(self) -> dict[str, dict[str, str]] | None:
        """Bind mounts of this machine's files: none on a listed host (``remote``), whose bridge is relayed."""
        relayed = self._relay.mount() if self._relay is not None else {}
        if self.remote:
            return relayed or None
        volumes = {} if self.network else {str(HOSTS): {"bind": "/etc/hosts", "mode": "ro"}}
        if self.bridge_dir and self._relay is None:
            volumes[self.bridge_dir] = {"bind": BRIDGE_PATH, "mode": "ro"}
        return {**volumes, **relayed} or None

    def _remove(self) -> None:
        import docker.errors
        import requests.exceptions

        if not self._created:
            return
        if self._spawner is not None and self.container_id is not None and self._spawner.quit():
            # Stopped by itself first: removing a running container costs the machine ~15 ms of
            # CPU more (dockerd's kill path and `runc kill`). Not stopped in time: removed anyway.
            try:
                self.client.api.wait(self.container_id, timeout=QUIT_WAIT)
            except (docker.errors.DockerException, requests.exceptions.RequestException):
                pass
        try:
            # By name as well as id: a cancel may have interrupted create before it returned.
            self.client.api.remove_container(self.container_id or self.name, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except InfrastructureError as exc:  # its host is gone: the reaper removes it when it is back
            log.warning("could not remove container %s: %s", self.name, exc)
        except docker.errors.APIError as exc:
            if being_removed(exc):
                return
            raise WorkspaceError(f"could not remove container {self.name}: {exc}") from exc
        except requests.exceptions.RequestException as exc:
            try:
                self._raise_if_lost(exc, "provision")
            except InfrastructureError:  # its host is gone: the reaper removes it when it is back
                log.warning("could not remove container %s: its host is unreachable (%s)", self.name, exc)
                return
            raise WorkspaceError(f"could not remove container {self.name}: {exc}") from exc

    def _running_id(self) -> str:
        if self._state != "running" or self.container_id is None:
            raise WorkspaceError(f"{self.name} is not running ({self._state})")
        return self.container_id

    # -- commands --------------------------------------------------------------------------

    def default_env(self, user: int) -> dict[str, str]:
        """The minimal environment: PATH (the image's own, if it sets one), HOME, LANG. The image's declared ENV stays
        underneath any env (Docker always applies it: it is the image's own); nothing of the engine's enters."""
        return default_env(user, self._path)

    async def exec(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        max_output: int = 1 << 20,
    ) -> ExecResult:
        try:
            if self._relay is not None:  # what the host's bridge holds now, there for the command
                await self._relay.sync()
            container_id = self._running_id()
            options: dict[str, Any] = dict(
                user=user,
                cwd=cwd,
                env=self.default_env(user) if env is None else dict(env),
                timeout=self.runtime.default_exec_timeout if timeout is None else timeout,
                stdin=stdin,
                max_output=max_output,
                backstop_grace=self.backstop_grace,
            )
            if self._spawner is not None:
                return await run_spawned(self._spawner, argv, **options)
            return await run_exec_or_spare(self._spares, self.client.api, container_id, argv, **options)
        except WorkspaceError as exc:
            self._raise_if_lost(exc, self.purpose)
            raise await self._with_container_state(exc) from exc

    def keep_spare_exec(self, *, user: int, cwd: str | None, env: Mapping[str, str] | None = None) -> None:
        """Keep an exec of this kind started ahead from now on (``spares``: the agent's kinds only)."""
        kind = kind_of(user, cwd, self.default_env(user) if env is None else dict(env))
        if (
            self.runtime.spare_execs
            and self._spawner is None
            and kind is not None
            and self._state == "running"
            and self.container_id
        ):
            self._spares.keep(kind)

    async def _with_container_state(self, exc: WorkspaceError) -> WorkspaceError:
        """``exc``, saying so where the container itself has stopped: the daemon's own words
        for an exec into a dead container ("task ... not found") name neither it nor why."""
        try:
            attrs = await asyncio.to_thread(self.client.api.inspect_container, self._running_id())
        except Exception:  # noqa: BLE001 - the original error is the one to report
            return exc
        state = attrs.get("State") or {}
        if state.get("Running", True):
            return exc
        why = f"exit code {state.get('ExitCode')}" + (", killed for memory" if state.get("OOMKilled") else "")
        if state.get("Error"):
            why += f", {state['Error']}"
        return WorkspaceError(f"{exc} (container {self.name} of {self.image} has stopped: {why})")

    async def open_process(
        self,
        argv: Sequence[str],
        *,
        user: int = ROOT_UID,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        tty: TtySize | None = None,
        separate_stderr: bool = False,
    ) -> DockerProcess | SpawnedProcess:
        process: DockerProcess | SpawnedProcess
        try:
            if self._relay is not None:
                await self._relay.sync()
            container_id = self._running_id()
            env = self.default_env(user) if env is None else dict(env)
            if self._spawner is not None and tty is None:  # a terminal is Docker's: an exec
                process = await open_spawned(
                    self._spawner, argv, user=user, cwd=cwd, env=env, separate_stderr=separate_stderr
                )
            else:
                process = await DockerProcess.start(
                    self.client.api,
                    container_id,
                    argv,
                    user=user,
                    cwd=cwd,
                    env=env,
                    tty=tty,
                    separate_stderr=separate_stderr,
                )
        except WorkspaceError as exc:
            self._raise_if_lost(exc, self.purpose)
            raise
        self._processes.append(process)
        return process

    # -- files -----------------------------------------------------------------------------

    async def read_file(self, path: str) -> bytes:
        try:
            return await sdk_call("get_archive", read_file, self.client.api, self._running_id(), absolute(path))
        except WorkspaceError as exc:
            self._raise_if_lost(exc, self.purpose)
            raise

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o644, owner: int = ROOT_UID) -> None:
        try:
            await write_file(self.client.api, self._running_id(), path, data, mode, owner)
        except WorkspaceError as exc:
            self._raise_if_lost(exc, self.purpose)
            raise


def _proxied(api: Any) -> bool:
    """Whether the SDK adds proxy variables to a container's environment (the Docker client's
    config names proxies; an SDK that keeps them elsewhere is taken to)."""
    proxies = getattr(api, "_proxy_configs", None)
    return proxies is None or bool(proxies.get_environment())


def _image_path(attrs: Mapping[str, Any]) -> str | None:
    for item in (attrs.get("Config") or {}).get("Env") or []:
        if item.startswith("PATH="):
            path: str = item[len("PATH=") :]
            return path

    return None
