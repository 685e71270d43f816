"""The REAL ``claude`` and ``codex`` binaries (pinned npm releases, installed as the agent's image
layer) run inside a real container, headless and as their TUIs in tmux, against the stand-in
model through the host's model proxy: the workspace has no network but loopback and never
holds the API key, which only the proxy's upstream requests carry; each CLI calls the run's
MCP tools, fixes a sample task and scores 1.0 (in tmux too, its tool calls read from its own
session record); every model call is a step with tokens and cost in the store; a CLI past its
wall-clock limit ends the run as ``timeout`` with nothing of it left running.

One module fixture makes the runs (a run takes seconds; the layers build once, ~20 s each).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading

import pytest
from standin import Call, StandIn, answer, call, error, golden_edits, hang, reply
from wall_clock import LimitOnEvent

from engine.agents.cli.codex import ALWAYS_OFFERED
from engine.config.compose import compose_config, to_typed
from engine.store.duckdb import DuckDBStore

pytestmark = [pytest.mark.docker, pytest.mark.slow]

KEY_ENV = "CRUCIBLE_TEST_CLI_KEY"
KEY = "sk-standin-cli-5f0c1e7a9b3d"
TASK = "sample/last_page"
MODELS = {"claude_code": "anthropic/claude-sonnet-4-6", "codex": "openai/gpt-5"}
PRICES = {
    "anthropic/claude-sonnet-4-6": {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75, "output": 15.0},
    "openai/gpt-5": {"input": 1.25, "cached_input": 0.125, "output": 10.0},
}
WALL = {"timeout": 100, "timeout_tmux": 100, "timeout_codex_tmux": 100}
"""The wall-clock runs' limits, as configured: each runs out a second after the stand-in's model
starts to hang (tests/wall_clock.py), these seconds its backstop."""
TITLE = '{"title": "Fix report paging"}'
"""What the stand-in answers Codex's TUI when it asks for a title for the session (a call of the
TUI's own beside the session, with no tools and a JSON schema ``{title}``)."""
UID_PROCESSES = (
    'for p in /proc/[0-9]*; do [ "$(stat -c %u "$p" 2>/dev/null)" = 1000 ] '
    '&& printf "%s " "$(cat "$p/comm" 2>/dev/null)"; done; true'
)


async def left_running(ws) -> str:
    """The agent uid's processes still in ``ws`` once the kills have landed: a SIGKILLed process
    is listed until it next runs and its parent reaps it (under load, a moment after the run's
    kill returned), so an empty census is waited for, up to 10 s, before what is left counts."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        left = (await ws.exec(["sh", "-c", UID_PROCESSES], timeout=30)).stdout.decode().strip()
        if not left or loop.time() > deadline:
            return left
        await asyncio.sleep(0.1)


def tool(turn, name: str) -> str:
    """The CLI's name for the run's MCP tool ``name`` (Claude: mcp__crucible__bash)."""
    for offered in turn.tool_names:
        if offered == name or offered.endswith(f"__{name}") or offered.endswith(f".{name}"):
            return offered
    raise AssertionError(f"the CLI offers no {name} tool of the run: {turn.tool_names}")


class Probe:
    """Looks into the agent's container as root while the CLI waits for a model reply."""

    def __init__(self) -> None:
        self.containers: list[str] = []
        self.seen: dict[str, dict] = {}

    def look(self, label: str) -> None:
        container = self.containers[-1]
        inspect = json.loads(
            subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True).stdout
        )[0]
        # Root reads its own processes' environments; those of the agent's uid only that uid can
        # (docker drops CAP_SYS_PTRACE, which reading another uid's environ needs).
        environ = "".join(_exec(container, user, "cat /proc/[0-9]*/environ | tr '\\0' '\\n'") for user in ("0", "1000"))
        files = _exec(container, "0", f"grep -rls -e '{KEY}' /tmp /run /home /root /etc /app /usr/local; true")
        self.seen[label] = {
            "network_mode": inspect["HostConfig"]["NetworkMode"],
            "interfaces": sorted(
                line.split(":")[0].strip() for line in _exec(container, "0", "cat /proc/net/dev").splitlines()[2:]
            ),
            "key_in_inspect": KEY in json.dumps(inspect),
            "key_in_environ": KEY in environ,
            "cli_environ": "ANTHROPIC_BASE_URL" in environ or "CODEX_HOME" in environ,
            "files_with_key": files.split(),
            "config_files": _exec(
                container,
                "0",
                "ls /tmp/crucible-cli; cat /tmp/crucible-cli/mcp.json "
                "/tmp/crucible-cli/codex-home/config.toml 2>/dev/null; true",
            ),
        }


def _exec(container: str, user: str, script: str) -> str:
    return subprocess.run(
        ["docker", "exec", "-u", user, container, "sh", "-c", script], capture_output=True, text=True, timeout=60
    ).stdout


def fixer_script(probe: Probe, hung: threading.Event, limit: LimitOnEvent | None = None):
    """Looks, edits through the run's MCP tools (the golden's edits), answers; the task
    ``sample/snapshot_alias`` hangs instead (the wall-clock run, whose ``limit`` runs out then)."""

    def script(turn):
        if turn.task is None:  # a side call of the CLI's own (a title, a quota check)
            return answer("ok")
        if turn.task == "sample/snapshot_alias":
            hung.set()
            if limit is not None:
                limit.fire()
            return hang(120)
        if turn.task == "sample/negative_money":  # the model-error run
            return error(400, "stand-in refuses this request")
        if not turn.tool_names and "title" in json.dumps(turn.request.get("text") or {}):
            return answer(TITLE)  # Codex's TUI names its session from the prompt
        if turn.turn == 0:
            return reply("Let me look first.", call(tool(turn, "bash"), command="git status --short; ls"))
        if turn.turn == 1:
            probe.look(f"{turn.protocol}:{turn.conversation}")  # the CLI runs, waiting for this reply
            edits = [Call(tool(turn, c.name), c.arguments) for c in golden_edits(turn)]
            return reply("Found it; fixing.", *edits)
        return answer("Fixed: the change is in place.")

    return script


def real_run(tmp_path_factory, agent: str, task: str, *overrides: str):
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    typed = to_typed(
        compose_config(
            [f"task={task}", f"agent={agent}", f"model={MODELS[agent]}", f"agent.api_key_env={KEY_ENV}", *overrides]
        )
    )
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    return asyncio.run(run_one(planned, session, run_dir=tmp_path_factory.mktemp("run")))


@pytest.fixture(scope="module")
def limit() -> LimitOnEvent:
    """The CLI agents' wall-clock limits in this module's runs (tests/wall_clock.py)."""
    return LimitOnEvent()


@pytest.fixture(scope="module")
def runs(docker_client, base_image, tmp_path_factory, limit):
    import engine.agents.cli as cli_agents
    from engine.runtimes.docker.runtime import DockerWorkspace

    probe, hung = Probe(), threading.Event()
    census: dict[str, str] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli_agents, "asyncio", limit)  # its wall-clock limits run out on the hang
        prices = tmp_path_factory.mktemp("prices") / "prices.yaml"
        prices.write_text(json.dumps({"models": PRICES}))
        mp.setenv("CRUCIBLE_PRICES", str(prices))
        mp.setenv(KEY_ENV, KEY)
        mp.setenv("CRUCIBLE_TERMINAL_SNAPSHOT_EVERY", "1")  # the tmux run's screens while it works
        executed, closing = DockerWorkspace.exec, DockerWorkspace.close

        async def exec(self, argv, **kwargs):  # the agent's container, for the probe
            if self.purpose == "agent" and probe.containers[-1:] != [self.container_id]:
                probe.containers.append(self.container_id)
            return await executed(self, argv, **kwargs)

        async def close(self):  # what of the agent's uid still runs when its workspace goes
            if self.purpose == "agent" and self.container_id and self.run_id not in census:
                census[self.run_id] = await left_running(self)
            await closing(self)

        mp.setattr(DockerWorkspace, "exec", exec)
        mp.setattr(DockerWorkspace, "close", close)
        with StandIn(fixer_script(probe, hung, limit), require_key=KEY) as api:
            url = f"agent.base_url={api.base_url}"
            made = {
                "claude_code": real_run(tmp_path_factory, "claude_code", TASK, url),
                "codex": real_run(tmp_path_factory, "codex", TASK, url),
                "timeout": real_run(
                    tmp_path_factory,
                    "claude_code",
                    "sample/snapshot_alias",
                    url,
                    f"agent.wall_timeout={WALL['timeout']}",
                ),
                # The CLIs' own tools denied: the run's MCP tools are all they have.
                "claude_code_bare": real_run(
                    tmp_path_factory, "claude_code", TASK, url, "attempt=1", "agent.builtin_tools.allow=[]"
                ),
                "codex_bare": real_run(
                    tmp_path_factory, "codex", TASK, url, "attempt=1", "agent.builtin_tools.allow=[]"
                ),
                # Claude Code's TUI in a private tmux server instead of its headless mode.
                "claude_code_tmux": real_run(
                    tmp_path_factory, "claude_code", TASK, url, "attempt=2", "agent.transport=tmux"
                ),
                "timeout_tmux": real_run(
                    tmp_path_factory,
                    "claude_code",
                    "sample/snapshot_alias",
                    url,
                    f"agent.wall_timeout={WALL['timeout_tmux']}",
                    "agent.transport=tmux",
                    "attempt=1",
                ),
                # Codex's TUI likewise (after the headless codex runs: the stand-in numbers its
                # conversations per model and task in the order they start).
                "codex_tmux": real_run(tmp_path_factory, "codex", TASK, url, "attempt=2", "agent.transport=tmux"),
                # A model call refused: Codex's TUI ends its turn with the error on screen.
                "model_error_codex_tmux": real_run(
                    tmp_path_factory, "codex", "sample/negative_money", url, "agent.transport=tmux"
                ),
                "timeout_codex_tmux": real_run(
                    tmp_path_factory,
                    "codex",
                    "sample/snapshot_alias",
                    url,
                    f"agent.wall_timeout={WALL['timeout_codex_tmux']}",
                    "agent.transport=tmux",
                    "attempt=1",
                ),
            }
            return made, api, probe, census


def stored_terminals(run_id: str) -> list:
    return DuckDBStore().terminals(run_id)


def stored_answer(run_id: str) -> str | None:
    return DuckDBStore().query(f"SELECT final_answer FROM runs WHERE run_id = '{run_id}'")[1][0][0]


def stored_steps(run_id: str) -> list[tuple]:
    from engine.store.duckdb import DuckDBStore

    return DuckDBStore().query(
        f"SELECT kind, capability, tool, is_error, tokens_in, tokens_out, cost_usd "
        f"FROM steps WHERE run_id = '{run_id}' ORDER BY position"
    )[1]


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_a_real_cli_fixes_a_sample_task_through_the_runs_mcp_tools_and_scores_1(runs, agent):
    made, api, _, _ = runs
    record = made[agent]
    assert (record.status, record.reward, record.stop_reason) == ("completed", 1.0, "done"), (
        record.error,
        record.warnings,
    )
    # The answer the CLI's result event carried, stored with the run.
    assert record.final_answer == "Fixed: the change is in place."
    assert stored_answer(record.run_id) == record.final_answer
    mcp_calls = [s.tool for s in record.steps if s.kind == "tool_call" and s.capability == "mcp"]
    assert mcp_calls[0] == "bash" and "str_replace_based_edit_tool" in mcp_calls
    assert all(not s.is_error for s in record.steps if s.kind == "tool_call"), record.steps


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_every_model_call_is_a_proxy_step_with_tokens_and_cost_in_the_store(runs, agent):
    made, api, _, _ = runs
    record = made[agent]
    steps = stored_steps(record.run_id)
    models = [s for s in steps if s[0] == "model"]
    protocol = "anthropic" if agent == "claude_code" else "responses"
    served = [e for e in api.exchanges if (e.protocol, e.task, e.conversation, e.status) == (protocol, TASK, 0, 200)]
    task_calls = [s for s in models if s[4] is not None and s[4] > 0]
    assert len(served) >= 3 and len(task_calls) >= len(served)
    price = PRICES[MODELS[agent]]
    for _, capability, _, is_error, tokens_in, tokens_out, cost in models:
        assert capability == "model_proxy" and not is_error
        assert cost == pytest.approx((tokens_in * price["input"] + tokens_out * price["output"]) / 1e6)
    usages = sorted((e.response["usage"]["input_tokens"], e.response["usage"]["output_tokens"]) for e in served)
    assert set(usages) <= {(s[4], s[5]) for s in models}
    assert not [w for w in record.warnings if w.startswith("cross-check")], record.warnings


@pytest.mark.parametrize("protocol", ["anthropic", "responses"])
def test_the_workspace_has_no_network_and_never_holds_the_key(runs, protocol):
    made, api, probe, _ = runs
    looked = {label: seen for label, seen in probe.seen.items() if label.startswith(f"{protocol}:")}
    assert len(looked) == 3  # headless, bare and tmux
    for seen in looked.values():
        assert seen["network_mode"] == "none" and seen["interfaces"] == ["lo"]
        assert seen["cli_environ"], "the probe must have seen the CLI's own environment"
        assert not seen["key_in_inspect"] and not seen["key_in_environ"] and seen["files_with_key"] == []
        assert ("mcpServers" if protocol == "anthropic" else "[mcp_servers.crucible]") in seen["config_files"]
    # ...while every request that reached the provider carried it, added by the host proxy.
    reached = [e for e in api.exchanges if e.protocol == protocol]
    assert reached and all(e.api_key == KEY for e in reached)


@pytest.mark.parametrize("name", ["timeout", "timeout_tmux", "timeout_codex_tmux"])
def test_a_cli_past_its_wall_clock_limit_ends_the_run_as_timeout_with_nothing_left_running(runs, limit, name):
    made, _, _, census = runs
    record = made[name]
    assert (record.status, record.error_phase, record.stop_reason) == ("timeout", "agent", "timeout"), record.error
    assert record.reward is None
    assert f"the CLI was killed at the wall-clock limit of {WALL[name]} s" in record.warnings, record.warnings
    assert limit.ran_out == ["event"] * 3, "each of the three ran out on its hang, none on its backstop"
    assert census[record.run_id] == "", f"left running as the agent's uid: {census[record.run_id]}"
    assert [s.kind for s in record.steps][:1] == ["model"]
    if name.endswith("_tmux"):  # its terminal failed, with why
        [terminal] = stored_terminals(record.run_id)
        assert (terminal.state, terminal.end_reason) == ("failed", f"killed at the wall-clock limit of {WALL[name]} s")


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_builtin_tools_denied_leaves_the_cli_only_the_runs_tools(runs, agent):
    made, api, _, _ = runs
    protocol = "anthropic" if agent == "claude_code" else "responses"
    model = MODELS[agent].split("/")[1]

    def offered(conversation: int) -> set[str]:
        return {
            name
            for e in api.exchanges
            if (e.protocol, e.model, e.task, e.conversation) == (protocol, model, TASK, conversation)
            for name in _tool_names(e.request)
        }

    assert made[f"{agent}_bare"].reward == 1.0, made[f"{agent}_bare"].warnings
    run_tools = {"bash", "str_replace_based_edit_tool"}
    short = {name.split("__")[-1].split(".")[-1] for name in offered(1)}
    unswitchable = set(ALWAYS_OFFERED) if agent == "codex" else set()
    assert run_tools <= short and short - run_tools <= unswitchable, offered(1)
    assert len(offered(0)) > len(offered(1)), "with its own tools allowed, the CLI offers more than the run's"


def _tool_names(request: dict) -> list[str]:
    names = []
    for tool in request.get("tools") or []:
        inner = tool.get("tools") if tool.get("type") == "namespace" else None
        names += [f"{tool['name']}.{t['name']}" for t in inner] if inner else [tool.get("name") or tool.get("type")]
    return names


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_a_clis_tui_in_tmux_fixes_the_task_with_its_tool_calls_read_from_its_transcript(runs, agent):
    made, api, _, census = runs
    record = made[f"{agent}_tmux"]
    assert (record.status, record.reward, record.stop_reason) == ("completed", 1.0, "done"), (
        record.error,
        record.warnings,
    )
    # The answer block the TUI showed last: not the narration before its tool calls, no panels or echo.
    assert record.final_answer == "Fixed: the change is in place."
    tools = [(s.capability, s.tool, s.is_error) for s in record.steps if s.kind == "tool_call"]
    assert tools[0] == ("mcp", "bash", False) and ("mcp", "str_replace_based_edit_tool", False) in tools, tools
    models = [s for s in record.steps if s.kind == "model"]
    assert models and all(s.capability == "model_proxy" and not s.is_error for s in models)
    # Each tool call sits between the model call that asked for it and the one that read its result.
    order = [s.kind for s in record.steps]
    assert order[0] == "model" and order[-1] == "model" and order.index("tool_call") < len(order) - 1
    assert not [w for w in record.warnings if w.startswith("cross-check")], record.warnings
    assert census[record.run_id] == "", f"left running as the agent's uid: {census[record.run_id]}"
    # Its pane is the run's terminal: ended normally (closing, within its retention), its final
    # snapshot the TUI's screen with the answer, periodic snapshots taken while it worked.
    [terminal] = stored_terminals(record.run_id)
    assert (terminal.state, terminal.end_reason, terminal.tmux_server) == (
        "closing",
        "done",
        f"crucible-{terminal.terminal_id}",
    ) and terminal.closes_at
    snapshots = DuckDBStore().terminal_snapshots(terminal.terminal_id)
    assert [s.final for s in snapshots][-1:] == [True] and "Fixed: the change is in place." in snapshots[-1].text
    assert any(not s.final and s.text for s in snapshots[:-1])
    protocol = "anthropic" if agent == "claude_code" else "responses"
    served = [
        e
        for e in api.exchanges
        if e.protocol == protocol
        and e.task == TASK
        and e.conversation is not None
        and e.conversation >= 2
        and _tool_names(e.request)
    ]
    assert len(served) >= 3 and all("stream" in e.request for e in served)


def test_a_model_error_in_codexs_tui_ends_the_run_as_a_model_error_at_once(runs):
    made, _, _, census = runs
    record = made["model_error_codex_tmux"]
    assert (record.status, record.stop_reason, record.reward) == ("completed", "model_error", 0.0), (
        record.error,
        record.warnings,
    )
    assert [w for w in record.warnings if w.startswith("codex: ") and "stand-in refuses this request" in w], (
        record.warnings
    )
    assert "codex's turn in its TUI ended as model_error" in record.warnings
    assert census[record.run_id] == ""
    [terminal] = stored_terminals(record.run_id)
    snapshots = DuckDBStore().terminal_snapshots(terminal.terminal_id)
    assert "■" in snapshots[-1].text and "stand-in refuses this request" in snapshots[-1].text


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_a_cli_run_cancelled_while_the_cli_waits_for_the_model_is_canceled_and_leaves_nothing(
    agent, docker_client, base_image, tmp_path, monkeypatch
):
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.records import new_run_id
    from engine.run.session import session_for
    from engine.runtimes.docker.reaper import LABEL_RUN_ID
    from engine.runtimes.docker.runtime import DockerWorkspace

    hung, census = threading.Event(), {}
    closing = DockerWorkspace.close

    async def close(self):
        if self.purpose == "agent" and self.container_id and self.run_id not in census:
            census[self.run_id] = await left_running(self)
        await closing(self)

    monkeypatch.setattr(DockerWorkspace, "close", close)
    monkeypatch.setenv(KEY_ENV, KEY)
    with StandIn(fixer_script(Probe(), hung), require_key=KEY) as api:
        typed = to_typed(
            compose_config(
                [
                    "task=sample/snapshot_alias",
                    f"agent={agent}",
                    f"model={MODELS[agent]}",
                    f"agent.api_key_env={KEY_ENV}",
                    f"agent.base_url={api.base_url}",
                    "attempt=9",
                ]
            )
        )
        session = session_for(typed)
        planned = plan(typed, builder=session.builder)
        run_id = new_run_id()

        async def scenario():
            task = asyncio.ensure_future(run_one(planned, session, run_dir=tmp_path / run_id, run_id=run_id))
            while not hung.is_set():
                assert not task.done(), task.result()
                await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 30)

        asyncio.run(scenario())
    _, rows = session.store.query(f"SELECT status, error_phase FROM runs WHERE run_id = '{run_id}'")
    assert rows == [("canceled", "agent")]
    assert census[run_id] == "", f"left running as the agent's uid: {census[run_id]}"
    assert docker_client.containers.list(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"}) == []


@pytest.mark.real_provider
@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_a_real_cli_against_its_real_provider_through_the_proxy(agent, docker_client, base_image, tmp_path_factory):
    """Where a real key is set: the CLI's default model, the provider's own API, through the
    proxy on the host (the workspace still has no network); whatever the model does, every call
    is a priced step and the run ends completed."""
    import os

    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    key_env = "ANTHROPIC_API_KEY" if agent == "claude_code" else "OPENAI_API_KEY"
    if not os.environ.get(key_env):
        pytest.skip(f"${key_env} is not set: no real call to the provider from here")
    typed = to_typed(compose_config([f"task={TASK}", f"agent={agent}", "agent.wall_timeout=600"]))
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    record = asyncio.run(run_one(planned, session, run_dir=tmp_path_factory.mktemp("real")))
    assert record.status == "completed", (record.error, record.warnings)
    models = [s for s in record.steps if s.kind == "model"]
    assert models and all(s.tokens_in and s.tokens_out and s.cost_usd is not None for s in models if not s.is_error)
