"""Real runs of sample tasks by the tool_calling agent, against a stand-in for a hosted
model API, which is unreachable here: fixed (both protocols, one of them through a 429, a
malformed call and an unknown tool), given up, and timed out; each graded and stored.

Four runs share one module fixture (a run takes a few seconds); the agent's behaviours
one by one are in test_tool_calling_agent.py, over a real MCP server without Docker.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from standin import StandIn, answer, call, fixer, giver_up, golden_edits, hang, rate_limited, raw_call, reply
from wall_clock import LimitOnEvent

from engine.config.compose import compose_config, to_typed

pytestmark = [pytest.mark.docker, pytest.mark.slow]

KEY_ENV = "CRUCIBLE_TEST_STANDIN_KEY"
PRICES = {
    "openai-compatible/standin": {"input": 1.0, "output": 2.0},
    "anthropic/standin-claude": {"input": 3.0, "output": 15.0},
}
MODELS = {"openai": "openai-compatible/standin", "anthropic": "anthropic/standin-claude"}


def real_run(tmp_path_factory, api: StandIn, model: str, task: str, *overrides: str):
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    typed = to_typed(
        compose_config(
            [
                f"task={task}",
                "agent=tool_calling",
                f"model={model}",
                f"agent.base_url={api.base_url}",
                f"agent.api_key_env={KEY_ENV}",
                *overrides,
            ]
        )
    )
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    return asyncio.run(run_one(planned, session, run_dir=tmp_path_factory.mktemp("run")))


def hiccups_then_fix(turn):
    """A 429, then a malformed call and an unknown tool, then the golden's edits: still 1.0."""
    if turn.turn == 0:
        return rate_limited(0.1) if turn.retry == 0 else reply("", call("bash", command="ls"))
    if turn.turn == 1:
        return reply("", raw_call("bash", '{"command": '), call("no_such_tool"))
    if turn.turn == 2:
        return reply("fixing", *golden_edits(turn))
    return answer("Fixed.")


@pytest.fixture(scope="module")
def limit() -> LimitOnEvent:
    """The tool-calling agent's wall-clock limits in this module's runs (tests/wall_clock.py)."""
    return LimitOnEvent()


@pytest.fixture(scope="module")
def runs(docker_client, base_image, tmp_path_factory, limit):
    """Four real runs: fixed (both protocols), given up, and timed out."""
    import engine.agents.tool_calling as tool_calling

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tool_calling, "asyncio", limit)  # its wall-clock limit runs out on the model's hang
        prices = tmp_path_factory.mktemp("prices") / "prices.yaml"
        prices.write_text(json.dumps({"models": PRICES}))
        mp.setenv("CRUCIBLE_PRICES", str(prices))
        mp.setenv(KEY_ENV, "sk-standin-run")

        def script(turn):
            behaviour = {
                "sample/last_page": hiccups_then_fix,
                "sample/query_ops": fixer,
                "sample/negative_money": giver_up,
            }.get(turn.task)
            if behaviour is None:  # sample/snapshot_alias: looks around, then the model hangs
                if turn.turn == 1:
                    limit.fire()
                    return hang(120)
                return reply("", call("bash", command="ls"))
            return behaviour(turn)

        with StandIn(script) as api:
            return {
                "openai_fix": (real_run(tmp_path_factory, api, MODELS["openai"], "sample/last_page"), api),
                "anthropic_fix": (real_run(tmp_path_factory, api, MODELS["anthropic"], "sample/query_ops"), api),
                "give_up": (real_run(tmp_path_factory, api, MODELS["openai"], "sample/negative_money"), api),
                "timeout": (
                    real_run(
                        tmp_path_factory, api, MODELS["anthropic"], "sample/snapshot_alias", "agent.wall_timeout=60"
                    ),
                    api,
                ),
            }


def stored_steps(run_id: str) -> list[tuple]:
    from engine.store.duckdb import DuckDBStore

    return DuckDBStore().query(
        f"SELECT kind, tool, is_error, tokens_in, tokens_out, cost_usd, note FROM steps "
        f"WHERE run_id = '{run_id}' ORDER BY position"
    )[1]


@pytest.mark.parametrize("name", ["openai_fix", "anthropic_fix"])
def test_a_run_that_fixes_a_sample_task_scores_1(runs, name):
    record, api = runs[name]
    assert (record.status, record.reward, record.stop_reason) == ("completed", 1.0, "done"), record.error
    steps = stored_steps(record.run_id)
    usages = [e.response["usage"] for e in api.exchanges if e.task == record.task_id and e.status == 200]
    sent = [
        (u.get("prompt_tokens", u.get("input_tokens")), u.get("completion_tokens", u.get("output_tokens")))
        for u in usages
    ]
    models = [s for s in steps if s[0] == "model"]
    assert [(s[3], s[4]) for s in models] == sent and len(sent) >= 3
    price = PRICES[record.model]
    assert [s[5] for s in models] == pytest.approx([(i * price["input"] + o * price["output"]) / 1e6 for i, o in sent])
    assert record.spec["agent"]["api_key_env"] == KEY_ENV and "sk-standin" not in json.dumps(record.spec)
    assert [s[1] for s in steps if s[0] == "tool_call"][0] == "bash"


def test_a_run_that_survives_a_429_a_malformed_call_and_an_unknown_tool_still_scores_1(runs):
    record, _ = runs["openai_fix"]
    steps = stored_steps(record.run_id)
    assert "HTTP 429" in steps[0][6]
    unusable = [s for s in steps if s[0] == "tool_call" and s[2]]
    assert [s[1] for s in unusable] == ["bash", "no_such_tool"]


def test_a_run_that_gives_up_scores_0(runs):
    record, _ = runs["give_up"]
    assert (record.status, record.reward, record.stop_reason) == ("completed", 0.0, "done")
    assert record.diff == "" and [s.kind for s in record.steps] == ["model", "tool_call", "model"]


def test_a_run_whose_model_hangs_stops_at_the_wall_clock_limit_and_is_still_graded(runs, limit):
    record, _ = runs["timeout"]
    assert (record.status, record.stop_reason, record.reward) == ("completed", "timeout", 0.0)
    assert [(s.kind, s.is_error) for s in record.steps] == [("model", False), ("tool_call", False), ("model", True)]
    # Its limit ran out a second after the model began to hang (tests/wall_clock.py), not at its
    # 60 s backstop, nor at the hang's 120 s end.
    assert limit.ran_out == ["event"]
    assert "stopped at the wall-clock limit of 60 s" in " ".join(record.warnings), record.warnings
