"""The Docker engine this runtime (and the image builder it lends) talks to: reach it, or start
a local ``dockerd``.

Everything that needs the engine gets its client from here (a build's client is handed to
the builder); ``crucible doctor --fix`` uses the start-up half to repair a host. The Docker
SDK is imported only when an engine is asked for, so commands that never reach one stay fast.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import EngineUnavailable

if TYPE_CHECKING:
    import docker

DOCKERD_LOG = "/var/log/crucible-dockerd.log"
_API_VERSION = re.compile(r"1\.\d{1,3}")
ENGINE_START_TIMEOUT = 60.0
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
HINT = "run `crucible doctor --fix` (or start dockerd)"


class EngineNotListening(OSError):
    """Nothing accepts a connection on the local engine's socket."""


def local_engine_socket() -> str | None:
    """The unix socket of the engine ``docker.from_env`` would use; None where DOCKER_HOST names
    one reached otherwise (``tcp://``, ``ssh://``)."""
    url = os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET
    return url[len("unix://") :] if url.startswith("unix://") else None


def ask_local_engine(socket_path: str, path: str, *, timeout: float) -> tuple[int, bytes]:
    """One ``GET path`` on the engine's unix socket, without the Docker SDK (whose import alone
    costs ~0.08 s, most of what a command that only asks this would cost): the status and the
    body. Raises EngineNotListening when nothing takes the connection, OSError when it is cut."""
    status, _, body = _ask(socket_path, path, timeout=timeout)
    return status, body


def local_api_version(socket_path: str, *, timeout: float = 5) -> str | None:
    """The API version the local engine speaks, from its ``/_ping`` (the ``Api-Version``
    header); None where it does not answer so. The SDK would ask ``/version`` instead, and to
    answer that dockerd runs ``runc --version`` and ``docker-init --version`` (~4 ms and two
    process starts, each command that makes a client)."""
    try:
        status, headers, _ = _ask(socket_path, "/_ping", timeout=timeout)
    except OSError:
        return None
    version = headers.get("api-version", "")
    return version if status == 200 and _API_VERSION.fullmatch(version) else None


def _ask(socket_path: str, path: str, *, timeout: float) -> tuple[int, dict[str, str], bytes]:
    """``ask_local_engine``'s exchange: the status, the headers (names lowercased), the body."""
    request = f"GET {path} HTTP/1.0\r\nHost: docker\r\nConnection: close\r\n\r\n".encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(socket_path)
        except OSError as exc:
            raise EngineNotListening(f"no engine at {socket_path}: {exc}") from exc
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    first, *lines = head.decode("latin-1").split("\r\n")
    status = first.split()
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return (int(status[1]) if len(status) >= 2 and status[1].isdigit() else 0), headers, body


def from_env(timeout: float) -> docker.DockerClient:
    """``docker.from_env``, its requests not reading the proxy environment when the engine is a
    local socket: the SDK's session otherwise scans every environment variable for proxies on
    each request (~2 ms of a ~4 ms request here), for a transport no proxy can carry."""
    import docker

    # The version a local engine's ping gives; else none given: the SDK asks the engine for it
    # (GET /version) as it makes the client, which raises where no engine answers.
    local = local_engine_socket()
    version = local_api_version(local) if local is not None else None
    client = docker.from_env(timeout=timeout, version=version)
    if local is not None:
        client.api.trust_env = False
    return client


def ensure_engine(client_timeout: float = 600) -> docker.DockerClient:
    """A client for a reachable engine; ``client_timeout`` is its per-request read timeout.

    Raises ``EngineUnavailable`` (one line, with the fix) when no engine answers.
    """
    import docker
    import requests

    where = os.environ.get("DOCKER_HOST", DEFAULT_SOCKET)
    try:
        client = from_env(client_timeout)  # its making asks the engine its API version: a ping
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise EngineUnavailable(f"Docker engine unreachable at {where}: {HINT}") from exc
    return client


def require_engine() -> None:
    """``EngineUnavailable`` in one line now where no engine answers: a pre-flight. A local
    engine is asked over its socket (``/_ping``) without making an SDK client, which asks the
    engine its API version first (~0.01 s); anything else, or no answer, goes through the SDK."""
    local = local_engine_socket()
    if local is not None:
        try:
            if ask_local_engine(local, "/_ping", timeout=5)[0] == 200:
                return
        except OSError:
            pass  # the SDK's attempt says what is wrong, in its one line
    ensure_engine()


def connect(api_timeout: float) -> Any:  # docker.DockerClient: the SDK ships no types
    """A Docker SDK client for the local engine, or ``EngineUnavailable`` in one line."""
    import docker
    import requests.exceptions

    try:
        return from_env(api_timeout)  # its making asks the engine its API version: a ping
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise EngineUnavailable(f"Docker engine unreachable ({reason}); start it with `crucible doctor --fix`") from exc


def ping(timeout: float = 5) -> docker.DockerClient | None:
    """A client when an engine answers within ``timeout``, else None."""
    try:
        return ensure_engine(client_timeout=timeout)
    except EngineUnavailable:
        return None


def start_dockerd() -> None:
    """Start a local ``dockerd`` that outlives this command: a new session, stdin closed and
    output to ``DOCKERD_LOG`` (what ``nohup ... &`` does in a shell)."""
    with open(DOCKERD_LOG, "a") as log:
        subprocess.Popen(
            ["dockerd"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def dockerd_running() -> bool:
    """Whether a dockerd (perhaps still starting) owns the default pid file."""
    try:
        pid = int(Path("/var/run/docker.pid").read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return True


def wait_for_engine(timeout: float) -> docker.DockerClient | None:
    """A client once a starting engine answers, or None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ping(timeout=5) is not None:
            return ensure_engine()
        time.sleep(0.5)
    return None
