"""Remote Docker hosts (``runtime.hosts``): which engine a run's containers go to.

Each listed host (``unix://``, ``tcp://`` with TLS, ``ssh://user@host:port``) has a number of
``slots``. A run takes one slot on the host with most free slots (ties: list order) when its
first workspace starts; every other workspace of that run (its grading containers) joins it
there, and the slot is given back when the run's last workspace is removed. With every slot
taken a start waits (in the starting thread, never the event loop) until one frees up.

A host whose engine cannot be reached is marked down: new runs skip it until a ping answers
again (tried after ``DOWN_RETRY`` seconds, so a restarted dockerd comes back); with every host
down a start fails at once with ``InfrastructureError``.

Images are built on this machine's engine; before a container starts on a host that lacks its
image, the image is streamed there (``docker save`` here into ``docker load`` there), once per
host and tag however many runs ask at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError, InfrastructureError, UserError, WorkspaceError

log = logging.getLogger(__name__)

SCHEMES = ("unix://", "tcp://", "ssh://")
DOWN_RETRY = 30.0
"""Seconds a host marked down is skipped before a ping may bring it back."""
_WAIT_STEP = 1.0
"""How often a start waiting for a slot looks again without being woken (a host coming back)."""


@dataclass
class DockerHost:
    """One ``runtime.hosts`` entry. ``tls_*``: files for a ``tcp://`` engine that wants TLS
    (``tls_verify`` checks the engine's certificate against ``tls_ca``, or the system's)."""

    url: str = ""
    slots: int = 1
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_verify: bool = False


def check_hosts(hosts: Sequence[DockerHost], where: str = "runtime.hosts") -> None:
    """``ConfigError`` in one line naming the first bad entry's key (``runtime.hosts[1].slots``)."""
    for index, host in enumerate(hosts):
        at = f"{where}[{index}]"
        if not host.url:
            raise ConfigError(f"{at}.url is missing (unix://..., tcp://host:port or ssh://user@host:port)")
        if not host.url.startswith(SCHEMES):
            raise ConfigError(f"{at}.url: unknown scheme in {host.url!r} (use unix://, tcp:// or ssh://)")
        if isinstance(host.slots, bool) or not isinstance(host.slots, int) or host.slots < 1:
            raise ConfigError(f"{at}.slots must be an integer >= 1, got {host.slots!r}")
        tls = [key for key in ("tls_ca", "tls_cert", "tls_key") if getattr(host, key)] + (
            ["tls_verify"] if host.tls_verify else []
        )
        if tls and not host.url.startswith("tcp://"):
            raise ConfigError(f"{at}.{tls[0]}: TLS settings apply to tcp:// hosts only, not {host.url!r}")
        if bool(host.tls_cert) != bool(host.tls_key):
            raise ConfigError(
                f"{at}.{'tls_key' if host.tls_cert else 'tls_cert'} is missing (a client cert needs both)"
            )
        urls = [h.url for h in hosts[:index]]
        if host.url in urls:
            raise ConfigError(f"{at}.url: {host.url!r} is listed twice (give it more slots instead)")


def as_hosts(entries: Sequence[DockerHost | Mapping[str, Any]]) -> list[DockerHost]:
    """The entries as ``DockerHost``s (Hydra hands dataclasses, a test may hand dicts), checked."""
    try:
        hosts = [entry if isinstance(entry, DockerHost) else DockerHost(**dict(entry)) for entry in entries]
    except TypeError as exc:
        raise ConfigError(f"runtime.hosts: {exc}") from exc
    check_hosts(hosts)
    return hosts


def host_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the engine could not be reached (connection refused or dropped, a
    socket gone, an ssh that exited), not that it answered with an error."""
    import docker.errors
    import requests.exceptions

    if isinstance(exc, requests.exceptions.SSLError) or "SSLError" in str(exc):
        return False  # it answered, but not as the configured TLS expects: a setting to fix
    if isinstance(exc, (requests.exceptions.ConnectionError, ConnectionError, BrokenPipeError)):
        return True
    if isinstance(exc, docker.errors.APIError):
        return False  # the engine answered
    text = str(exc)
    return isinstance(exc, docker.errors.DockerException) and (
        "Error while fetching server API version" in text or "Connection aborted" in text
    )


def make_client(host: DockerHost, timeout: float) -> Any:  # docker.DockerClient: the SDK ships no types
    """A Docker SDK client for ``host`` (its ssh:// through the OpenSSH client, ``ssh``)."""
    import docker
    import docker.errors
    import docker.tls

    tls: Any = False
    if host.url.startswith("tcp://") and (host.tls_ca or host.tls_cert or host.tls_verify):
        cert = (host.tls_cert, host.tls_key) if host.tls_cert and host.tls_key else None
        tls = docker.tls.TLSConfig(client_cert=cert, ca_cert=host.tls_ca, verify=bool(host.tls_ca) or host.tls_verify)
    kwargs: dict[str, Any] = {"base_url": host.url, "timeout": int(timeout), "tls": tls}
    try:
        if tls:
            return _tls_client(kwargs)
        return docker.DockerClient(**kwargs, use_ssh_client=host.url.startswith("ssh://"))
    except docker.errors.DockerException as exc:
        if "paramiko" in str(exc):  # the SDK's ssh:// transport imports it even to shell out to ssh
            raise UserError(f"Docker host {host.url}: install paramiko (docker[ssh]) for ssh:// hosts") from exc
        raise


def _tls_client(kwargs: dict[str, Any]) -> Any:  # docker.DockerClient
    """A TLS client that trusts the host's own CA: requests lets $REQUESTS_CA_BUNDLE or
    $CURL_CA_BUNDLE override a session's CA on every request unless it ignores the environment,
    and the SDK's first request (the version) is made before that can be switched off."""
    import docker
    from docker.constants import MINIMUM_DOCKER_API_VERSION

    probe = docker.APIClient(version=MINIMUM_DOCKER_API_VERSION, **kwargs)
    probe.trust_env = False
    try:
        version = probe.version(api_version=False)["ApiVersion"]
    finally:
        probe.close()
    client = docker.DockerClient(version=version, **kwargs)
    client.api.trust_env = False
    return client


@dataclass
class _Lease:
    index: int
    workspaces: int


class HostPool:
    """The listed hosts, their clients (one each, made on first use), free slots and health."""

    def __init__(self, hosts: Sequence[DockerHost], api_timeout: float) -> None:
        self.hosts = list(hosts)
        self.api_timeout = api_timeout
        self._lock = threading.Lock()
        self._used = [0] * len(self.hosts)
        self._runs: dict[str, _Lease] = {}
        self._down_until: dict[int, float] = {}
        self._clients: dict[int, Any] = {}
        self._client_locks = [threading.Lock() for _ in self.hosts]
        self._image_locks: dict[tuple[int, str], threading.Lock] = {}
        self._has_image: set[tuple[int, str]] = set()
        self._waiters: set[Callable[[], None]] = set()

    def url(self, index: int) -> str:
        return self.hosts[index].url

    # -- slots -------------------------------------------------------------------------------

    def try_acquire(self, run_id: str, waiter: Callable[[], None]) -> int | None:
        """The host of run ``run_id``: its run's, or (its first workspace) a free slot on the
        host with most free slots; None when every slot is taken, ``waiter`` then called (from
        any thread) once one may have freed up. ``InfrastructureError`` when every host is down."""
        self._ping_due()
        with self._lock:
            lease = self._runs.get(run_id)
            if lease is not None:
                lease.workspaces += 1
                return lease.index
            index = self._free_host()
            if index is None:
                self._waiters.add(waiter)
                return None
            self._used[index] += 1
            self._runs[run_id] = _Lease(index, 1)
            return index

    def forget(self, waiter: Callable[[], None]) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    @property
    def waiting(self) -> int:
        """How many starts wait for a free slot right now."""
        with self._lock:
            return len(self._waiters)

    def release(self, run_id: str) -> None:
        """One workspace of ``run_id`` is gone; the last one gives the run's slot back."""
        with self._lock:
            lease = self._runs.get(run_id)
            if lease is None:
                return
            lease.workspaces -= 1
            if lease.workspaces <= 0:
                del self._runs[run_id]
                self._used[lease.index] -= 1
                self._wake_all()

    def _wake_all(self) -> None:
        for waiter in self._waiters:
            waiter()

    def _free_host(self) -> int | None:
        """The up host with most free slots (ties: list order); None when all are full.
        ``InfrastructureError`` when none is up."""
        up = [i for i in range(len(self.hosts)) if i not in self._down_until]
        if not up:
            urls = ", ".join(h.url for h in self.hosts)
            raise InfrastructureError(f"every Docker host is down ({urls})", phase="provision")
        best = max(up, key=lambda i: (self.hosts[i].slots - self._used[i], -i))
        return best if self.hosts[best].slots > self._used[best] else None

    def _ping_due(self) -> None:
        """Ping each host marked down whose retry time has passed; one that answers is up again.
        Outside the pool's lock: a host that does not answer takes the ping's timeout, and the
        lock is taken on the event loop too (``release``, ``is_down``). Its next retry time is
        set first, so one caller pings it, not every caller at once."""
        now = time.monotonic()
        with self._lock:
            due = [index for index, until in self._down_until.items() if until <= now]
            for index in due:
                self._down_until[index] = now + DOWN_RETRY
        for index in due:
            if self._ping(index):
                with self._lock:
                    self._down_until.pop(index, None)
                    self._clients.pop(index, None)  # a fresh connection for the restarted engine
                log.warning("Docker host %s answers again", self.url(index))

    def _ping(self, index: int) -> bool:
        try:
            probe = make_client(self.hosts[index], timeout=10)
            try:
                probe.ping()
            finally:
                probe.close()
        except Exception:  # noqa: BLE001 - any failure means still down
            return False
        return True

    def mark_down(self, index: int, why: object) -> None:
        """New runs skip host ``index`` for ``DOWN_RETRY`` seconds (its runs fail on their own)."""
        with self._lock:
            if index not in self._down_until:
                log.warning("Docker host %s is down (%s); placing new runs elsewhere", self.url(index), why)
            self._down_until[index] = time.monotonic() + DOWN_RETRY
            self._has_image = {pair for pair in self._has_image if pair[0] != index}
            self._wake_all()  # with every host down, their wait ends in an error

    def is_down(self, index: int) -> bool:
        with self._lock:
            return index in self._down_until

    # -- clients and images ------------------------------------------------------------------

    def client(self, index: int) -> Any:  # docker.DockerClient
        """Host ``index``'s client, made (and the host's orphaned containers reaped) on first use."""
        with self._client_locks[index]:
            if index not in self._clients:
                self._clients[index] = self.guard(index, "provision", make_client, self.hosts[index], self.api_timeout)
                self._reap(index)
            return self._clients[index]

    def connect_all(self) -> None:
        """Connect to every host now: each is rid of its dead owners' containers on its first
        connection (``client``), and one that does not answer is marked down before a run is
        placed on it."""
        for index in range(len(self.hosts)):
            with contextlib.suppress(InfrastructureError):
                self.client(index)

    def clients_up(self) -> list[Any]:
        """The clients of every host not marked down (made if need be)."""
        return [self.client(i) for i in range(len(self.hosts)) if not self.is_down(i)]

    def _reap(self, index: int) -> None:
        from engine.runtimes.docker.reaper import reap_orphans

        try:
            reap_orphans(self._clients[index])
        except Exception as exc:  # noqa: BLE001 - housekeeping never stops a run
            log.debug("reaper skipped on %s: %s", self.url(index), exc)

    def guard(self, index: int, phase: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn(*args)``, an unreachable engine turned into ``InfrastructureError`` (and the
        host marked down)."""
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            error = self.lost(index, phase, exc)
            if error is exc:
                raise
            raise error from exc

    def lost(self, index: int, phase: str, exc: BaseException) -> BaseException:
        """``exc`` itself, or an ``InfrastructureError`` for it when the host was unreachable."""
        if not host_lost(exc):
            return exc
        self.mark_down(index, _first_line(exc))
        return InfrastructureError(
            f"Docker host {self.url(index)} unreachable: {_first_line(exc)}", phase=phase, host=self.url(index)
        )

    def with_image(self, index: int, tag: str, local: Callable[[], Any]) -> Any:  # docker.DockerClient
        """Host ``index``'s client, with image ``tag`` there (``ensure_image``); an engine's
        error other than an unreachable host as ``WorkspaceError``."""
        import docker.errors
        import requests.exceptions

        try:
            self.ensure_image(index, tag, local)
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise WorkspaceError(f"could not bring image {tag} to {self.url(index)}: {exc}") from exc
        return self.client(index)

    def ensure_image(self, index: int, tag: str, local: Callable[[], Any]) -> None:
        """Make sure host ``index`` has image ``tag``, streaming it from ``local`` (this
        machine's engine, made on demand) when it lacks it: once per host and tag, whoever else asks meanwhile."""
        import docker.errors

        key = (index, tag)
        with self._lock:
            if key in self._has_image:
                return
            lock = self._image_locks.setdefault(key, threading.Lock())
        with lock:
            if key in self._has_image:
                return
            client = self.client(index)
            try:
                self.guard(index, "provision", client.images.get, tag)
            except docker.errors.ImageNotFound:
                self._move(index, tag, local(), client)
            with self._lock:
                self._has_image.add(key)

    def _move(self, index: int, tag: str, local: Any, client: Any) -> None:
        import docker.errors

        started = time.monotonic()
        try:
            chunks = local.api.get_image(tag)
        except docker.errors.ImageNotFound as exc:
            raise WorkspaceError(f"image {tag} not found; build it first (crucible build)") from exc
        counted = _Counted(chunks)
        self.guard(index, "provision", client.api.load_image, counted, quiet=True)
        log.info(
            "moved image %s to %s: %.1f MB in %.1f s",
            tag, self.url(index), counted.total / 1e6, time.monotonic() - started,
        )  # fmt: skip


async def place(pool: HostPool, run_id: str) -> int:
    """The host of run ``run_id`` (``HostPool.try_acquire``), waiting while every slot is taken.
    The wait holds no thread (a sweep's queued starts must not use up the default executor that
    running workspaces need) and a cancel ends it at once, leaving no slot taken."""
    from engine.util.aio import finish_even_if_cancelled, within

    loop = asyncio.get_running_loop()
    while True:
        freed = asyncio.Event()

        def wake(freed: asyncio.Event = freed) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(freed.set)

        # In a thread: a host past its retry time is pinged.
        attempt = asyncio.ensure_future(asyncio.to_thread(pool.try_acquire, run_id, wake))
        try:
            index = await asyncio.shield(attempt)
            if index is not None:
                return index
            # Woken when a slot frees up; looks again now and then for a host back up.
            await within(freed.wait(), _WAIT_STEP)
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            await finish_even_if_cancelled(asyncio.wait([attempt]))
            if not attempt.cancelled() and attempt.exception() is None and attempt.result() is not None:
                pool.release(run_id)  # placed just as the cancel came
            raise
        finally:
            pool.forget(wake)


class _Counted:
    """An iterator of byte chunks that counts what went through it."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self.total = chunks, 0

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self.total += len(chunk)
            yield chunk


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
