"""The tmux provider contract (seed 001), against a deterministic fake TUI (tests/fake_tui/
fake_cli.py) over real tmux: launch (cwd, size, history, trust answered), multi-turn memory
with a canary not re-sent, tmux-loss continuation by the CLI's session id, a literal @handle,
a stale draft never submitted, a live steer into the same turn, cancellation that is not a
completion and leaves the pane reusable, the false-idle trap of a slow tool, the newest answer
extracted with old turns, tool panels and echoes present, a crash, parallel panes kept apart, and
a real MCP tool call through the run's server that becomes a step of the run.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
import uuid
from pathlib import Path

import pytest

from engine.agents.cli import session_events
from engine.agents.cli.claude_code import parse_stream
from engine.agents.cli.tmux import TmuxPane, TuiError
from engine.capabilities.mcp_server import McpService

FAKE = Path(__file__).resolve().parents[1] / "fake_tui" / "fake_cli.py"

pytestmark = pytest.mark.slow  # each turn waits for the screen to be stable (~1 s)


async def host_run(argv) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", "replace")


class Fake:
    """A fake CLI in its own private tmux server."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = tmp_path / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.cwd = tmp_path / "repo"
        self.cwd.mkdir(exist_ok=True)
        self.pane = TmuxPane(host_run, f"crucible-test-{uuid.uuid4().hex[:8]}")

    async def start(self, *extra: str) -> TmuxPane:
        # Its stderr kept in a file (it writes nothing there while well): a CLI that exits before
        # it is ready takes its tmux session, and so what it said, with it.
        said = self.state / "stderr"
        argv = [sys.executable, str(FAKE), "--state", str(self.state), *extra]
        await self.pane.start(["bash", "-c", 'exec "$@" 2>>"$0"', str(said), *argv], cwd=str(self.cwd))
        try:
            await self.pane.wait_ready(20)
        except TuiError as exc:
            text = said.read_text(errors="replace")[-2000:] if said.exists() else ""
            raise TuiError(f"{exc}; its stderr: {text or '(nothing)'}") from exc
        return self.pane

    async def session_id(self) -> str:
        match = re.search(r"session: (\w+)", "\n".join(await self.pane.screen(history=True)))
        assert match
        return match.group(1)


def drive(tmp_path: Path, body):
    async def go():
        fake = Fake(tmp_path)
        try:
            return await body(fake)
        finally:
            await fake.pane.kill()

    return asyncio.run(go())


def test_launch_runs_in_the_runs_cwd_with_a_fixed_size_and_history_and_answers_the_trust_prompt(tmp_path):
    async def body(fake):
        pane = await fake.start()
        size = await pane.tmux("display-message", "-p", "-t", pane.session, "#{window_width}x#{window_height}")
        history = await pane.tmux("show-options", "-g", "history-limit")
        screen = "\n".join(await pane.screen())
        return size.strip(), history.strip(), screen

    size, history, screen = drive(tmp_path, body)
    assert size == "160x48" and history == "history-limit 50000"
    assert f"cwd: {tmp_path / 'repo'}" in screen and "(y/n) y" in screen


def test_multi_turn_memory_recalls_a_canary_that_is_not_sent_again(tmp_path):
    canary = f"canary-{uuid.uuid4().hex[:8]}"

    async def body(fake):
        pane = await fake.start()
        first = await pane.turn(f"remember {canary}", 20)
        second = await pane.turn("recall", 20)
        return first, second

    first, second = drive(tmp_path, body)
    assert first == "Noted." and second == f"You asked me to remember {canary}."


def test_a_lost_tmux_server_continues_the_session_by_its_id(tmp_path):
    canary = f"canary-{uuid.uuid4().hex[:8]}"

    async def body(fake):
        pane = await fake.start()
        await pane.turn(f"remember {canary}", 20)
        session = await fake.session_id()
        await pane.kill()
        assert not await pane.alive()
        fresh = Fake(tmp_path)
        try:
            pane = await fresh.start("--resume", session)
            return await pane.turn("recall", 20)
        finally:
            await fresh.pane.kill()

    assert drive(tmp_path, body) == f"You asked me to remember {canary}."


def test_a_literal_at_handle_is_text(tmp_path):
    async def body(fake):
        return await (await fake.start()).turn("say @fixyo.urflow please", 20)

    assert drive(tmp_path, body) == "You said: say @fixyo.urflow please"


def test_a_stale_draft_is_cleared_and_only_the_new_turn_is_submitted(tmp_path):
    async def body(fake):
        pane = await fake.start()
        await pane.tmux("send-keys", "-t", pane.session, "-l", "an old draft")
        return await pane.turn("the new turn", 20)

    answer = drive(tmp_path, body)
    assert answer == "You said: the new turn"


def test_a_live_steer_reaches_the_running_turn_of_the_same_session(tmp_path):
    async def body(fake):
        pane = await fake.start()
        # Its tool runs until the steer is in (a minute at most), however late a loaded machine
        # delivers it.
        await pane.submit("slow-until-steered 60")
        await asyncio.sleep(0.5)
        await pane.submit("also check the docs")
        await pane.wait_done(90)
        return await pane.answer("slow-until-steered 60"), await pane.tmux("list-sessions")

    answer, sessions = drive(tmp_path, body)
    assert answer.splitlines() == ["(steered) also check the docs", "The slow tool is done."]
    assert len(sessions.strip().splitlines()) == 1


def test_cancel_interrupts_the_turn_and_leaves_the_pane_prompt_ready_for_the_next(tmp_path):
    async def body(fake):
        pane = await fake.start()
        await pane.submit("slow 30")
        await asyncio.sleep(0.5)
        ready = await pane.cancel()
        screen = "\n".join(await pane.screen())
        after = await pane.turn("still there?", 20)
        return ready, screen, after, pane.poisoned

    ready, screen, after, poisoned = drive(tmp_path, body)
    assert ready and not poisoned and "Interrupted by user" in screen and "slow tool is done" not in screen
    assert after == "You said: still there?"


def test_a_slow_tool_showing_a_prompt_glyph_is_not_mistaken_for_the_end_of_the_turn(tmp_path):
    async def body(fake):
        pane = await fake.start()
        began = asyncio.get_running_loop().time()
        answer = await pane.turn("slow 3", 20)
        return answer, asyncio.get_running_loop().time() - began

    answer, took = drive(tmp_path, body)
    assert answer == "The slow tool is done." and took >= 3


def test_the_newest_answer_is_extracted_without_old_turns_tool_panels_or_echoes(tmp_path):
    async def body(fake):
        pane = await fake.start()
        await pane.turn("first question", 20)
        await pane.turn("slow 1", 20)
        return await pane.turn("first", 20)  # a prompt that is also the start of an old one

    assert drive(tmp_path, body) == "You said: first"


def test_a_crashed_cli_fails_the_turn(tmp_path):
    async def body(fake):
        pane = await fake.start()
        with pytest.raises(TuiError, match="exited"):  # seen while submitting or while waiting
            await pane.submit("crash")
            await pane.wait_done(10)
        return await pane.alive()

    assert drive(tmp_path, body) is False


def test_parallel_panes_have_their_own_servers_sessions_and_answers(tmp_path):
    async def body(_):
        fakes = [Fake(tmp_path / name) for name in ("a", "b")]
        try:
            panes = await asyncio.gather(*(f.start() for f in fakes))
            answers = await asyncio.gather(*(p.turn(f"I am {n}", 20) for p, n in zip(panes, "ab")))
            ids = [await f.session_id() for f in fakes]
            return answers, ids, {p.server for p in panes}
        finally:
            for fake in fakes:
                await fake.pane.kill()

    answers, ids, servers = drive(tmp_path, body)
    assert answers == ["You said: I am a", "You said: I am b"] and len(set(ids)) == 2 and len(servers) == 2


class BashTools:
    """The run's tools as a flavor serves them (``ToolSet``): a real bash in the repo, each call kept."""

    user, workdir = 0, "/"

    def __init__(self, cwd: Path) -> None:
        self.cwd, self.calls = cwd, []

    def specs(self) -> list[dict]:
        return [
            {
                "name": "bash",
                "description": "Run a shell command in the repository.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"command": {"type": "string"}},
                    "required": ["command"],
                },
            }
        ]

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        self.calls.append((name, arguments))
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            arguments["command"],
            cwd=self.cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await proc.communicate()
        return out.decode(), proc.returncode != 0


def test_a_real_mcp_tool_call_through_the_runs_server_becomes_a_step_of_the_run(tmp_path):
    token, socket_path = secrets.token_urlsafe(16), str(tmp_path / "mcp.sock")
    command = "pwd; echo from-the-run"

    async def body(fake):
        tools = BashTools(fake.cwd)
        service = McpService(token=token, also_uds=socket_path)  # the run's server, on the bridge's socket
        await service.serve(tools)
        try:
            pane = await fake.start("--mcp-socket", socket_path, "--mcp-token", token)
            answer = await pane.turn(f"call bash {json.dumps({'command': command})}", 30)
            screen = "\n".join(await pane.screen(history=True))
            session = await fake.session_id()
        finally:
            await service.close()
        # The session's transcript, read as claude_code reads Claude Code's own (its tool calls).
        events = session_events((fake.state / f"{session}.jsonl").read_bytes())
        return answer, tools.calls, parse_stream(events).tool_steps, screen

    answer, calls, steps, screen = drive(tmp_path, body)
    repo = str(tmp_path / "repo")
    assert calls == [("bash", {"command": command})]  # the server ran it, in the run's repo
    assert answer == f"The tool said: {repo}"  # the tool panel is not part of the answer
    assert "● mcp__crucible__bash(" in screen and f"⎿ {repo}" in screen
    [(_, step)] = steps
    assert (step.kind, step.capability, step.tool, step.arguments, step.is_error) == (
        "tool_call",
        "mcp",
        "bash",
        {"command": command},
        False,
    )
    assert step.result == f"{repo}\nfrom-the-run\n"
