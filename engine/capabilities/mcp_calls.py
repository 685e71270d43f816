"""A run's MCP tool calls in flight: their progress notifications, and their end at shutdown.

Each call runs as a task of its own beside the SDK's handler (``InFlight.run``), so that the
server's shutdown can cancel it — its command killed in the workspace — and still answer the
client ("cancelled: the server is shutting down") before the sessions' streams end
(``end_sessions``). A client's own cancellation reaches the call through the SDK, which cancels
the handler; the call is cancelled with it. While a call runs, a client that sent a progress
token gets a notification every few seconds on the call's own stream (``report_progress``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from engine.util.aio import within

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

ANSWER_GRACE = 2.0
"""Seconds the calls in flight get, at shutdown, to be answered (their commands killed first)
and the requests in transit to go out, before the sessions end regardless; a shutdown with no
request open waits for nothing."""
SHUTTING_DOWN = "Error: cancelled: the server is shutting down (the agent's turn is over)"

log = logging.getLogger(__name__)


class InFlight:
    """The tool calls a server is running, and whether it is shutting down (then each one still
    running is cancelled and answered as such, and new ones are refused)."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    async def run(self, call: Coroutine[Any, Any, tuple[str, bool]]) -> tuple[str, bool]:
        """``call`` (a coroutine) to its end, or cancelled (its command killed) at shutdown."""
        if self.closing.is_set():
            call.close()
            return SHUTTING_DOWN, True
        self.count += 1
        self.idle.clear()
        work = asyncio.ensure_future(call)
        closing = asyncio.ensure_future(self.closing.wait())
        try:
            await asyncio.wait({work, closing}, return_when=asyncio.FIRST_COMPLETED)
            if work.done():
                return work.result()
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work  # its exec is killed before the answer goes
            return SHUTTING_DOWN, True
        finally:
            closing.cancel()
            if not work.done():  # the client cancelled the call: the SDK cancelled us
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(_settled(work))
            self.count -= 1
            if not self.count:
                self.idle.set()


async def _settled(fut: asyncio.Future[Any]) -> None:
    with contextlib.suppress(BaseException):
        await fut


async def report_progress(session: Any, token: str | int, request_id: Any, every: float) -> None:
    """A progress notification every ``every`` seconds, on the call's own stream, until cancelled:
    a client that resets its timeout on progress then waits as long as the call takes."""
    beats = 0
    while True:
        await asyncio.sleep(every)
        beats += 1
        try:
            await session.send_progress_notification(
                token, float(beats), message=f"running ({beats * every:g} s)", related_request_id=request_id
            )
        except Exception as exc:  # a client gone: the call goes on, its answer will find nobody
            log.debug("progress notification not sent: %s", exc)
            return


async def end_sessions(manager: StreamableHTTPSessionManager, in_flight: InFlight) -> None:
    """Answer every call in flight (cancelled, its command killed), then end every session's
    streams, so that uvicorn finds no open response to wait for or to cut (a cut stream is an
    ASGI traceback in the run's output, and a call that never gets its answer)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_GRACE
    in_flight.closing.set()
    with contextlib.suppress(asyncio.TimeoutError):
        await within(in_flight.idle.wait(), ANSWER_GRACE)
    # The SDK keeps its sessions in a private map (mcp 1.x); ending each is its public terminate().
    transports = list(getattr(manager, "_server_instances", {}).values())
    # A call's answer reaches its client some loop turns after the call returns: through the
    # session's router to the POST's own stream, whose SSE writer hands it to the response and
    # ends. A session ended before then loses it (the client waits for its own timeout).
    while any(map(_answering, transports)) and loop.time() < deadline:
        await asyncio.sleep(0.002)
    await asyncio.sleep(0)  # the last writer's event goes out before the streams end
    for transport in transports:
        with contextlib.suppress(Exception):
            await transport.terminate()


def _answering(transport: Any) -> bool:
    """Whether a session still has a POST whose answer has not gone out: its stream (mcp 1.x's
    private ``_request_streams``, keyed by request id; the standalone GET stream never ends)."""
    from mcp.server.streamable_http import GET_STREAM_KEY

    return any(key != GET_STREAM_KEY for key in getattr(transport, "_request_streams", {}))
