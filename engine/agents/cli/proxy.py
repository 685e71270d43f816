"""The host-side model proxy of a coding CLI that works inside a workspace without a network.

    CLI (in the container) --HTTP--> 127.0.0.1:PORT (a relay in the container, sh/crucible_cli.sh)
        --unix socket in the run's bridge (model.sock)--> this proxy (on the host)
        --HTTPS + the API key--> the provider (or the stand-in in tests)

The CLI is given a placeholder key; the proxy drops whatever credential the request carries and
adds the real one, read on the host: the key never enters the workspace. Every model call is
recorded as a ``Step`` (tokens in/out, cache tokens, latency, cost from the price table) from
the provider's own reply — a JSON body, or the usage events of an SSE stream (Anthropic
``message_start``/``message_delta``, OpenAI Responses ``response.completed``) — passed on to
the CLI byte for byte as it arrives.

One request per connection (the reply ends by closing it): each connection through the relay
is its own, so nothing is gained by keep-alive, and a close-delimited body is plain HTTP/1.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from engine.agents import pricing
from engine.agents.providers import Usage
from engine.models import Step
from engine.util.aio import within

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
MAX_KEPT = 16 * 1024 * 1024
"""Bytes of a reply kept for reading its usage (a reply is passed on whole regardless)."""
_HOP = {
    "host",
    "content-length",
    "connection",
    "transfer-encoding",
    "keep-alive",
    "accept-encoding",
    "authorization",
    "x-api-key",
    "proxy-authorization",
    "upgrade",
    "te",
    "trailer",
}
_HOP_REPLY = {"content-length", "connection", "transfer-encoding", "keep-alive", "content-encoding"}


@dataclass
class Upstream:
    """Where the proxy sends calls and how it authenticates them (the key stays here)."""

    origin: str
    """Scheme, host and any path prefix the request's own path is appended to (no ``/v1``)."""
    key_header: str | None = None
    """``x-api-key`` (Anthropic) or ``authorization`` (OpenAI); None = no credential."""
    key: str | None = None

    def auth(self) -> dict[str, str]:
        if not self.key or not self.key_header:
            return {}
        return {self.key_header: f"Bearer {self.key}" if self.key_header == "authorization" else self.key}


@dataclass
class ModelProxy:
    """A per-run HTTP proxy listening on a unix socket; ``steps`` are the calls it carried."""

    socket_path: str
    upstream: Upstream
    price: pricing.Price | None = None
    request_timeout: float = 600.0
    steps: list[Step] = field(default_factory=list)
    _server: asyncio.AbstractServer | None = None
    _client: httpx.AsyncClient | None = None
    _active: set[asyncio.Task[Any]] = field(default_factory=set)
    """The calls in flight: cut off (and recorded as such) when the proxy closes."""

    async def start(self) -> None:
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            trust_env=True,
            verify=self.upstream.origin.startswith("https:"),
            timeout=httpx.Timeout(self.request_timeout, connect=30.0),
        )
        self._server = await asyncio.start_unix_server(self._serve, path=self.socket_path, limit=MAX_HEAD)
        os.chmod(self.socket_path, 0o666)  # the agent's uid in the container is not ours

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._active):  # the CLI is gone: nobody waits for these replies
            task.cancel()
        if self._active:
            await asyncio.wait(list(self._active), timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 5)
        if self._client is not None:
            await self._client.aclose()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    async def __aenter__(self) -> ModelProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------ one call
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # start_server runs each connection in a task of its own
        self._active.add(task)
        try:
            request = await _read_request(reader)
            if request is not None:
                await self._forward(request, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            with contextlib.suppress(Exception):
                writer.write(_plain(400, f"crucible model proxy: {exc}"))
        finally:
            self._active.discard(task)
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await within(writer.wait_closed(), 1)

    async def _forward(self, request: _Request, writer: asyncio.StreamWriter) -> None:
        assert self._client is not None
        step = Step(
            idx=0,
            kind="model",
            capability="model_proxy",
            tool=request.path.split("?")[0],
            started_at=datetime.now(UTC).isoformat(),
        )
        began = time.monotonic()
        headers = {k: v for k, v in request.headers if k.lower() not in _HOP}
        headers.update(self.upstream.auth())
        headers["accept-encoding"] = "identity"  # read its usage as it streams by
        kept = bytearray()
        status = 0
        try:
            upstream = self._client.build_request(
                request.method, self.upstream.origin + request.path, headers=headers, content=request.body
            )
            response = await self._client.send(upstream, stream=True)
            status = response.status_code
            try:
                writer.write(_head(response))
                async for chunk in response.aiter_bytes():
                    writer.write(chunk)
                    if len(kept) < MAX_KEPT:
                        kept += chunk
                    await writer.drain()
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            step.is_error, step.note = True, f"upstream failed: {type(exc).__name__}: {exc}"
            if not status:
                writer.write(_plain(502, f"crucible model proxy: the upstream failed: {type(exc).__name__}"))
        except asyncio.CancelledError:
            step.is_error, step.note = True, "cut off: the CLI ended before the reply did"
            raise
        finally:
            step.seconds = time.monotonic() - began
            self._record(step, request, status, bytes(kept))

    def _record(self, step: Step, request: _Request, status: int, reply: bytes) -> None:
        model = _json(request.body).get("model")
        usage, text = read_reply(reply)
        step.arguments = {
            "status": status,
            "model": model if isinstance(model, str) else None,
            "stream": bool(_json(request.body).get("stream")),
            "cached_input_tokens": usage.cached_input_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        }
        step.is_error = step.is_error or not 200 <= status < 300
        step.tokens_in, step.tokens_out = usage.input_tokens, usage.output_tokens
        step.cost_usd = pricing.cost_usd(self.price, usage)
        step.result = text[:4000] if text else None
        if step.is_error and step.note is None:
            step.note = f"HTTP {status}"
        step.idx = len(self.steps)
        self.steps.append(step)


# ---------------------------------------------------------------- reading replies
def read_reply(data: bytes) -> tuple[Usage, str]:
    """The usage and the text of one reply: a JSON body, or an SSE stream of either protocol."""
    stripped = data.lstrip()
    if stripped.startswith(b"{"):
        body = _json(stripped)
        return _usage_of(body), _text_of(body)
    usage, texts = Usage(), []
    for event in _sse_events(data):
        kind = event.get("type")
        if kind == "message_start":  # Anthropic: prompt tokens first, output at message_delta
            usage = _merge(usage, _usage_of(event.get("message") or {}))
        elif kind == "message_delta" and isinstance(event.get("usage"), dict):
            usage.output_tokens = _int(event["usage"].get("output_tokens"), usage.output_tokens)
        elif kind == "content_block_delta" and (event.get("delta") or {}).get("type") == "text_delta":
            texts.append(str(event["delta"].get("text", "")))
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            usage = _usage_of(event.get("response") or {})
        elif kind == "response.output_text.delta":
            texts.append(str(event.get("delta", "")))
        elif isinstance(event.get("usage"), dict) and event.get("object") == "chat.completion.chunk":
            usage = _usage_of(event)
    return usage, "".join(texts)


def _sse_events(data: bytes) -> list[dict[str, Any]]:
    events = []
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload and payload != "[DONE]":
                event = _json(payload.encode())
                if event:
                    events.append(event)
    return events


def _usage_of(body: dict[str, Any]) -> Usage:
    raw = body.get("usage")
    if not isinstance(raw, dict):
        return Usage()
    if "input_tokens" in raw and (
        "cache_read_input_tokens" in raw
        or "cache_creation_input_tokens" in raw
        or "input_tokens_details" not in raw
        and "output_tokens_details" not in raw
    ):
        # Anthropic: input_tokens excludes cache reads and writes; crucible counts every prompt token.
        fresh = _int(raw.get("input_tokens"))
        read, write = _int(raw.get("cache_read_input_tokens")) or 0, _int(raw.get("cache_creation_input_tokens")) or 0
        return Usage(
            input_tokens=None if fresh is None else fresh + read + write,
            output_tokens=_int(raw.get("output_tokens")),
            cached_input_tokens=read,
            cache_write_tokens=write,
        )
    details = raw.get("input_tokens_details") or raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=_int(raw.get("input_tokens", raw.get("prompt_tokens"))),
        output_tokens=_int(raw.get("output_tokens", raw.get("completion_tokens"))),
        cached_input_tokens=_int(details.get("cached_tokens") if isinstance(details, dict) else None) or 0,
    )


def _merge(a: Usage, b: Usage) -> Usage:
    return Usage(
        input_tokens=b.input_tokens if b.input_tokens is not None else a.input_tokens,
        output_tokens=b.output_tokens if b.output_tokens is not None else a.output_tokens,
        cached_input_tokens=b.cached_input_tokens or a.cached_input_tokens,
        cache_write_tokens=b.cache_write_tokens or a.cache_write_tokens,
    )


def _text_of(body: dict[str, Any]) -> str:
    content = body.get("content")
    if isinstance(content, list):  # Anthropic
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    output = body.get("output")
    if isinstance(output, list):  # OpenAI Responses
        return "".join(
            str(c.get("text", ""))
            for item in output
            if isinstance(item, dict)
            for c in item.get("content") or []
            if isinstance(c, dict) and c.get("type") == "output_text"
        )
    return ""


def _int(value: object, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _json(data: bytes | str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------- HTTP/1.1, just enough
@dataclass
class _Request:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes


async def _read_request(reader: asyncio.StreamReader) -> _Request | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[1].startswith("/"):
        raise ValueError(f"not an HTTP request line: {lines[0][:80]!r}")
    headers = [(k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:] if line)]
    named = {k.lower(): v for k, v in headers}
    if named.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        length = int(named.get("content-length") or 0)
        if length > MAX_BODY:
            raise ValueError(f"a request body of {length} bytes is too large")
        body = await reader.readexactly(length)
    return _Request(parts[0], parts[1], headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)
        if len(body) > MAX_BODY:
            raise ValueError("the request body is too large")


def _head(response: httpx.Response) -> bytes:
    lines = [f"HTTP/1.1 {response.status_code} {response.reason_phrase or 'Status'}"]
    lines += [f"{k}: {v}" for k, v in response.headers.multi_items() if k.lower() not in _HOP_REPLY]
    lines.append("connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _plain(status: int, message: str) -> bytes:
    body = json.dumps({"error": {"type": "proxy_error", "message": message}}).encode()
    return (
        f"HTTP/1.1 {status} Error\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


__all__ = ["ModelProxy", "Upstream", "read_reply"]
