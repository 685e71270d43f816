"""Coding CLI agents without Docker: their configs (a bad key fails at compose in one line, an
option a CLI cannot honour fails before anything runs), the host model proxy (the key added on
the host, never the one the CLI holds; every call a step with tokens, cache tokens and cost,
streamed or not; a call cut off by the CLI's end still recorded), and the event parsers' ends
(Claude's max-turns result, Codex's failed turn). The TUIs' screens and records are in
test_cli_agents_tui.py; the real CLIs run in test_cli_agents_runs.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest
from standin import StandIn, answer, call, hang, reply

from engine.agents import pricing
from engine.agents.cli import Event, cross_check
from engine.agents.cli.claude_code import parse_stream as parse_claude
from engine.agents.cli.codex import parse_stream as parse_codex
from engine.agents.cli.proxy import ModelProxy, Upstream
from engine.config.compose import compose_config, to_typed
from engine.errors import ConfigError
from engine.plan.spec import make_agent

ROOT = Path(__file__).resolve().parents[2]


KEY = "sk-standin-proxy-0a1b2c"


PRICE = pricing.Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)


def typed(*overrides: str):
    return to_typed(compose_config(["task=sample/last_page", *overrides]))


# ---------------------------------------------------------------- configs
@pytest.mark.slow
@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_a_misspelled_cli_agent_key_fails_at_compose_in_one_line(agent):
    with pytest.raises(ConfigError) as info:
        typed(f"agent={agent}", "agent.max_turn=3")
    assert "agent.max_turn" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"agent\.builtin_tools\.alow"):
        typed(f"agent={agent}", "agent.builtin_tools.alow=[]")


def test_a_misspelled_key_in_a_cli_agent_file_names_the_key(tmp_path, monkeypatch):
    (tmp_path / "agent").mkdir()
    text = (ROOT / "conf" / "agent" / "claude_code.yaml").read_text().replace("permission_mode:", "permision_mode:")
    (tmp_path / "agent" / "claude_typo.yaml").write_text(text)
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(tmp_path))
    with pytest.raises(ConfigError, match=r"^unknown config key 'agent\.permision_mode'$"):
        typed("agent=claude_typo")


@pytest.mark.slow
def test_crucible_run_with_a_bad_cli_agent_key_says_so_in_one_line_without_a_traceback():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "run",
            "task=sample/last_page",
            "agent=claude_code",
            "agent.permision_mode=plan",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ANTHROPIC_API_KEY": "unused"},
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "agent.permision_mode" in lines[0], done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("agent", "override", "says"),
    [
        ("codex", "agent.max_turns=5", "max_turns is not a limit codex has"),
        ("codex", "agent.permission_mode=on-request", "only 'never'"),
        ("codex", "agent.builtin_tools.allow=[shell]", "builtin_tools can only allow"),
        ("claude_code", "agent.permission_mode=yolo", "permission_mode 'yolo' is not one of"),
        ("claude_code", "model=openai/gpt-5", "must be anthropic/<name>"),
        ("claude_code", "agent.transport=screen", "transport 'screen'; claude_code offers headless or tmux"),
    ],
)
def test_an_option_a_cli_cannot_honour_fails_before_anything_runs(agent, override, says, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    cfg = typed(f"agent={agent}", override)
    from engine.plan.spec import agent_part

    with pytest.raises(ConfigError, match=says) as info:
        make_agent(*agent_part(cfg))
    assert "\n" not in str(info.value)


def test_a_cli_without_a_tui_profile_refuses_the_tmux_transport_in_one_line(monkeypatch):
    from engine.agents.cli import CliAgent

    class Plain(CliAgent):  # a CLI that has only its headless mode described
        provider = "openai"

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    with pytest.raises(
        ConfigError,
        match=r"^agent plain: transport 'tmux'; plain offers headless "
        r"\(its tmux transport is not built yet\)$",
    ):
        Plain("plain", "openai/gpt-5", transport="tmux")
    assert Plain("plain", "openai/gpt-5").transport == "headless"


def test_codex_under_tmux_launches_its_tui_with_the_folder_trusted(monkeypatch):
    from types import SimpleNamespace

    from engine.plan.spec import agent_part

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    agent = make_agent(*agent_part(typed("agent=codex", "agent.transport=tmux")))
    argv, env, files = agent.command(SimpleNamespace(prompt="fix it", workdir="/app"), "tok")
    assert "exec" not in argv and "fix it" not in argv and "--no-alt-screen" in argv and "--no-daemon" in argv
    assert env["TERM"] == "xterm-256color" and env["CRUCIBLE_MCP_TOKEN"] == "tok"
    [config] = files.values()
    assert '[projects."/app"]\ntrust_level = "trusted"' in config and "[mcp_servers.crucible]" in config


@pytest.mark.slow
def test_a_cli_agent_runs_its_default_model_when_none_is_given(monkeypatch):
    from engine.plan.spec import agent_part

    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    assert agent_part(typed("agent=codex"))[1] == "openai/gpt-5"
    assert agent_part(typed("agent=claude_code"))[1] == "anthropic/claude-sonnet-4-6"
    assert agent_part(typed("agent=codex", "model=openai/gpt-5-mini"))[1] == "openai/gpt-5-mini"


def test_every_cli_agents_default_model_is_priced_in_the_shipped_table(monkeypatch):
    from engine.agents import pricing

    monkeypatch.delenv("CRUCIBLE_PRICES", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    prices = pricing._read(pricing.SHIPPED)  # the shipped table alone, not a user's overlay
    for agent in ("claude_code", "codex"):
        model = typed(f"agent={agent}").agent.default_model
        assert model in prices, f"{agent}'s default model {model} has no price: its steps would cost null"


def test_the_cli_binaries_are_pinned_by_version_and_sha512_in_the_agent_layer():
    for agent, version in (("claude_code", "2.1.332"), ("codex", "0.171.0")):
        cfg = typed(f"agent={agent}")
        install = cfg.agent.image.install
        assert cfg.agent.version == version and f"-{version}" in install
        assert len(install.split()[3]) == 128 and "registry.npmjs.org" in install


# ---------------------------------------------------------------- the model proxy
def proxied(script, calls, *, key: str | None = KEY, header: str = "x-api-key"):
    """Run ``calls(client)`` through a proxy in front of a stand-in; (proxy steps, exchanges)."""

    async def go(api: StandIn, folder: str):
        proxy = ModelProxy(f"{folder}/model.sock", Upstream(api.url, header, key), PRICE)
        async with proxy:
            transport = httpx.AsyncHTTPTransport(uds=f"{folder}/model.sock")
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:41000") as client:
                await calls(client)
        return proxy.steps

    with StandIn(script, require_key=KEY) as api, tempfile.TemporaryDirectory(dir="/tmp") as folder:
        return asyncio.run(go(api, folder)), api.exchanges


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01", "x-api-key": "crucible-model-proxy-holds-the-key"}


def messages_body(stream: bool) -> dict:
    return {"model": "claude-x", "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize("stream", [True, False])
def test_the_proxy_replaces_the_clis_key_and_records_tokens_and_cost(stream):
    replies = []

    async def calls(client):
        response = await client.post("/v1/messages?beta=true", json=messages_body(stream), headers=ANTHROPIC_HEADERS)
        replies.append((response.status_code, response.headers.get("content-type"), response.text))

    steps, exchanges = proxied(lambda turn: reply("Looking.", call("bash", command="ls"), usage=(1200, 30)), calls)
    status, kind, text = replies[0]
    assert status == 200 and (kind == "text/event-stream") == stream and "Looking." in text
    assert [e.api_key for e in exchanges] == [KEY]  # the placeholder never left the host
    (step,) = steps
    assert (step.tokens_in, step.tokens_out, step.is_error, step.result) == (1200, 30, False, "Looking.")
    assert step.cost_usd == pytest.approx((1200 * 3.0 + 30 * 15.0) / 1e6)
    assert step.arguments["stream"] is stream and step.tool == "/v1/messages"


def test_the_proxy_reads_the_responses_apis_stream_and_sends_the_key_as_a_bearer_token():
    async def calls(client):
        body = {"model": "gpt-x", "stream": True, "input": [{"type": "message", "role": "user", "content": "hi"}]}
        response = await client.post("/v1/responses", json=body, headers={"authorization": "Bearer placeholder"})
        assert response.status_code == 200 and "response.completed" in response.text

    (step,), exchanges = proxied(lambda turn: answer("Done.", usage=(500, 7)), calls, header="authorization")
    assert [(e.protocol, e.api_key) for e in exchanges] == [("responses", KEY)]
    assert (step.tokens_in, step.tokens_out, step.result) == (500, 7, "Done.")


def test_anthropic_cache_tokens_are_counted_and_priced_as_cache_tokens():
    from engine.agents.cli.proxy import read_reply

    sse = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"usage": {"input_tokens": 10, '
        b'"cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200, "output_tokens": 1}}}\n\n'
        b'event: message_delta\ndata: {"type": "message_delta", "usage": {"output_tokens": 42}}\n\n'
    )
    usage, _ = read_reply(sse)
    assert (usage.input_tokens, usage.cached_input_tokens, usage.cache_write_tokens, usage.output_tokens) == (
        1210,
        1000,
        200,
        42,
    )
    assert pricing.cost_usd(PRICE, usage) == pytest.approx((10 * 3.0 + 1000 * 0.3 + 200 * 3.75 + 42 * 15.0) / 1e6)


def test_an_upstream_error_reaches_the_cli_and_is_an_error_step():
    async def calls(client):
        response = await client.post("/v1/messages", json=messages_body(False), headers=ANTHROPIC_HEADERS)
        assert response.status_code == 401

    steps, _ = proxied(lambda turn: answer("never"), calls, key="sk-wrong")
    assert steps[0].is_error and steps[0].note == "HTTP 401" and steps[0].cost_usd is None


@pytest.mark.slow
def test_a_call_cut_off_when_the_cli_ends_is_still_a_step():
    async def calls(client):
        with pytest.raises(httpx.ReadTimeout):
            await client.post("/v1/messages", json=messages_body(True), headers=ANTHROPIC_HEADERS, timeout=0.5)

    steps, _ = proxied(lambda turn: hang(30), calls)
    assert len(steps) == 1 and steps[0].is_error and "cut off" in steps[0].note


# ---------------------------------------------------------------- event streams
def events(*data: dict) -> list[Event]:
    return [Event(d, float(i)) for i, d in enumerate(data)]


def test_claudes_max_turns_result_is_the_runs_stop_reason():
    parsed = parse_claude(
        events(
            {
                "type": "system",
                "subtype": "init",
                "session_id": "s1",
                "mcp_servers": [{"name": "crucible", "status": "failed"}],
            },
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "mcp__crucible__bash", "input": {"command": "ls"}}
                    ]
                },
            },
            {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a\nb"}]}},
            {
                "type": "result",
                "subtype": "error_max_turns",
                "is_error": True,
                "result": "",
                "usage": {"input_tokens": 5, "cache_read_input_tokens": 7, "output_tokens": 3},
            },
        )
    )
    assert (parsed.finished, parsed.stop_reason, parsed.session_id) == (True, "max_turns", "s1")
    assert [(s.tool, s.capability, s.result, s.is_error) for _, s in parsed.tool_steps] == [
        ("bash", "mcp", "a\nb", False)
    ]
    assert parsed.usage == {"input": 12, "output": 3, "cached_input": 7}
    assert "MCP servers not connected" in parsed.warnings[0]


def test_codexs_failed_turn_is_a_model_error_and_not_finished():
    parsed = parse_codex(
        events(
            {"type": "thread.started", "thread_id": "th1"},
            {"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "ls"}},
            {
                "type": "item.completed",
                "item": {
                    "id": "i1",
                    "type": "command_execution",
                    "command": "ls",
                    "aggregated_output": "x",
                    "exit_code": 2,
                    "status": "failed",
                },
            },
            {"type": "turn.failed", "error": {"message": "stream disconnected"}},
        )
    )
    assert (parsed.finished, parsed.stop_reason, parsed.session_id) == (False, "model_error", "th1")
    assert [(s.tool, s.is_error, s.started_at is not None) for _, s in parsed.tool_steps] == [("shell", True, True)]
    assert parsed.warnings == ["codex: stream disconnected"]


def test_the_cross_check_names_a_difference_between_the_cli_and_the_proxy():
    from engine.models import Step

    step = Step(idx=0, kind="model", tokens_in=100, tokens_out=10, arguments={"model": "m", "cached_input_tokens": 0})
    assert cross_check({"input": 100, "output": 10, "cached_input": 0}, [step], "m") == []
    assert cross_check({"input": 100, "output": 11}, [step], "m") == [
        "cross-check: the CLI reports 11 output tokens for m, the model proxy recorded 10"
    ]
