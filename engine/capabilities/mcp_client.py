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
from mcp.shared.exceptions import McpError

from engine.errors import AgentError


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
HANDSHAKE_TIMEOUT = 60.0
"""How long opening a session (``initialize``) and listing the tools may take. The SDK never
fails a request whose answer is lost (its SSE stream cut before the answer came: a connection
dropped, a server gone), it only times it out; with a tool call's timeout, an agent would wait
an hour at its first request."""
HANDSHAKE_TRIES = 2
"""A lost ``initialize`` is asked again on a new connection (it opens a new session), once."""

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def open_mcp(
    url: str,
    token: str,
    *,
    uds: str | None = None,
    read_timeout: float = READ_TIMEOUT,
    handshake_timeout: float = HANDSHAKE_TIMEOUT,
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session to ``url`` (over the unix socket ``uds`` when given). Its
    own requests time out after ``handshake_timeout`` s; a tool call, after ``call_tool``'s."""
    for attempt in range(1, HANDSHAKE_TRIES + 1):
        opened = contextlib.AsyncExitStack()
        try:
            session = await _initialized(opened, url, token, uds, read_timeout, handshake_timeout)
        except BaseException as exc:
            await opened.aclose()
            if not (isinstance(exc, McpError) and exc.error.code == httpx.codes.REQUEST_TIMEOUT):
                raise
            if attempt == HANDSHAKE_TRIES:
                raise AgentError(
                    f"the MCP server at {url} did not answer initialize within {handshake_timeout:g} s, "
                    f"{HANDSHAKE_TRIES} times"
                ) from exc
            log.warning(
                "the MCP server at %s did not answer initialize within %g s; asking again", url, handshake_timeout
            )
            continue
        async with opened:
            yield session
        return


async def _initialized(
    opened: contextlib.AsyncExitStack, url: str, token: str, uds: str | None, read_timeout: float, handshake: float
) -> ClientSession:
    """A session to ``url``, initialized; what it holds open is closed with ``opened``."""
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
    await opened.enter_async_context(client)
    read, write, _session_id = await opened.enter_async_context(streamable_http_client(url, http_client=client))
    # Leaving, the transport sends the session's DELETE (where a session id came back): a server
    # that lost an answer, or is going away, may not answer that either, and it must not take a
    # tool call's hour. (Run before the transport's exit: the stack unwinds in reverse.)
    opened.callback(setattr, client, "timeout", httpx.Timeout(CONNECT_TIMEOUT, read=handshake))
    session = await opened.enter_async_context(
        ClientSession(read, write, read_timeout_seconds=timedelta(seconds=handshake))
    )
    await session.initialize()
    return session


async def call_tool(
    session: ClientSession, name: str, arguments: dict[str, Any], *, timeout: float = READ_TIMEOUT
) -> tuple[str, bool]:
    """Call a tool, waiting at most ``timeout`` s for its answer; (its text content joined,
    whether it is an error)."""
    result = await session.call_tool(name, arguments, read_timeout_seconds=timedelta(seconds=timeout))
    parts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    return "".join(parts), bool(result.isError)
