"""The engine-side MCP client: what agents use to reach a run's ``mcp`` capability.

async with open_mcp(url, token) as session:
    text, is_error = await call_tool(session, "bash", {"command": "ls"})
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


class _DropClosedStreamNoise(logging.Filter):
    """The SDK logs a traceback ("Error parsing SSE message") when a message arrives after the
    session was closed on our side (an agent cancelled mid-call): a normal teardown."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return type(exc).__name__ != "ClosedResourceError"


logging.getLogger("mcp.client.streamable_http").addFilter(_DropClosedStreamNoise())

CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 3600.0
"""A tool call may legitimately run as long as its own timeout (long test suites)."""


@contextlib.asynccontextmanager
async def open_mcp(
    url: str, token: str, *, uds: str | None = None, read_timeout: float = READ_TIMEOUT
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session to ``url`` (over the unix socket ``uds`` when given)."""
    # A plain-HTTP URL (loopback, or a unix socket) never does TLS, and httpx's default TLS
    # setup loads the whole CA bundle (~45 ms per client, measured): build it only for https.
    verify = url.startswith("https:")
    transport = httpx.AsyncHTTPTransport(uds=uds, verify=verify) if uds else None
    client = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx.Timeout(CONNECT_TIMEOUT, read=read_timeout),
        transport=transport,
        verify=verify,
    )
    async with client, streamable_http_client(url, http_client=client) as (read, write, _session_id):  # noqa: SIM117 (the session opens on the transport)
        async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=read_timeout)) as session:
            await session.initialize()
            yield session


async def call_tool(session: ClientSession, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """Call a tool; (its text content joined, whether it is an error)."""
    result = await session.call_tool(name, arguments)
    parts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return "".join(parts), bool(result.isError)
