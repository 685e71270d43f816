"""Coding CLI agents' TUIs without Docker: their screens and records (Claude Code's answer, Codex's
idle and busy screens, its rollout's tool calls, answer and usage, and the per-call cross-check
with the proxy). The configs, the proxy and the event parsers are in test_cli_agents.py; the
real CLIs run in test_cli_agents_runs.py."""

from __future__ import annotations

import asyncio

import pytest

from engine.agents.cli import Event

# ---------------------------------------------------------------- the TUI's answer
# Claude Code 2.1.332's screen at the end of a tmux run (its terminal's final snapshot, from
# test_cli_agents_runs.py against the stand-in): narration, MCP calls collapsed to "Called crucible".
CLAUDE_SCREEN = """\
 ▐▛███▛█   Claude Code v2.1.332
▝▜██████▀  Sonnet 4.6 · API Usage Billing
 ▝▝   ▝▝   /app

❯ Our stock report loses rows. We have 45 items and show 20 per page: the report says "page 2 of 2"
  with stockroom.report.paginate raises PageError.

● Let me look first.

  Called crucible

● Found it; fixing.

  Called crucible

● Fixed: the change is in place.

✻ Cogitated for 29s · done 11:22 PM

────────────────────────────────────────────────────────────────────────────────
❯
────────────────────────────────────────────────────────────────────────────────
  ⏵⏵ bypass permissions on (shift+tab to cycle)
"""


def test_claude_codes_tui_answer_is_the_text_after_its_last_tool_call():
    from engine.agents.cli.claude_code import TUI
    from engine.agents.cli.tmux import TmuxPane

    async def capture(argv):
        return 0, CLAUDE_SCREEN

    pane = TmuxPane(capture, "unused", profile=TUI)
    prompt = "Our stock report loses rows. We have 45 items and show 20 per page"
    assert asyncio.run(pane.answer(prompt)) == "Fixed: the change is in place."


# Codex 0.171.0's screen at the end of a tmux run (test_cli_agents_runs.py against the stand-in),
# and while a model call is pending: its composer stays at the bottom while it works.
CODEX_SCREEN = """\
  >_ OpenAI Codex (v0.171.0)
     /app
  permissions: YOLO mode

› Our stock report loses rows. We have 45 items and show 20 per page: the report says "page 2 of 2", there is no next
  page after page 2.


• Let me look first.

• Called crucible.bash({"command":"git status --short; ls"})
  └ README.md
    pyproject.toml
    stockroom
    +1 line (^t to view transcript)

• Found it; fixing.

• Called
  └ crucible.str_replace_based_edit_tool({"command":"create","path":"/app/stockroom/report.py","file_text":"x"})
    File created successfully at: /app/stockroom/report.py

• Fixed: the change is in place.

  Worked for 1s • 02:04


› Ask Codex to do anything

  gpt-5 default · /app · Our stock report loses rows. We have 45 items and show 20 p…
  ← for agents · ? for shortcuts                                              ⚠ 1 warning · f2 to view
"""


CODEX_WORKING = """\
› Our stock report loses rows. We have 45 items and show 20 per page: the report says "page 2 of 2", there is no next

◦ Working (2s • esc to interrupt)


› Ask Codex to do anything

  gpt-5 default · /app · Our stock report loses rows. We have 45 items and show 20 p…
  ← for agents · ? for shortcuts
"""


CODEX_TRUST = """\
  Folder access
  /app

  Trust this folder? Codex can read, edit, and run files here, subject to your permission settings.

› 1. Trust and continue
  2. Back to Agent Command Center

  enter continue · esc back
"""


def test_codexs_tui_is_idle_only_at_its_empty_composer_without_a_working_line():
    from engine.agents.cli.codex import TUI
    from engine.agents.cli.tmux import TmuxPane

    pane = TmuxPane(None, "unused", profile=TUI)  # type: ignore[arg-type]
    assert pane.idle(CODEX_SCREEN.splitlines())
    assert not pane.idle(CODEX_WORKING.splitlines())  # the composer is shown, but a turn runs
    assert not pane.idle(CODEX_TRUST.splitlines())  # a chooser's "› 1." is not the composer


def test_codexs_tui_answer_is_the_text_after_its_last_tool_call():
    from engine.agents.cli.codex import TUI
    from engine.agents.cli.tmux import TmuxPane

    async def capture(argv):
        return 0, CODEX_SCREEN

    pane = TmuxPane(capture, "unused", profile=TUI)
    assert asyncio.run(pane.answer("Our stock report loses rows. We have 45 items")) == "Fixed: the change is in place."


def rollout(*lines: tuple[str, dict]) -> list[Event]:
    return [
        Event({"timestamp": f"2026-12-02T02:05:4{i}.000Z", "type": kind, "payload": payload}, float(i))
        for i, (kind, payload) in enumerate(lines)
    ]


def test_codexs_rollout_gives_its_tool_calls_answer_usage_and_per_call_tokens():
    from engine.agents.cli.codex import parse_rollout

    mcp_call = {
        "type": "function_call",
        "name": "bash",
        "namespace": "mcp__crucible",
        "arguments": '{"command": "ls"}',
        "call_id": "c1",
    }
    parsed = parse_rollout(
        rollout(
            ("session_meta", {"id": "s1", "cwd": "/app"}),
            (
                "response_item",
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Look"}]},
            ),
            ("response_item", mcp_call),
            ("token_usage_record", {"usage": {"input_tokens": 100, "output_tokens": 7}}),
            (
                "event_msg",
                {
                    "type": "item_completed",
                    "item": {
                        "type": "McpToolCall",
                        "id": "c1",
                        "server": "crucible",
                        "tool": "bash",
                        "status": "completed",
                        "result": {"content": [{"type": "text", "text": "a\n"}]},
                    },
                },
            ),
            (
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [{"type": "input_text", "text": "Wall time: 0.1 s"}],
                },
            ),
            (
                "response_item",
                {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "false"}', "call_id": "c2"},
            ),
            ("token_usage_record", {"usage": {"input_tokens": 120, "output_tokens": 3}}),
            (
                "event_msg",
                {
                    "type": "token_count",
                    "info": {"total_token_usage": {"input_tokens": 220, "cached_input_tokens": 0, "output_tokens": 10}},
                },
            ),
            ("event_msg", {"type": "task_complete", "last_agent_message": "Done."}),
        )
    )
    assert (parsed.session_id, parsed.finished, parsed.answer) == ("s1", True, "Done.")
    assert [(s.tool, s.capability, s.arguments, s.result, s.is_error) for _, s in parsed.tool_steps] == [
        ("bash", "mcp", {"command": "ls"}, "a\n", False),
        ("exec_command", "builtin", {"cmd": "false"}, None, True),
    ]  # no output recorded: not a success
    assert parsed.usage == {"input": 220, "output": 10, "cached_input": 0}
    assert parsed.calls == [(100, 7), (120, 3)]
    assert not parse_rollout(rollout(("session_meta", {"id": "s2"}))).finished


def test_the_per_call_cross_check_ignores_the_clis_side_calls_but_names_a_call_it_counted_alone():
    from engine.agents.cli import cross_check_calls
    from engine.models import Step

    def step(i: int, o: int) -> Step:
        return Step(idx=0, kind="model", tokens_in=i, tokens_out=o, arguments={"model": "m"})

    assert cross_check_calls([(100, 7)], [step(100, 7), step(40, 5)], "m") == []  # (40, 5): a title call
    assert cross_check_calls([(100, 7), (100, 7)], [step(100, 7)], "m") == [
        "cross-check: the CLI counts a call of 100 input and 7 output tokens to m that the model proxy did not record"
    ]


def test_an_idle_codex_screen_ends_the_turn_only_once_its_rollout_says_so():
    """Its TUI shows no busy line while an MCP call runs or between a tool result and the next
    model reply: a stable idle screen alone is not the end of its turn."""
    from engine.agents.cli.codex import TUI, turn_ended
    from engine.agents.cli.tmux import TmuxPane

    async def capture(argv):
        return 0, CODEX_SCREEN  # has-session and capture-pane alike

    record: list[Event] = rollout(("session_meta", {"id": "s1"}))
    asked = []

    async def over() -> bool:
        asked.append(1)
        if len(asked) == 3:
            record.extend(rollout(("event_msg", {"type": "task_complete", "last_agent_message": "Done."})))
        return turn_ended(record)

    pane = TmuxPane(capture, "unused", profile=TUI, poll=0.01)
    with pytest.raises(TimeoutError):
        asyncio.run(pane.wait_done(0.5, stable=0.05, over=lambda: asyncio.sleep(0, result=False)))
    asyncio.run(pane.wait_done(5, stable=0.05, over=over))
    assert len(asked) == 3


def test_codexs_rollout_ending_with_a_model_error_is_a_model_error():
    from engine.agents.cli.codex import parse_rollout

    # As 0.171 wrote it when the stand-in refused its first call with a 400: the body as the message.
    body = '{"error": {"message": "stand-in refuses this request", "type": "invalid_request_error"}}'
    parsed = parse_rollout(
        rollout(("event_msg", {"type": "task_complete", "last_agent_message": None, "error": {"message": body}}))
    )
    assert (parsed.stop_reason, parsed.answer) == ("model_error", "")
    assert parsed.warnings == [f"codex: {body}"]
