"""A run's MCP endpoint as the MCP specification and the official TypeScript SDK client expect.

Every client here is ``@modelcontextprotocol/sdk`` from the npm registry (tests/mcp_ts), against
``crucible serve task=sample/last_page`` (real containers): Origin validated, the bearer scheme
case-insensitive, progress notifications that keep a long call alive in a client with
``resetTimeoutOnProgress``, a client's cancellation killing the command in the workspace, and a
shutdown that answers the call in flight, closes within 0.5 s and prints nothing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from urllib.parse import urlsplit

import httpx
import pytest
from serving import TS_DIR, crucible, ensure_ts_sdk, serve, ts_client

from engine.store.duckdb import DuckDBStore

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # one served run and the TypeScript SDK: over 10 s to start

SHUTTING_DOWN = "cancelled: the server is shutting down"
PROMPTLY = 60.0
"""Seconds within which Ctrl-C answers a call in flight and closes the endpoint: far below the
call's own hour, far above what a machine at load 40 needs."""


@pytest.fixture(scope="module")
def served(docker_client, base_image):
    """One served run, progress every second, that nobody fixes: ended by ``crucible finish``."""
    ensure_ts_sdk()
    run = serve("--progress-every", "1", "task=sample/last_page")
    yield run
    if run.proc.poll() is None:
        crucible("finish", run.run_id)
        run.wait()


@pytest.mark.slow
def test_a_foreign_origin_gets_403(served):
    for origin in ("http://evil.example", "null", "http://127.0.0.1:1"):
        outcome = ts_client("connect", served.url, served.token, origin=origin)
        assert not outcome["ok"] and outcome["code"] == 403, (origin, outcome)


@pytest.mark.slow
def test_the_servers_own_origin_and_no_origin_are_accepted(served):
    port = urlsplit(served.url).port
    for options in ({}, {"origin": f"http://127.0.0.1:{port}"}, {"origin": f"http://localhost:{port}"}):
        outcome = ts_client("connect", served.url, served.token, **options)
        assert outcome["ok"] and "bash" in outcome["tools"], (options, outcome)


def test_a_foreign_host_gets_403_and_a_wrong_token_401(served):
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {served.token}"}
    foreign = httpx.post(served.url, json=body, headers={**headers, "Host": "evil.example"})
    assert foreign.status_code == 403, foreign.text
    wrong = httpx.post(served.url, json=body, headers={**headers, "Authorization": "Bearer not-the-token"})
    assert wrong.status_code == 401


@pytest.mark.slow
def test_the_bearer_scheme_is_case_insensitive(served):
    for scheme in ("bearer", "BEARER"):
        outcome = ts_client("connect", served.url, served.token, scheme=scheme)
        assert outcome["ok"], (scheme, outcome)


@pytest.mark.slow
def test_progress_keeps_a_call_longer_than_the_client_timeout_alive(served):
    # Client timeout 3 s, a 5 s call, progress every second: it completes only by resetting its
    # timeout on each notification; the same call without the reset times out.
    kept = ts_client("progress", served.url, served.token, seconds=5, timeoutMs=3000, reset=True)
    assert kept["ok"] and kept["text"].strip() == "slept" and not kept["isError"], kept
    assert kept["progress"] >= 3, kept
    dropped = ts_client("progress", served.url, served.token, seconds=5, timeoutMs=3000, reset=False)
    assert not dropped["ok"] and dropped["code"] == -32001, dropped


@pytest.mark.slow
def test_a_clients_cancellation_kills_the_command_in_the_workspace(served):
    outcome = ts_client("cancel", served.url, served.token, marker="4242.5")
    assert outcome["started"], outcome
    assert outcome["outcome"]["settled"] == "rejected", outcome
    assert outcome["gone"], f"the cancelled command still runs in the workspace: {outcome}"


def test_a_65_s_call_completes_under_the_sdks_60_s_timeout_with_default_progress(docker_client, base_image):
    ensure_ts_sdk()
    run = serve("task=sample/last_page")
    try:
        outcome = ts_client("progress", run.url, run.token, timeout=200, seconds=65, timeoutMs=60000, reset=True)
        assert outcome["ok"] and outcome["text"].strip() == "slept", outcome
        assert outcome["ms"] >= 65000 and outcome["progress"] >= 6, outcome
    finally:
        run.interrupt()
        run.wait()


@pytest.mark.slow
def test_shutdown_answers_the_call_in_flight_at_once_closes_the_endpoint_and_prints_nothing(served):
    """ "At once" is judged against the call's own length (``sleep 4343.5``): an answer or a listener
    that waited for the call would take over an hour. The bound is loose so the test holds on a
    loaded machine; on a quiet one both take well under half a second."""
    client = subprocess.Popen(
        ["node", "client.mjs", "inflight", served.url, served.token, json.dumps({"marker": "4343.5"})],
        cwd=TS_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    first = json.loads(client.stdout.readline() or "{}")
    assert first == {"event": "running", "ok": True}, first
    sent = served.interrupt()
    closed = _until_refused(served.url, sent + PROMPTLY) - sent
    rest = client.stdout.read()
    client.wait(timeout=30)
    outcome = json.loads(rest.strip().splitlines()[-1])["result"]
    assert outcome["settled"] == "answered" and SHUTTING_DOWN in outcome["text"], outcome
    assert outcome["at"] - sent < PROMPTLY, f"the call in flight was answered {outcome['at'] - sent:.2f} s after Ctrl-C"
    assert closed < PROMPTLY, f"the MCP endpoint still listened {closed:.2f} s after Ctrl-C"
    assert served.wait() == 0, served.stderr()
    assert "Traceback" not in served.stderr() + served.stdout(), served.stderr()
    assert "ERROR" not in served.stderr(), served.stderr()
    record = DuckDBStore().get_run(served.run_id)
    assert record is not None and record.status == "completed" and record.reward == 0.0, record


def _until_refused(url: str, deadline: float) -> float:
    """When a connection to ``url``'s port was first refused (the listener is gone)."""
    parts = urlsplit(url)
    while time.time() < deadline:
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=1):
                pass
        except OSError:
            return time.time()
        time.sleep(0.005)
    raise AssertionError(f"{url} still accepted connections {PROMPTLY:g} s after Ctrl-C")
