"""The engine-side MCP client when the answer to its ``initialize`` is lost: the SDK never fails
a request whose SSE stream ends before the answer, it waits out the request's timeout (an hour
for a tool call). ``open_mcp`` bounds the handshake and asks once more on a new connection.

A real server (``serve_mcp``) behind a loopback proxy that answers the first ``initialize``
requests itself with an empty event stream, as a server gone mid-answer would, and passes
everything else through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from engine.capabilities.mcp_client import call_tool, open_mcp
from engine.capabilities.mcp_server import serve_mcp
from engine.errors import AgentError

TOKEN = "handshake-token"
CUT_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n"
CUT_ANSWER_WITH_SESSION = CUT_ANSWER.replace(b"\r\n\r\n", b"\r\nmcp-session-id: lost-session\r\n\r\n")


class _Slow:
    """One tool, ``wait``: answers after ``seconds``."""

    def specs(self):
        return [{"name": "wait", "description": "wait", "inputSchema": {"type": "object"}}]

    async def call(self, name, arguments):
        await asyncio.sleep(arguments.get("seconds", 0))
        return f"waited {arguments.get('seconds', 0)}", False


class _CuttingProxy:
    """Loopback TCP in front of ``upstream`` (host, port): the first ``cuts`` connections whose
    first request is an ``initialize`` get an empty event stream; the rest are piped through.
    ``lost_session``: that stream names a session, and a DELETE of it is never answered."""

    def __init__(self, upstream: tuple[str, int], cuts: int, lost_session: bool = False) -> None:
        self.upstream, self.cuts, self.lost_session = upstream, cuts, lost_session
        self.initializes = self.deletes = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            body = await reader.readexactly(length)
            if self.lost_session and head.startswith(b"DELETE "):
                self.deletes += 1
                await reader.read()  # no answer: held until the client gives up
                return
            if b'"method":"initialize"' in body.replace(b" ", b""):
                self.initializes += 1
                if self.initializes <= self.cuts:
                    writer.write(CUT_ANSWER_WITH_SESSION if self.lost_session else CUT_ANSWER)
                    await writer.drain()
                    return
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            up_writer.write(head + body)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.close()


@contextlib.asynccontextmanager
async def _served_behind_proxy(cuts: int, lost_session: bool = False):
    async with serve_mcp(_Slow(), token=TOKEN) as url:
        host_port = url.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        proxy = _CuttingProxy((host, int(port)), cuts, lost_session)
        server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
        async with server:
            proxied = url.replace(host_port, f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
            yield proxied, proxy


def test_a_lost_initialize_answer_is_asked_again_and_the_session_works(run, caplog):
    async def scenario():
        # Bounded here so that a client waiting out its hour fails the test instead.
        async with (
            _served_behind_proxy(cuts=1) as (url, proxy),
            asyncio.timeout(120),
            open_mcp(url, TOKEN, handshake_timeout=5) as session,
        ):
            listed = [tool.name for tool in (await session.list_tools()).tools]
            return listed, await call_tool(session, "wait", {"seconds": 0}), proxy.initializes

    with caplog.at_level(logging.WARNING, logger="engine.capabilities.mcp_client"):
        listed, answer, initializes = run(scenario())
    assert (listed, answer, initializes) == (["wait"], ("waited 0", False), 2)
    assert "did not answer initialize within 5 s; asking again" in caplog.text


def test_an_initialize_never_answered_is_a_one_line_agent_error(run):
    async def scenario():
        async with _served_behind_proxy(cuts=99) as (url, proxy):
            with pytest.raises(AgentError) as raised:
                async with asyncio.timeout(120), open_mcp(url, TOKEN, handshake_timeout=1):
                    pass
            return str(raised.value), url, proxy.initializes

    message, url, initializes = run(scenario())
    assert initializes == 2
    assert message == f"the MCP server at {url} did not answer initialize within 1 s, 2 times"


def test_a_tool_call_may_take_longer_than_the_handshake(run):
    async def scenario():
        async with serve_mcp(_Slow(), token=TOKEN) as url, open_mcp(url, TOKEN, handshake_timeout=3) as session:
            return await call_tool(session, "wait", {"seconds": 4})

    assert run(scenario()) == ("waited 4", False)


def test_a_lost_session_whose_delete_is_never_answered_costs_the_handshake_not_the_hour(run):
    """The cut answer named a session, so giving up on it sends that session's DELETE, which the
    server never answers: waited for with the handshake's limit, not a tool call's."""

    async def scenario():
        async with _served_behind_proxy(cuts=99, lost_session=True) as (url, proxy):
            with pytest.raises(AgentError):
                async with asyncio.timeout(60), open_mcp(url, TOKEN, handshake_timeout=1, read_timeout=3600):
                    pass
            return proxy.initializes, proxy.deletes

    assert run(scenario()) == (2, 2)


def test_leaving_a_session_whose_delete_is_never_answered_takes_the_handshakes_limit(run):
    async def scenario():
        async with _served_behind_proxy(cuts=0, lost_session=True) as (url, proxy):
            async with asyncio.timeout(60):
                async with open_mcp(url, TOKEN, handshake_timeout=1, read_timeout=3600) as session:
                    answer = await call_tool(session, "wait", {"seconds": 2})  # longer than the handshake
                return answer, proxy.initializes, proxy.deletes

    assert run(scenario()) == (("waited 2", False), 1, 1)
