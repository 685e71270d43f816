"""The tool_calling agent, against a stand-in for a hosted model API, which is unreachable here.

The stand-in (tests/standin) speaks both real protocols over HTTP on 127.0.0.1; a script
per test says what the "model" does. Behaviours of the agent alone run over a real MCP
server (official SDK, HTTP) serving a tiny tools object; the end-to-end ones are real runs
of a sample task, in test_tool_calling_runs.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import time
from pathlib import Path

import httpx
import pytest
from standin import StandIn, answer, call, context_length_exceeded, hang, rate_limited, raw_call, reply, server_error

from engine.agents import AgentContext
from engine.agents.providers import parse_model
from engine.agents.tool_calling import ToolCallingAgent
from engine.capabilities.mcp_server import serve_mcp
from engine.config.compose import compose_config, to_typed
from engine.config.schema import Timeouts
from engine.errors import AgentError, ConfigError
from engine.plan.spec import agent_part

PROMPT = "Say hello through the echo tool, then stop."
KEY_ENV = "CRUCIBLE_TEST_STANDIN_KEY"
PRICES = {
    "openai-compatible/standin": {"input": 1.0, "output": 2.0},
    "anthropic/standin-claude": {"input": 3.0, "output": 15.0},
}
MODELS = {"openai": "openai-compatible/standin", "anthropic": "anthropic/standin-claude"}


@pytest.fixture(autouse=True)
def price_table(tmp_path, monkeypatch):
    path = tmp_path / "prices.yaml"
    path.write_text(json.dumps({"models": PRICES}))  # JSON is YAML
    monkeypatch.setenv("CRUCIBLE_PRICES", str(path))
    monkeypatch.setenv(KEY_ENV, "sk-standin-" + secrets.token_hex(8))
    return path


class Tools:
    """A tiny tools object, served through a real MCP server; ``extra`` adds one more tool."""

    def __init__(self, extra: bool = False) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.extra = extra

    def specs(self) -> list[dict]:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        specs = [{"name": "echo", "description": "echo text back", "inputSchema": schema}]
        if self.extra:
            specs.append({"name": "shout", "description": "echo text in capitals", "inputSchema": schema})
        return specs

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        self.calls.append((name, arguments))
        text = arguments.get("text", "")
        return (text.upper() if name == "shout" else f"echo:{text}"), False


def run_agent(script, *, protocol="openai", model=None, tools=None, **config):
    """Run the agent once against the stand-in; (outcome, stand-in, tools)."""
    tools = tools or Tools()
    config.setdefault("wall_timeout", 30)
    config.setdefault("api_key_env", KEY_ENV)

    async def go():
        token = secrets.token_urlsafe(16)
        with StandIn(script) as api:
            async with serve_mcp(tools, token=token) as url:
                agent = ToolCallingAgent(model=model or MODELS[protocol], base_url=api.base_url, **config)
                ctx = AgentContext(
                    spec=None, capabilities={"mcp": url}, capability_auth={"mcp": token}, validation=[], prompt=PROMPT
                )
                return await agent.run(ctx), api

    outcome, api = asyncio.run(go())
    assert not api.script_errors, api.script_errors[0]
    return outcome, api, tools


def echo_then_answer(turn):
    return reply("calling echo", call("echo", text="hello")) if turn.turn == 0 else answer("said hello")


def model_steps(outcome):
    return [s for s in outcome.steps if s.kind == "model"]


# ---------------------------------------------------------------- the loop and its steps
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_tools_come_from_the_mcp_server_so_an_extra_tool_reaches_the_model_with_no_agent_change(protocol):
    def script(turn):
        if "shout" in turn.tool_names and turn.turn == 0:
            return reply("", call("shout", text="hi"))
        return echo_then_answer(turn)

    _, plain, _ = run_agent(script, protocol=protocol)
    outcome, extra, tools = run_agent(script, protocol=protocol, tools=Tools(extra=True))
    tool_names = {
        "openai": lambda r: [t["function"]["name"] for t in r["tools"]],
        "anthropic": lambda r: [t["name"] for t in r["tools"]],
    }[protocol]
    assert tool_names(plain.requests()[0]) == ["echo"]
    assert tool_names(extra.requests()[0]) == ["echo", "shout"]
    assert tools.calls == [("shout", {"text": "hi"})]
    assert outcome.steps[1].tool == "shout" and outcome.steps[1].result == "HI"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_every_model_call_and_tool_call_is_a_step_with_tokens_latency_and_cost(protocol):
    outcome, api, tools = run_agent(echo_then_answer, protocol=protocol)
    assert outcome.stop_reason == "done" and outcome.answer == "said hello"
    assert [(s.idx, s.kind, s.tool) for s in outcome.steps] == [
        (0, "model", None),
        (1, "tool_call", "echo"),
        (2, "model", None),
    ]
    price = PRICES[MODELS[protocol]]
    for step, exchange in zip(model_steps(outcome), api.exchanges):
        usage = exchange.response["usage"]
        sent_in = usage.get("prompt_tokens", usage.get("input_tokens"))
        sent_out = usage.get("completion_tokens", usage.get("output_tokens"))
        assert (step.tokens_in, step.tokens_out) == (sent_in, sent_out) and sent_in > 0
        assert step.cost_usd == pytest.approx((sent_in * price["input"] + sent_out * price["output"]) / 1e6)
        assert step.seconds > 0 and step.started_at
    tool = outcome.steps[1]
    assert (tool.capability, tool.arguments, tool.result, tool.is_error) == (
        "mcp",
        {"text": "hello"},
        "echo:hello",
        False,
    )
    assert tools.calls == [("echo", {"text": "hello"})]
    second = api.requests()[1]
    assert "echo:hello" in json.dumps(second["messages"][-1])  # the result went back to the model


def test_a_model_missing_from_the_price_table_costs_null_not_a_guess():
    outcome, _, _ = run_agent(echo_then_answer, model="openai-compatible/unpriced")
    assert all(s.cost_usd is None and s.tokens_in for s in model_steps(outcome))


@pytest.mark.slow
def test_sampling_parameters_and_the_key_reach_the_request():
    _, api, _ = run_agent(echo_then_answer, model="openai/gpt-standin", temperature=0.3, max_tokens=321, seed=7)
    body = api.requests()[0]
    assert (body["temperature"], body["max_completion_tokens"], body["seed"]) == (0.3, 321, 7)
    assert body["messages"][1] == {"role": "user", "content": PROMPT}
    assert api.exchanges[0].api_key == os.environ[KEY_ENV]
    outcome, api, _ = run_agent(echo_then_answer, protocol="anthropic", temperature=None, max_tokens=99, seed=7)
    body = api.requests()[0]
    assert body["max_tokens"] == 99 and "temperature" not in body and "seed" not in body
    assert any("no seed" in w for w in outcome.warnings)


def test_a_missing_api_key_fails_before_the_run_starts(monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(AgentError, match=KEY_ENV):
        ToolCallingAgent(model="openai/gpt-4o-mini", api_key_env=KEY_ENV)


@pytest.mark.parametrize("model", ["gpt-4o", "mystery/x", "openai/", "openai-compatible/x"])
def test_a_model_that_names_no_known_provider_or_lacks_a_base_url_is_a_config_error(model):
    with pytest.raises(ConfigError):
        ToolCallingAgent(model=model)


def test_prices_and_keys_are_not_part_of_the_spec(price_table):
    overrides = ["task=sample/last_page", "agent=tool_calling", "model=openai/gpt-4o-mini"]
    before = agent_part(to_typed(compose_config(overrides)))
    price_table.write_text(json.dumps({"models": {"openai/gpt-4o-mini": {"input": 99, "output": 99}}}))
    assert agent_part(to_typed(compose_config(overrides))) == before
    agent, model = before
    assert agent.api_key_env is None and parse_model(model).provider == "openai"
    assert not any("price" in key or "sk-" in str(value) for key, value in dataclasses.asdict(agent).items())


# ---------------------------------------------------------------- misbehaving models
def test_malformed_tool_call_json_is_answered_with_an_error_the_model_can_recover_from():
    def script(turn):
        if turn.turn == 0:
            return reply("", raw_call("echo", '{"text": "unterminated'))
        return reply("", call("echo", text="hello")) if turn.turn == 1 else answer("said hello")

    outcome, api, tools = run_agent(script)
    assert outcome.stop_reason == "done" and tools.calls == [("echo", {"text": "hello"})]
    bad = outcome.steps[1]
    assert bad.is_error and bad.arguments == '{"text": "unterminated' and "not valid JSON" in bad.result
    history = api.requests()[1]["messages"]
    assert history[2]["tool_calls"][0]["function"]["arguments"] == '{"text": "unterminated'  # echoed verbatim
    assert history[3]["role"] == "tool" and "not valid JSON" in history[3]["content"]


def test_a_streak_of_malformed_tool_calls_stops_the_run():
    outcome, api, tools = run_agent(lambda turn: reply("", raw_call("echo", "{nope")), max_malformed=3)
    assert outcome.stop_reason == "malformed_tool_call" and tools.calls == []
    assert len(model_steps(outcome)) == 3 and len(api.exchanges) == 3
    assert any("3 unusable tool calls in a row" in w for w in outcome.warnings)


def test_an_unknown_tool_is_reported_back_and_never_executed():
    def script(turn):
        if turn.turn == 0:
            return reply("", call("delete_everything", path="/"))
        assert turn.results[0]["is_error"] is True and "no tool named 'delete_everything'" in turn.results[0]["text"]
        return answer("sorry")

    outcome, api, tools = run_agent(script, protocol="anthropic")
    assert outcome.stop_reason == "done" and tools.calls == []
    assert outcome.steps[1].tool == "delete_everything" and outcome.steps[1].is_error
    assert [e.status for e in api.exchanges] == [200, 200]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_429_then_success_is_retried_after_the_retry_after_delay(protocol):
    def script(turn):
        return rate_limited(retry_after=0.3) if turn.turn == 0 and turn.retry == 0 else echo_then_answer(turn)

    began = time.monotonic()
    outcome, api, _ = run_agent(script, protocol=protocol)
    assert outcome.stop_reason == "done"
    assert [(e.turn, e.retry, e.status) for e in api.exchanges] == [(0, 0, 429), (0, 1, 200), (1, 0, 200)]
    first = outcome.steps[0]
    assert "HTTP 429: retry 1/4 after 0.30 s (Retry-After)" in first.note and first.seconds >= 0.3
    assert first.tokens_in == api.exchanges[1].response["usage"].get(
        "prompt_tokens", api.exchanges[1].response["usage"].get("input_tokens")
    )
    assert time.monotonic() - began >= 0.3


def test_retries_are_bounded_and_then_the_run_stops_with_a_model_error(monkeypatch):
    monkeypatch.setattr("engine.agents.providers.transport.BASE_BACKOFF", 0.01)
    outcome, api, _ = run_agent(lambda turn: server_error(503), max_retries=2)
    assert outcome.stop_reason == "model_error" and len(api.exchanges) == 3
    step = outcome.steps[0]
    assert step.is_error and "HTTP 503" in step.result and "after 2 retries" in step.result
    assert step.tokens_in is None and step.cost_usd is None


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_context_length_error_stops_with_model_error_and_says_so(protocol):
    def script(turn):
        return context_length_exceeded() if turn.turn == 1 else echo_then_answer(turn)

    outcome, api, _ = run_agent(script, protocol=protocol)
    assert outcome.stop_reason == "model_error"
    assert len(api.exchanges) == 2, "a context-length error must not be retried"
    assert [s.kind for s in outcome.steps] == ["model", "tool_call", "model"]
    last = outcome.steps[-1]
    assert last.is_error and last.note == "context length exceeded" and "HTTP 400" in last.result
    assert any(w.startswith("model error: context length exceeded") for w in outcome.warnings)


@pytest.mark.slow
def test_a_hung_model_call_ends_in_timeout_at_the_wall_clock_limit_with_the_steps_kept():
    began = time.monotonic()
    outcome, _, _ = run_agent(lambda turn: hang(60) if turn.turn == 1 else echo_then_answer(turn), wall_timeout=5)
    assert 5 <= time.monotonic() - began < 60  # the wall clock ended it, not the 60 s hang
    assert outcome.stop_reason == "timeout"
    assert [(s.kind, s.is_error) for s in outcome.steps] == [("model", False), ("tool_call", False), ("model", True)]
    assert "cut off by the wall-clock limit" in outcome.steps[-1].note
    assert any("wall-clock limit of 5 s" in w for w in outcome.warnings)


def test_the_wall_clock_limit_stays_inside_the_runners_agent_timeout():
    agent = ToolCallingAgent(model=MODELS["openai"], base_url="http://127.0.0.1:9/v1", wall_timeout=None)
    spec = type("Spec", (), {"timeouts": Timeouts(agent=100.0)})()
    assert agent.wall_limit(AgentContext(spec, {}, {}, [], "")) == 95.0
    agent.wall_timeout = 10
    assert agent.wall_limit(AgentContext(spec, {}, {}, [], "")) == 10


def test_max_steps_bounds_the_number_of_model_calls():
    outcome, _, tools = run_agent(lambda turn: reply("", call("echo", text=str(turn.turn))), max_steps=3)
    assert outcome.stop_reason == "max_steps" and len(model_steps(outcome)) == 3 and len(tools.calls) == 3


def test_the_stand_in_rejects_a_conversation_the_real_api_would_reject():
    with StandIn(lambda turn: answer("x")) as api:
        bad = {
            "model": "m",
            "max_tokens": 5,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}]},
                {"role": "user", "content": "no tool_result here"},
            ],
        }
        response = httpx.post(f"{api.base_url}/messages", json=bad, headers={"anthropic-version": "2023-06-01"})
        assert response.status_code == 400 and "tool_result" in response.json()["error"]["message"]
        missing = httpx.post(
            f"{api.base_url}/chat/completions",
            json={
                "model": "m",
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}
                        ],
                    },
                ],
            },
        )
        assert missing.status_code == 400 and "c1" in missing.json()["error"]["message"]


@pytest.mark.slow
def test_the_stand_in_runs_as_a_process_numbering_conversations_per_model_and_task(tmp_path):
    """What a sweep through the CLI uses: attempts of one (model, task) get their own outcomes."""
    import subprocess
    import sys

    from standin.tasks import prompt_index

    script = tmp_path / "script.py"
    script.write_text(
        "from tests.standin import outcome_table\n"
        "script = outcome_table({('m-a', 'sample/last_page'): ['fix', 'give_up']})\n"
    )
    port_file, log = tmp_path / "port", tmp_path / "log.jsonl"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.standin.server",
            "--script",
            str(script),
            "--port-file",
            str(port_file),
            "--log",
            str(log),
            "--require-key-env",
            KEY_ENV,
        ],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}/v1/chat/completions"
        prompt = next(text for text, task, _ in prompt_index() if task == "sample/last_page")
        start = {"model": "m-a", "messages": [{"role": "user", "content": prompt}]}
        auth = {"Authorization": f"Bearer {os.environ[KEY_ENV]}"}
        first, second = (httpx.post(url, json=start, headers=auth).json()["choices"][0]["message"] for _ in range(2))
        replies = []
        for opened in (first, second):
            history = [
                *start["messages"],
                opened,
                {"role": "tool", "tool_call_id": opened["tool_calls"][0]["id"], "content": "README.md"},
            ]
            replies.append(httpx.post(url, json={"model": "m-a", "messages": history}, headers=auth).json())
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0]
    fixing, giving_up = (r["choices"][0]["message"] for r in replies)
    assert [c["function"]["name"] for c in fixing["tool_calls"]] == ["str_replace_based_edit_tool"]
    assert "giving up" in giving_up["content"] and "tool_calls" not in giving_up
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["conversation"], x["turn"], x["task"]) for x in lines] == [
        (0, 0, "sample/last_page"),
        (1, 0, "sample/last_page"),
        (0, 1, "sample/last_page"),
        (1, 1, "sample/last_page"),
    ]
    assert {x["api_key"] for x in lines} == {"present"} and os.environ[KEY_ENV] not in log.read_text()
    assert "stand-in listening on http://127.0.0.1:" in output and "Warning" not in output
