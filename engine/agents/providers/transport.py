"""HTTP for model providers: one JSON POST, every failure mapped to ``ModelAPIError``, and
bounded retries with exponential backoff that honour ``Retry-After``.

Error messages are built from the status and the API's own error body, never from the
request: the API key is in a request header and must not reach a log or the store.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from engine.agents.providers import Message, ModelAPIError, ModelReply, ToolSpec

T = TypeVar("T")

CONNECT_TIMEOUT = 30.0
BASE_BACKOFF = 1.0
MAX_BACKOFF = 30.0
MAX_RETRY_AFTER = 120.0
"""A server asking us to wait longer than this is treated as down, not busy."""

_CONTEXT_LENGTH = re.compile(
    r"context[_ ]length|context window|maximum context|prompt is too long|input is too long|"
    r"too many (input )?tokens|reduce the length of the (messages|prompt)",
    re.I,
)


class JsonOverHttp:
    """What both protocols do the same way: one POST of the request body, the reply parsed.

    A protocol sets ``self.client`` and ``self.url`` and implements ``request_body`` and
    ``parse_reply``."""

    client: httpx.AsyncClient
    url: str

    def request_body(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        raise NotImplementedError

    def parse_reply(self, data: dict[str, Any]) -> ModelReply:
        raise NotImplementedError

    async def complete(self, system: str, messages: list[Message], tools: list[ToolSpec], timeout: float) -> ModelReply:
        data = await post_json(self.client, self.url, self.request_body(system, messages, tools), timeout=timeout)
        return self.parse_reply(data)

    async def aclose(self) -> None:
        await self.client.aclose()


def new_client(headers: dict[str, str], url: str) -> httpx.AsyncClient:
    # Proxies and CA bundles may come from the environment (corporate proxies); the key and
    # the base URL never do: they come from the spec (api_key_env names the one variable).
    # A plain-http endpoint (a local server) never does TLS, so skip loading the CA bundle.
    return httpx.AsyncClient(headers=headers, follow_redirects=False, trust_env=True, verify=url.startswith("https:"))


async def post_json(client: httpx.AsyncClient, url: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """POST ``body``; the reply's JSON object. Raises ``ModelAPIError``."""
    limits = httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))
    try:
        response = await client.post(url, json=body, timeout=limits)
    except httpx.TimeoutException as exc:
        raise ModelAPIError(f"no reply from {url} within {timeout:g} s ({type(exc).__name__})", retryable=True) from exc
    except httpx.TransportError as exc:
        raise ModelAPIError(f"cannot reach {url}: {type(exc).__name__}: {exc}", retryable=True) from exc
    if response.status_code != 200:
        raise error_for(response)
    try:
        data = response.json()
    except ValueError as exc:
        raise ModelAPIError(f"{url} answered 200 with a body that is not JSON: {response.text[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ModelAPIError(f"{url} answered 200 with JSON that is not an object: {str(data)[:200]}")
    return data


def error_for(response: httpx.Response) -> ModelAPIError:
    status = response.status_code
    message, code = _api_message(response)
    context = status in (400, 413) and (code == "context_length_exceeded" or bool(_CONTEXT_LENGTH.search(message)))
    retryable = status in (408, 409, 429) or status >= 500
    prefix = "context length exceeded: " if context else ""
    return ModelAPIError(
        f"{prefix}HTTP {status}: {message}",
        status=status,
        retryable=retryable and not context,
        retry_after=retry_after(response.headers),
        context_length=context,
    )


def _api_message(response: httpx.Response) -> tuple[str, str | None]:
    """The error's message and code from an OpenAI- or Anthropic-shaped body (or the raw text)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase, None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        message = str(error.get("message") or error.get("type") or error)
        return message[:500], error.get("code") if isinstance(error.get("code"), str) else None
    return str(body)[:500], None


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or a date."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def backoff(attempt: int, asked: float | None) -> float:
    """Seconds before retry number ``attempt + 1``: what the server asked for, else exponential with jitter."""
    if asked is not None:
        return asked
    return min(MAX_BACKOFF, BASE_BACKOFF * 2.0**attempt) * random.uniform(0.5, 1.0)


async def with_retries(call: Callable[[], Awaitable[T]], *, max_retries: int, log: list[str]) -> T:
    """``call()``, retried up to ``max_retries`` times on retryable ``ModelAPIError``s.

    Each retry is described in ``log``. The caller bounds the whole by its wall clock.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except ModelAPIError as exc:
            if not exc.retryable or attempt >= max_retries:
                if attempt:
                    exc.args = (f"{exc} (after {attempt} retr{'y' if attempt == 1 else 'ies'})",)
                raise
            if exc.retry_after is not None and exc.retry_after > MAX_RETRY_AFTER:
                raise ModelAPIError(
                    f"{exc}; the server asked to retry after {exc.retry_after:g} s "
                    f"(more than {MAX_RETRY_AFTER:g} s), giving up",
                    status=exc.status,
                ) from exc
            delay = backoff(attempt, exc.retry_after)
            log.append(
                f"{_short(exc)}: retry {attempt + 1}/{max_retries} after {delay:.2f} s"
                + (" (Retry-After)" if exc.retry_after is not None else "")
            )
            await asyncio.sleep(delay)
            attempt += 1


def _short(exc: ModelAPIError) -> str:
    return f"HTTP {exc.status}" if exc.status else str(exc).split(":")[0]
