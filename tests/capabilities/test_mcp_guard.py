"""The MCP endpoint's HTTP checks (engine/capabilities/mcp_guard.py) case by case: Host, Origin,
then the bearer token. The whole server behind them, with the TypeScript SDK client, is in
test_mcp_spec.py."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from starlette.responses import PlainTextResponse

from engine.capabilities.mcp_guard import RequestGuard

TOKEN = "tok-123"
PORT = 40823


def status(headers: dict[str, str], *, bound: str = "127.0.0.1", origins: tuple[str, ...] = ()) -> int:
    guard = RequestGuard(PlainTextResponse("ok"), TOKEN, bound=bound, port=PORT, allowed_origins=origins)

    async def ask() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard)) as client:
            return (await client.get(f"http://127.0.0.1:{PORT}/mcp/", headers=headers)).status_code

    return asyncio.run(ask())


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "host",
    [f"127.0.0.1:{PORT}", f"localhost:{PORT}", f"[::1]:{PORT}", "localhost", "127.0.0.1:5555", f"LOCALHOST:{PORT}"],
)
def test_loopback_hosts_on_any_port_are_accepted(host):
    assert status({**AUTH, "Host": host}) == 200


@pytest.mark.parametrize("host", [f"evil.example:{PORT}", "evil.example", f"127.0.0.1.evil.example:{PORT}", ""])
def test_a_foreign_host_is_refused(host):
    assert status({**AUTH, "Host": host}) == 403


def test_an_address_bound_on_purpose_is_a_host_and_every_address_checks_none():
    assert status({**AUTH, "Host": f"10.1.2.3:{PORT}"}, bound="10.1.2.3") == 200
    assert status({**AUTH, "Host": f"box.lan:{PORT}"}, bound="0.0.0.0") == 200


@pytest.mark.parametrize("origin", [f"http://127.0.0.1:{PORT}", f"http://localhost:{PORT}/", f"http://[::1]:{PORT}"])
def test_the_servers_own_origin_is_accepted(origin):
    assert status({**AUTH, "Host": f"127.0.0.1:{PORT}", "Origin": origin}) == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        f"http://evil.example:{PORT}",
        "http://127.0.0.1:6274",
        f"file://127.0.0.1:{PORT}",
        "http://localhost:notaport",
    ],
)
def test_a_foreign_origin_is_refused(origin):
    assert status({**AUTH, "Host": f"127.0.0.1:{PORT}", "Origin": origin}) == 403


def test_an_origin_allowed_on_purpose_is_accepted():
    headers = {**AUTH, "Host": f"127.0.0.1:{PORT}", "Origin": "http://localhost:6274"}
    assert status(headers, origins=("http://localhost:6274",)) == 200


@pytest.mark.parametrize(
    "value,expected",
    [
        (f"Bearer {TOKEN}", 200),
        (f"bearer {TOKEN}", 200),
        (f"BEARER  {TOKEN}", 200),
        (f"Bearer {TOKEN}x", 401),
        (f"Basic {TOKEN}", 401),
        (TOKEN, 401),
        ("", 401),
    ],
)
def test_the_bearer_scheme_is_case_insensitive_and_the_token_exact(value, expected):
    assert status({"Host": f"127.0.0.1:{PORT}", "Authorization": value}) == expected


def test_a_foreign_origin_is_refused_before_the_token_is_looked_at():
    assert status({"Host": f"127.0.0.1:{PORT}", "Origin": "http://evil.example"}) == 403
