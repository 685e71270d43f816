"""Who may talk to a run's MCP server: the HTTP checks in front of it (an ASGI wrapper).

The MCP specification's streamable-HTTP transport says servers MUST validate ``Origin`` (a
web page the user visits must not drive a local server through the browser: DNS rebinding),
and our server takes the run's bearer token. In this order:

- ``Host`` must name a loopback address (``127.0.0.1``, ``localhost``, ``[::1]``), or the
  address the server was bound to on purpose; any port (a workspace's relay to the unix socket
  listens on a port of its own). A server bound to every address (``0.0.0.0``) cannot know the
  names it is reached by and checks no ``Host``. Else 403.
- ``Origin``, when present, must be the server's own origin (``http://<allowed host>:<its
  port>``) or one allowed on purpose (``allowed_origins``, e.g. a browser-based inspector's).
  ``Origin: null`` (a sandboxed page, a ``file:`` page) is foreign. A request without
  ``Origin`` is a non-browser client's and is accepted. Else 403.
- ``Authorization: Bearer <token>``, the scheme case-insensitive (RFC 7235), the token
  compared in constant time. Else 401.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
EVERY_ADDRESS = frozenset({"0.0.0.0", "::"})


class RequestGuard:
    """ASGI middleware: 403 for a foreign ``Host`` or ``Origin``, 401 without the run's token."""

    def __init__(
        self,
        app: ASGIApp,
        token: str,
        *,
        bound: str = "127.0.0.1",
        port: int | None = None,
        allowed_origins: Iterable[str] = (),
    ) -> None:
        if not token:
            raise ValueError("an MCP server needs a non-empty bearer token")
        self.app = app
        self.token = token.encode()
        self.check_host = bound not in EVERY_ADDRESS
        self.hosts = LOOPBACK_NAMES | {_bare(bound)}
        self.port = port
        self.origins = {origin.rstrip("/").lower() for origin in allowed_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            refusal = self._refusal(headers)
            if refusal is not None:
                status, message = refusal
                extra = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
                await JSONResponse({"error": message}, status_code=status, headers=extra)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        host = headers.get(b"host", b"").decode("latin-1")
        if self.check_host and _host_name(host) not in self.hosts:
            return 403, f"forbidden Host {host!r}: this server answers on loopback only"
        origin = headers.get(b"origin")
        if origin is not None and not self._origin_allowed(origin.decode("latin-1")):
            return 403, f"forbidden Origin {origin.decode('latin-1')!r}"
        scheme, _, given = headers.get(b"authorization", b"").strip().partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
            return 401, "unauthorized"
        return None

    def _origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        try:
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and port == self.port and (parts.hostname or "") in self.hosts


def _host_name(host: str) -> str:
    """``Host`` without its port, brackets off an IPv6 literal, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _bare(address: str) -> str:
    return address.strip("[]").lower()
