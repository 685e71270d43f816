"""``claude_code``: Anthropic's Claude Code, headless, inside the workspace.

    claude -p PROMPT --output-format stream-json --verbose --model NAME
           --mcp-config FILE --strict-mcp-config --permission-mode MODE [--max-turns N]
           --tools ALLOWED --disallowedTools DENIED --allowedTools mcp__crucible

The run's tools are the MCP server ``crucible`` (a streamable-HTTP server on the container's
loopback, relayed to the bridge's ``mcp.sock``), the only one: ``--strict-mcp-config`` ignores
any other configuration (a repo's own ``.mcp.json`` included). The home directory is per run,
with onboarding and the repo's trust dialog pre-answered. ``ANTHROPIC_BASE_URL`` points at the
model relay; the key the CLI holds is a placeholder, replaced by the host proxy.

Events (one JSON object a line): ``system`` (init: session id, tools, MCP servers),
``assistant`` (text and ``tool_use`` blocks), ``user`` (``tool_result`` blocks), ``result``
(the final answer, turns, usage): the run is complete only with the ``result`` event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.agents import AgentContext
from engine.agents.cli import (
    CLI_ROOT,
    MCP_PORT,
    MODEL_PORT,
    PLACEHOLDER_KEY,
    CliAgent,
    CliAgentConfig,
    Event,
    Parsed,
    session_events,
    tool_step,
)
from engine.agents.cli.tmux import TuiProfile
from engine.errors import ConfigError

MCP_SERVER = "crucible"
BINARY = "/opt/crucible/claude-code/claude"
PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan", "default")
_STOPS = {
    "success": "done",
    "error_max_turns": "max_turns",
    "error_during_execution": "cli_error",
    "error_max_budget_usd": "max_budget",
}


@dataclass
class ClaudeCodeAgentConfig(CliAgentConfig):
    _target_: str = "engine.agents.cli.claude_code.ClaudeCodeAgent"
    name: str = "claude_code"


TUI = TuiProfile(
    ready=r"^❯\s*$",
    ready_within=3,
    busy=r"esc to interrupt",
    trust=r"Do you trust the files",
    trust_answer="1",
    pasted=r"\[Pasted text #\d+",
    echo=r"^❯ ",
    answer=r"^● ",
    tool_panel=r"^(● [\w:.-]+\(|\s*⎿|\s+Called \S+)",
    interrupted=r"Interrupted",
)
"""Claude Code's TUI: an input box (❯) between two rules, a status line under it, answers as
"● " blocks, tool calls as "● Tool(...)" with "⎿" result panels (2.1.332 collapses calls of an MCP
server to "  Called crucible"), "esc to interrupt" while busy."""


class ClaudeCodeAgent(CliAgent):
    config_schema = ClaudeCodeAgentConfig
    provider = "anthropic"
    key_header = "x-api-key"
    tui = TUI

    def __init__(self, name: str = "claude_code", model: str = "", **options: Any) -> None:
        super().__init__(name, model, **options)
        if self.permission_mode not in PERMISSION_MODES:
            raise ConfigError(
                f"agent {name}: permission_mode {self.permission_mode!r} is not one of {', '.join(PERMISSION_MODES)}"
            )

    def command(self, ctx: AgentContext, mcp_token: str) -> tuple[list[str], dict[str, str], dict[str, str]]:
        home = f"{CLI_ROOT}/home"
        mcp_config = f"{CLI_ROOT}/mcp.json"
        headless = ["-p", ctx.prompt, "--output-format", "stream-json", "--verbose"]
        argv = [
            BINARY,
            *(headless if self.transport == "headless" else []),
            "--model",
            self.model_name,
            "--mcp-config",
            mcp_config,
            "--strict-mcp-config",
            "--permission-mode",
            self.permission_mode,
            "--allowedTools",
            f"mcp__{MCP_SERVER}",
        ]
        if self.max_turns is not None:
            argv += ["--max-turns", str(self.max_turns)]
        allow, deny = self.builtin_tools.allow, self.builtin_tools.deny
        argv += ["--tools", "default" if allow == ["*"] else ",".join(allow)]
        if deny:
            argv += ["--disallowedTools", ",".join(deny)]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "LANG": "C.UTF-8",
            "USER": "agent",
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{MODEL_PORT}",
            "ANTHROPIC_API_KEY": PLACEHOLDER_KEY,
            # Side calls (titles, summaries) go to the run's model, so every call is one the price
            # table knows; nothing else leaves (there is no network; this keeps it from trying).
            "ANTHROPIC_SMALL_FAST_MODEL": self.model_name,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": self.model_name,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
            # The run's tools are offered up front, not deferred behind a ToolSearch round trip.
            "ENABLE_TOOL_SEARCH": "false",
        }
        servers = {
            MCP_SERVER: {
                "type": "http",
                "url": f"http://127.0.0.1:{MCP_PORT}/mcp/",
                "headers": {"Authorization": f"Bearer {mcp_token}"},
            }
        }
        if self.transport == "tmux":
            env["TERM"] = "xterm-256color"
        # The TUI asks once whether to use a key found in the environment: the placeholder is
        # approved by its last 20 characters, as the CLI records the answer.
        state = {
            "hasCompletedOnboarding": True,
            "bypassPermissionsModeAccepted": True,
            "customApiKeyResponses": {"approved": [PLACEHOLDER_KEY[-20:]], "rejected": []},
            "projects": {ctx.workdir: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
        }
        files = {mcp_config: json.dumps({"mcpServers": servers}), f"{home}/.claude.json": json.dumps(state)}
        return argv, env, files

    def parse(self, events: list[Event]) -> Parsed:
        return parse_stream(events)

    async def transcript(self, ctx: AgentContext, env: dict[str, str]) -> list[Event]:
        """The session's JSONL under ``~/.claude/projects``: the same messages as stream-json."""
        assert ctx.workspace is not None
        result = await ctx.workspace.exec(
            ["sh", "-c", 'cat "$HOME"/.claude/projects/*/*.jsonl 2>/dev/null; true'],
            user=ctx.uid,
            env={"HOME": env["HOME"], "PATH": env["PATH"]},
            timeout=60,
            max_output=64 << 20,
        )
        return session_events(result.stdout)


def parse_stream(events: list[Event]) -> Parsed:
    """Steps, answer and end of a ``claude -p --output-format stream-json --verbose`` run."""
    parsed = Parsed()
    calls: dict[str, tuple[float, str, object]] = {}
    results: dict[str, tuple[str, bool]] = {}
    for event in events:
        data = event.data
        kind = data.get("type")
        parsed.session_id = data.get("session_id") or parsed.session_id
        if kind == "system" and data.get("subtype") == "init":
            failed = [
                s.get("name")
                for s in data.get("mcp_servers") or []
                if isinstance(s, dict) and s.get("status") not in ("connected", None)
            ]
            if failed:
                parsed.warnings.append(f"MCP servers not connected at start: {failed}")
        elif kind == "assistant":
            for block in _content(data):
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = (event.at, str(block.get("name")), block.get("input"))
        elif kind == "user":
            for block in _content(data):
                if block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = (
                        _result_text(block.get("content")),
                        bool(block.get("is_error")),
                    )
        elif kind == "result":
            parsed.finished = True
            parsed.answer = str(data.get("result") or "")
            parsed.stop_reason = _STOPS.get(str(data.get("subtype")), "cli_error")
            if data.get("is_error") and parsed.stop_reason == "done":
                parsed.stop_reason = "model_error"
            parsed.usage = _usage(data.get("usage"))
    for call_id, (at, name, arguments) in calls.items():
        text, is_error = results.get(call_id, (None, True))
        capability = "mcp" if name.startswith(f"mcp__{MCP_SERVER}__") else "builtin"
        tool = name.removeprefix(f"mcp__{MCP_SERVER}__")
        parsed.tool_steps.append(tool_step(at, tool, arguments, text, is_error, capability))
    return parsed


def _content(data: dict[str, Any]) -> list[dict[str, Any]]:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def _usage(raw: object) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    fresh = raw.get("input_tokens") or 0
    read, write = raw.get("cache_read_input_tokens") or 0, raw.get("cache_creation_input_tokens") or 0
    return {"input": fresh + read + write, "output": raw.get("output_tokens") or 0, "cached_input": read}
