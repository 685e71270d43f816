"""The engine's exec endpoints spoken straight over its unix socket, without the SDK's HTTP stack.

Every ``Workspace.exec`` pays three engine requests (exec create, exec start, exec inspect).
Through the SDK (requests + urllib3) each costs 1.5-4 ms of this process's time between
two execs, over 0.2-0.5 ms for the same request on a kept-alive ``http.client`` connection
(measured on this engine: ~6 ms of a trivial exec's ~47 ms, issue 38). The daemon's answers
are the same bytes either way: the exit code is still the daemon's own.

Only an engine on a local unix socket is spoken to this way (``wire_for``); ``tcp://``
(TLS) and ``ssh://`` keep the SDK, which knows how to reach them.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import weakref
from typing import Any
from urllib.parse import quote

from engine.runtimes.docker.stream import HijackedStream

_IDLE_KEPT = 4
"""Kept-alive connections per engine for create/inspect; more concurrent execs open their own."""


class WireError(Exception):
    """The engine answered a request with an error status."""


class WireLost(ConnectionError):
    """The engine could not be reached, or dropped the connection mid-request (a
    ``ConnectionError``, which ``placement.host_lost`` reads as an unreachable host)."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class ExecWire:
    """exec create / start / inspect for one engine on a unix socket; thread-safe."""

    def __init__(
        self, socket_path: str, version: str, timeout: float | None, headers: dict[str, str], detach_keys: str | None
    ) -> None:
        self._path, self._prefix, self._timeout = socket_path, f"/v{version}", timeout
        self._detach_keys = detach_keys
        self._headers = {**headers, "Host": "docker", "Content-Type": "application/json"}
        self._idle: list[_UnixConnection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def create(self, container_id: str, config: dict[str, Any]) -> str:
        """A new exec's id (``POST /containers/{id}/exec``)."""
        if self._detach_keys:  # as the SDK does: the user's docker config may set them
            config = {**config, "detachKeys": self._detach_keys}
        answer = self._request("POST", f"/containers/{quote(container_id)}/exec", config)
        return str(answer["Id"])

    def inspect(self, exec_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._request("GET", f"/exec/{quote(exec_id)}/json", None)
        return answer

    def start(self, exec_id: str, tty: bool) -> HijackedStream:
        """Start the exec on a fresh connection and take that connection over (HTTP upgrade):
        what follows the engine's ``101`` is the exec's stream."""
        conn = _UnixConnection(self._path, self._timeout)
        body = json.dumps({"Detach": False, "Tty": tty}).encode()
        headers = {**self._headers, "Connection": "Upgrade", "Upgrade": "tcp"}
        try:
            conn.request("POST", f"{self._prefix}/exec/{quote(exec_id)}/start", body, headers)
            sock = conn.sock
            response = conn.getresponse()
            if response.status not in (101, 200):  # 200: an engine that streams without the upgrade
                raise _error(response.status, response.reason, response.read())
        except (OSError, http.client.HTTPException) as exc:  # no answer, or one broken off
            conn.close()
            raise WireLost(f"the engine at {self._path} dropped exec start: {exc}") from exc
        except BaseException:
            conn.close()
            raise
        # The response's buffered reader may already hold the first output bytes.
        return HijackedStream.over(sock, response.fp, response)

    def _request(self, method: str, path: str, payload: dict[str, Any] | None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        with self._lock:
            if self._pid != os.getpid():  # a forked child: its parent's connections are not its own
                self._idle, self._pid = [], os.getpid()
            conn = self._idle.pop() if self._idle else None
        reused = conn is not None
        if conn is None:
            conn = _UnixConnection(self._path, self._timeout)
        try:
            status, reason, data = _exchange(conn, method, self._prefix + path, body, self._headers)
        except (OSError, http.client.HTTPException) as exc:  # no answer, or one broken off
            conn.close()
            # A kept-alive connection the engine closed while it sat idle (a reset, a broken
            # pipe, http.client's RemoteDisconnected; not a timeout): once more on a new one.
            # Harmless even if the first did reach it: an exec created and never started runs
            # nothing, and an inspect changes nothing.
            if reused and isinstance(exc, ConnectionError):
                return self._request(method, path, payload)
            raise WireLost(f"the engine at {self._path} did not answer {method} {path}: {exc}") from exc
        if conn.sock is None:
            conn.close()  # the engine said "Connection: close"
        else:
            with self._lock:
                if len(self._idle) < _IDLE_KEPT:
                    self._idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()
        if not 200 <= status < 300:
            raise _error(status, reason, data)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise WireError(f"{status} {reason}: an answer that is no JSON: {data[:200]!r}") from exc


def _exchange(
    conn: _UnixConnection, method: str, url: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, str, bytes]:
    conn.request(method, url, body, headers)
    response = conn.getresponse()
    return response.status, response.reason, response.read()


def _error(status: int, reason: str, data: bytes) -> WireError:
    """The engine's own words for a failed request (its JSON ``message``), as the SDK reports them."""
    try:
        message = json.loads(data).get("message") or ""
    except (ValueError, AttributeError):
        message = data.decode("utf-8", "replace").strip()
    return WireError(f"{status} {reason}: {message}" if message else f"{status} {reason}")


_WIRES: weakref.WeakKeyDictionary[Any, ExecWire | None] = weakref.WeakKeyDictionary()
_WIRES_LOCK = threading.Lock()


def wire_for(api: Any) -> ExecWire | None:
    """The wire to ``api``'s engine (the SDK's ``APIClient``: same socket, API version, read
    timeout and configured headers), or None when that engine is not on a unix socket."""
    with _WIRES_LOCK:
        try:
            return _WIRES[api]
        except KeyError:
            pass
        except TypeError:
            return None  # not weak-referenceable: not an SDK client
        from docker.transport import UnixHTTPAdapter

        adapter = getattr(api, "_custom_adapter", None)
        wire = None
        if isinstance(adapter, UnixHTTPAdapter) and isinstance(getattr(api, "_version", None), str):
            headers = {k: str(v) for k, v in api.headers.items() if k.lower() not in ("connection", "accept-encoding")}
            detach_keys = (getattr(api, "_general_configs", None) or {}).get("detachKeys")
            wire = ExecWire(adapter.socket_path, api._version, api.timeout, headers, detach_keys)
        _WIRES[api] = wire
        return wire
