"""A stand-in for a hosted model API, which is unreachable here.

An HTTP server on 127.0.0.1 (ephemeral port unless told) that speaks BOTH real protocols
crucible's agents use — OpenAI chat completions (``POST .../chat/completions``), the
Anthropic messages API (``POST .../messages``) and the OpenAI Responses API
(``POST .../responses``, Codex), each as JSON or, when the request asks to ``stream``, as the
protocol's server-sent events (``streaming.py``) — with their real shapes:
``tool_calls`` / ``tool_use`` blocks, ``usage``, and the real error bodies. What the
"model" says is decided by a per-test script (``tests/standin/script.py``). It is not a
model and decides nothing itself; it only proves the agent's side of the wire.

In a test::

    with StandIn(script) as api:          # api.base_url == "http://127.0.0.1:PORT/v1"
        ...run the agent with agent.base_url=api.base_url...
    api.exchanges                          # every request and reply, in order

As a process (sweeps launched through the CLI point ``agent.base_url`` at it)::

    python -m tests.standin.server --port 0 --script FILE.py [--log FILE.jsonl] [--port-file F]
                                  [--require-key-env NAME]

``FILE.py`` defines ``script(turn)`` (it runs in the stand-in process, so it imports the
helpers as ``from tests.standin import ...``; start the process from the repo root).
The key it expects, if any, is read from the environment variable named by
``--require-key-env``, never from the command line. The ``--log`` file never holds a key.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import runpy
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .protocols import PROTOCOLS as CHAT_PROTOCOLS
from .protocols import BadRequest, counted_usage
from .script import Error, Turn
from .streaming import STREAMS, parse_responses, responses_error, responses_reply, sse
from .tasks import task_for_prompt

PROTOCOLS = {**CHAT_PROTOCOLS, "responses": (parse_responses, responses_reply, responses_error)}
"""'openai' (chat completions), 'anthropic' (messages) and 'responses' (OpenAI Responses API)."""


@dataclass
class Exchange:
    """One request the stand-in received and what it answered."""

    protocol: str
    model: str | None
    task: str | None
    conversation: int | None
    turn: int | None
    retry: int | None
    request: dict
    status: int | None
    """None when it hung up without a reply."""
    response: dict | None
    api_key: str | None
    """The key the client presented (kept in memory only, for tests to check it was sent)."""


class StandIn:
    """The server; a context manager. ``script(turn)`` decides every reply."""

    def __init__(
        self,
        script: Callable[[Turn], Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        require_key: str | None = None,
        log_path: str | None = None,
    ) -> None:
        self.script = script
        self.require_key = require_key
        self.log_path = log_path
        self.exchanges: list[Exchange] = []
        self.script_errors: list[str] = []
        """Tracebacks of exceptions the script raised (each answered with HTTP 400)."""
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._next_conversation: dict[tuple, int] = {}
        self._released: dict[tuple, list[int]] = {}
        self._failures: dict[tuple, int] = {}
        self._serial = itertools.count(1)
        self.httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What ``agent.base_url`` should be, for either protocol."""
        return f"{self.url}/v1"

    def start(self) -> StandIn:
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="standin", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self.stopping.set()  # releases hung and waiting replies
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def requests(self, protocol: str | None = None) -> list[dict]:
        return [e.request for e in self.exchanges if protocol in (None, e.protocol)]

    # ------------------------------------------------------------ one request
    def handle(self, protocol: str, body: dict, headers: dict[str, str]) -> tuple[int | None, dict | None, dict]:
        parse, render, render_error = PROTOCOLS[protocol]
        key = _presented_key(protocol, headers)
        try:
            parsed = parse(body, headers)
        except BadRequest as exc:
            return self._log(
                Exchange(
                    protocol,
                    body.get("model"),
                    None,
                    None,
                    None,
                    None,
                    body,
                    400,
                    render_error(Error(400, str(exc), "invalid_request_error")),
                    key,
                ),
                {},
            )
        if self.require_key is not None and key != self.require_key:
            payload = render_error(Error(401, "Incorrect API key provided (stand-in)", "authentication_error"))
            return self._log(Exchange(protocol, parsed.model, None, None, None, None, body, 401, payload, key), {})
        task = task_for_prompt(parsed.prompt)
        pair = (parsed.model, task)
        first = parsed.assistant_turns == 0
        conversation = self._take(pair) if first else parsed.conversation
        if conversation is None:
            payload = render_error(Error(400, "stand-in: this conversation carries none of its tool-call ids"))
            return self._log(Exchange(protocol, parsed.model, task, None, None, None, body, 400, payload, key), {})
        retry = self._failures.get((pair, conversation, parsed.assistant_turns), 0)
        turn = Turn(
            protocol,
            parsed.model,
            parsed.prompt,
            task,
            conversation,
            parsed.assistant_turns,
            retry,
            parsed.tools,
            parsed.results,
            body,
        )
        exchange = Exchange(protocol, parsed.model, task, conversation, turn.turn, retry, body, None, None, key)
        try:
            outcome = self._resolve(self.script(turn))
        except Exception as exc:  # a failed check in a test's script: a 400, so the agent stops at once
            self.script_errors.append(traceback.format_exc())
            outcome = Error(400, f"stand-in script failed: {type(exc).__name__}: {exc}", "invalid_request_error")
        if outcome is None:  # hung up without a reply
            if first:
                self._release(pair, conversation)
            return self._log(exchange, {})
        if outcome.kind == "reply":
            counted = (
                body
                if protocol != "responses"
                else {"system": body.get("instructions"), "messages": body.get("input"), "tools": body.get("tools")}
            )
            usage = outcome.usage or counted_usage(counted, outcome)
            exchange.status = 200
            exchange.response = render(outcome, parsed.model, conversation, turn.turn, usage, next(self._serial))
            return self._log(exchange, {})
        with self._lock:
            self._failures[(pair, conversation, turn.turn)] = retry + 1
        if first:
            self._release(pair, conversation)
        exchange.status, exchange.response = outcome.status, render_error(outcome)
        extra = {}
        if outcome.retry_after is not None:  # as the real APIs send it: whole seconds, and milliseconds
            extra = {
                "retry-after": str(max(1, round(outcome.retry_after))),
                "retry-after-ms": str(int(outcome.retry_after * 1000)),
            }
        return self._log(exchange, extra)

    def _resolve(self, outcome: Any) -> Any:
        """Follow ``wait`` and ``hang`` to the reply to send (None = hang up)."""
        while True:
            kind = getattr(outcome, "kind", "")
            if kind == "wait":
                if not outcome.event.wait(outcome.timeout) or self.stopping.is_set():
                    return None
                outcome = outcome.then
            elif kind == "hang":
                self.stopping.wait(outcome.seconds)
                return None
            elif kind in ("reply", "error"):
                return outcome
            else:
                raise TypeError(f"stand-in script returned {outcome!r}, not a reply")

    def _take(self, pair: tuple) -> int:
        """A number for a new conversation: the lowest one given back by a failed first turn, or the next."""
        with self._lock:
            free = self._released.get(pair)
            if free:
                return heapq.heappop(free)
            number = self._next_conversation.get(pair, 0)
            self._next_conversation[pair] = number + 1
            return number

    def _release(self, pair: tuple, number: int) -> None:
        with self._lock:
            heapq.heappush(self._released.setdefault(pair, []), number)

    def _log(self, exchange: Exchange, headers: dict) -> tuple[int | None, dict | None, dict]:
        with self._lock:
            self.exchanges.append(exchange)
            if self.log_path:
                line = asdict(exchange)
                line["api_key"] = "present" if exchange.api_key else None
                with open(self.log_path, "a") as log:
                    log.write(json.dumps(line) + "\n")
        return exchange.status, exchange.response, headers


def _presented_key(protocol: str, headers: dict[str, str]) -> str | None:
    if protocol == "anthropic":
        return headers.get("x-api-key")
    auth = headers.get("authorization", "")
    return auth[len("Bearer ") :] if auth.startswith("Bearer ") else None


def _handler_for(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            route = self.path.split("?")[0].rstrip("/")  # Claude Code asks for /v1/messages?beta=true
            protocol = (
                "openai"
                if route.endswith("/chat/completions")
                else "anthropic"
                if route.endswith("/messages")
                else "responses"
                if route.endswith("/responses")
                else None
            )
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            if protocol is None:
                return self._send(404, {"error": {"message": f"stand-in: no route {self.path}"}}, {})
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError("not an object")
            except ValueError as exc:
                return self._send(400, {"error": {"message": f"the body is not a JSON object: {exc}"}}, {})
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, payload, extra = standin.handle(protocol, body, headers)
            if status is None:
                self.close_connection = True
                return
            if status == 200 and body.get("stream") is True and protocol in STREAMS:
                return self._stream(STREAMS[protocol](payload))
            self._send(status, payload, extra)

        def do_GET(self) -> None:  # noqa: N802 (a CLI may list models; the stand-in has no such list)
            self._send(404, {"error": {"message": f"stand-in: no route GET {self.path}"}}, {})

        def _stream(self, events: list) -> None:
            """The reply as server-sent events, closing the connection at its end."""
            data = sse(events)
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _send(self, status: int, payload: dict, extra: dict) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (its timeout): nothing to answer

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    import os

    parser = argparse.ArgumentParser(
        prog="python -m tests.standin.server", description="stand-in for a hosted model API, which is unreachable here"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", required=True, help="a Python file defining script(turn)")
    parser.add_argument("--log", help="append every exchange here as JSON lines (keys redacted)")
    parser.add_argument("--port-file", help="write the chosen port here once listening")
    parser.add_argument("--require-key-env", help="answer 401 unless the key equals this variable's value")
    args = parser.parse_args(argv)
    script = runpy.run_path(args.script).get("script")
    if not callable(script):
        parser.error(f"{args.script} defines no script(turn) function")
    key = os.environ.get(args.require_key_env) if args.require_key_env else None
    if args.require_key_env and not key:
        parser.error(f"${args.require_key_env} is not set")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    with StandIn(script, host=args.host, port=args.port, require_key=key, log_path=args.log) as api:
        if args.port_file:
            with open(args.port_file + ".tmp", "w") as f:
                f.write(str(api.httpd.server_address[1]))
            os.replace(args.port_file + ".tmp", args.port_file)
        print(f"stand-in listening on {api.base_url}", flush=True)
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
