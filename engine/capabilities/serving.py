"""How a run's endpoints listen, for both of them (MCP and SSH): set once by ``crucible serve``
for its run, read by each server as it starts. Crucible's own agents get the defaults."""

from __future__ import annotations

import contextvars
import socket
from dataclasses import dataclass

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServeOptions:
    """Where a run's endpoints listen (``host``: loopback unless bound elsewhere on purpose), how
    often a long MCP call reports progress, and which browser origins besides the MCP endpoint's
    own may call it."""

    host: str = LOOPBACK
    progress_every: float = 10.0
    allowed_origins: tuple[str, ...] = ()


SERVE_OPTIONS: contextvars.ContextVar[ServeOptions] = contextvars.ContextVar(
    "crucible_serve_options",
    default=ServeOptions(),  # noqa: B039 (frozen)
)


def bind_tcp(host: str) -> socket.socket:
    """A TCP socket bound to ``host`` on an ephemeral port (bound here, so no race for the port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, 0))
    except OSError:
        sock.close()
        raise
    return sock
