"""``codex``: OpenAI's Codex CLI inside the workspace, headless or its TUI in tmux.

    CODEX_HOME=<per run> codex exec --json --strict-config --skip-git-repo-check
        --dangerously-bypass-approvals-and-sandbox -C WORKDIR [--disable shell_tool] PROMPT

Everything else is in the per-run ``CODEX_HOME/config.toml``: the model, a model provider
``crucible`` whose ``base_url`` is the model relay on the container's loopback (OpenAI
Responses API, no key: the host proxy adds it), and ``[mcp_servers.crucible]``, the run's
tools as a streamable-HTTP server whose bearer token comes from the environment. The
container is the sandbox (no network, the agent's uid), so Codex's own sandbox is bypassed.

Events (``--json``, one object a line): ``thread.started`` (the session id), ``turn.started``,
``item.started`` / ``item.completed`` (agent messages, MCP tool calls, commands, file changes),
``turn.completed`` (usage) or ``turn.failed`` / ``error``: the run is complete only with
``turn.completed``.

Under ``transport=tmux`` the same binary runs its TUI (no ``exec``, no prompt: it is pasted),
``--no-alt-screen --no-daemon``, the repo trusted in ``config.toml``; its steps come from the
session's rollout JSONL (``parse_rollout``). What its screen looks like: ``TUI`` below and
docs/cli_agents.md.
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
    CliAgent,
    CliAgentConfig,
    Event,
    Parsed,
    session_events,
    tool_step,
)
from engine.agents.cli.tmux import Over, TuiProfile
from engine.errors import ConfigError
from engine.models import Step

MCP_SERVER = "crucible"
BINARY = "/opt/crucible/codex/codex"
TOKEN_ENV = "CRUCIBLE_MCP_TOKEN"
DISABLED_FEATURES = ("enable_request_compression",)
"""Request compression is for OpenAI's own endpoint; the proxy and gateways read plain JSON."""
BUILTIN_FEATURES = ("shell_tool", "goals", "multi_agent")
"""Codex's own tools that ``builtin_tools.allow: []`` switches off (its shell, its goal
tracking, its sub-agents; web search too, by config)."""
ALWAYS_OFFERED = (
    "view_image",
    "request_user_input",
    "list_mcp_resources",
    "list_mcp_resource_templates",
    "read_mcp_resource",
)
"""Codex's own tools that no switch of 0.171 removes; none reaches outside the workspace."""
_TOOL_ITEMS = {"mcp_tool_call", "command_execution", "file_change", "web_search"}


@dataclass
class CodexAgentConfig(CliAgentConfig):
    _target_: str = "engine.agents.cli.codex.CodexAgent"
    name: str = "codex"
    permission_mode: str = "never"
    """Codex's approval policy; only ``never`` works (nobody answers, headless or in tmux)."""


TUI = TuiProfile(
    ready=r"^›(?!\s*\d+\.\s)",
    ready_within=3,
    busy=r"esc to interrupt",
    trust=r"Trust this folder\?",
    trust_answer="1",
    pasted=r"\[Pasted",
    echo=r"^› ",
    answer=r"^• ",
    tool_panel=r"^(• Called|\s*└)",
)
"""Codex 0.171's TUI (seen in tmux): the composer "› " (a placeholder when empty) with a model line
and a footer under it, shown while it works too, with "• Working (Ns • esc to interrupt)" above
it; a chooser's "› 1. ..." is not the composer; answers as "• " blocks, tool calls as "• Called
server.tool(...)" with "└" result panels."""


class CodexAgent(CliAgent):
    config_schema = CodexAgentConfig
    provider = "openai"
    key_header = "authorization"
    tui = TUI

    def __init__(self, name: str = "codex", model: str = "", **options: Any) -> None:
        super().__init__(name, model, **options)
        if self.permission_mode != "never":
            raise ConfigError(
                f"agent {name}: permission_mode {self.permission_mode!r}: codex runs "
                "unattended (headless or in tmux), where only 'never' (no approvals asked) can work"
            )
        if self.max_turns is not None:
            raise ConfigError(
                f"agent {name}: max_turns is not a limit codex has; leave it unset (agent.wall_timeout bounds the run)"
            )
        allow, deny = self.builtin_tools.allow, self.builtin_tools.deny
        if allow not in (["*"], []) or deny not in ([], ["shell"]):
            raise ConfigError(
                f"agent {name}: builtin_tools can only allow ['*'] or [] and deny [] or ['shell'] "
                "for codex (its own tools switch off together, or its shell alone)"
            )

    def command(self, ctx: AgentContext, mcp_token: str) -> tuple[list[str], dict[str, str], dict[str, str]]:
        home = f"{CLI_ROOT}/codex-home"
        if self.transport == "tmux":
            argv = [
                BINARY,
                "--strict-config",
                "--dangerously-bypass-approvals-and-sandbox",
                "--no-alt-screen",
                "--no-daemon",
                "-C",
                ctx.workdir,
            ]
        else:
            argv = [
                BINARY,
                "exec",
                "--json",
                "--strict-config",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "--color",
                "never",
                "-C",
                ctx.workdir,
            ]
        for feature in DISABLED_FEATURES:
            argv += ["--disable", feature]
        if self.builtin_tools.allow == []:
            for feature in BUILTIN_FEATURES:
                argv += ["--disable", feature]
        elif self.builtin_tools.deny == ["shell"]:
            argv += ["--disable", "shell_tool"]
        if self.transport == "headless":
            argv += ["--", ctx.prompt]
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": f"{CLI_ROOT}/home",
            "LANG": "C.UTF-8",
            "USER": "agent",
            "CODEX_HOME": home,
            TOKEN_ENV: mcp_token,
        }
        if self.transport == "tmux":
            env["TERM"] = "xterm-256color"
        return argv, env, {f"{home}/config.toml": self.config_toml(ctx.workdir)}

    def config_toml(self, workdir: str = "") -> str:
        lines = [
            f"model = {_toml(self.model_name)}",
            'model_provider = "crucible"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            *(['web_search = "disabled"'] if self.builtin_tools.allow == [] else []),
            "",
            "[model_providers.crucible]",
            'name = "crucible model proxy"',
            f'base_url = "http://127.0.0.1:{MODEL_PORT}/v1"',
            'wire_api = "responses"',
            "",
            f"[mcp_servers.{MCP_SERVER}]",
            f'url = "http://127.0.0.1:{MCP_PORT}/mcp/"',
            f"bearer_token_env_var = {_toml(TOKEN_ENV)}",
        ]
        if self.transport == "tmux" and workdir:
            lines += ["", f"[projects.{_toml(workdir)}]", 'trust_level = "trusted"']
        return "\n".join(lines) + "\n"

    def parse(self, events: list[Event]) -> Parsed:
        return parse_rollout(events) if self.transport == "tmux" else parse_stream(events)

    def turn_over(self, ctx: AgentContext, env: dict[str, str]) -> Over:
        """Its TUI shows no busy line between a tool's result and the next model reply (nor while
        an MCP call runs: "• Calling ..."), so an idle screen is a turn's end only once the
        rollout has it: ``task_complete`` (which a failed model call ends with too)."""

        async def over() -> bool:
            return turn_ended(await self.transcript(ctx, env))

        return over

    async def transcript(self, ctx: AgentContext, env: dict[str, str]) -> list[Event]:
        """The session's rollout JSONL under ``$CODEX_HOME/sessions/YYYY/MM/DD/``."""
        assert ctx.workspace is not None
        result = await ctx.workspace.exec(
            [
                "sh",
                "-c",
                'find "$CODEX_HOME/sessions" -name "rollout-*.jsonl" -type f -exec cat {} + 2>/dev/null; true',
            ],
            user=ctx.uid,
            env={"CODEX_HOME": env["CODEX_HOME"], "PATH": env["PATH"]},
            timeout=60,
            max_output=64 << 20,
        )
        return session_events(result.stdout)


def _toml(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def parse_stream(events: list[Event]) -> Parsed:
    """Steps, answer and end of a ``codex exec --json`` run."""
    parsed = Parsed()
    started: dict[str, float] = {}
    totals = {"input": 0, "output": 0, "cached_input": 0}
    for event in events:
        data = event.data
        kind = data.get("type")
        item: dict[str, Any] = data["item"] if isinstance(data.get("item"), dict) else {}
        if kind == "thread.started":
            parsed.session_id = data.get("thread_id")
        elif kind == "item.started":
            started[str(item.get("id"))] = event.at
        elif kind == "item.completed":
            if item.get("type") == "agent_message":
                parsed.answer = str(item.get("text") or "")
            elif item.get("type") in _TOOL_ITEMS:
                parsed.tool_steps.append(_tool(item, started.get(str(item.get("id")), event.at)))
        elif kind == "turn.completed":
            parsed.finished, parsed.stop_reason = True, "done"
            usage: dict[str, Any] = data["usage"] if isinstance(data.get("usage"), dict) else {}
            for key, name in (
                ("input", "input_tokens"),
                ("output", "output_tokens"),
                ("cached_input", "cached_input_tokens"),
            ):
                totals[key] += int(usage.get(name) or 0)
            parsed.usage = dict(totals)
        elif kind in ("turn.failed", "error"):
            parsed.finished, parsed.stop_reason = False, "model_error"
            error: dict[str, Any] = data["error"] if isinstance(data.get("error"), dict) else data
            parsed.warnings.append(f"codex: {str(error.get('message') or error)[:500]}")
    return parsed


def _tool(item: dict[str, Any], at: float) -> tuple[float, Step]:
    kind = item.get("type")
    failed = item.get("status") == "failed"
    if kind == "mcp_tool_call":
        result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
        text = "".join(str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, dict))
        error = item.get("error")
        if error:
            text = str(error.get("message") if isinstance(error, dict) else error)
        name = str(item.get("tool"))
        capability = "mcp" if item.get("server") == MCP_SERVER else f"mcp:{item.get('server')}"
        return tool_step(at, name, item.get("arguments"), text, failed or bool(error), capability)
    if kind == "command_execution":
        failed = failed or item.get("exit_code") not in (0, None)
        return tool_step(
            at, "shell", {"command": item.get("command")}, item.get("aggregated_output"), failed, "builtin"
        )
    return tool_step(
        at, str(kind), {k: v for k, v in item.items() if k not in ("id", "type", "status")}, None, failed, "builtin"
    )


def turn_ended(events: list[Event]) -> bool:
    """Whether the rollout records the end of a turn (``task_complete``, also when it failed)."""
    return any(
        e.data.get("type") == "event_msg"
        and isinstance(e.data.get("payload"), dict)
        and e.data["payload"].get("type") == "task_complete"
        for e in events
    )


def parse_rollout(events: list[Event]) -> Parsed:  # noqa: C901 (one branch per event kind of the rollout file)
    """Steps, answer and end of a session as Codex's rollout JSONL records it (the tmux transport):
    ``{"timestamp", "type", "payload"}`` lines; ``response_item`` holds the model's messages and
    its ``function_call`` / ``custom_tool_call`` items with their outputs, ``event_msg`` the
    turn's events: ``item_completed`` (an ``McpToolCall`` with its result and status),
    ``token_count`` (the session's running totals), ``task_complete`` (the last answer)."""
    parsed = Parsed(calls=[])
    assert parsed.calls is not None
    calls: dict[str, tuple[float, str, str, object]] = {}
    outputs: dict[str, str] = {}
    mcp: dict[str, tuple[str, bool]] = {}
    for event in events:
        kind, payload = event.data.get("type"), event.data.get("payload")
        if not isinstance(payload, dict):
            continue
        inner = payload.get("type")
        if kind == "session_meta":
            parsed.session_id = str(payload.get("id") or "") or parsed.session_id
        elif kind == "response_item" and inner in ("function_call", "custom_tool_call"):
            arguments = payload.get("arguments") if inner == "function_call" else {"input": payload.get("input")}
            calls[str(payload.get("call_id"))] = (
                event.at,
                str(payload.get("name")),
                str(payload.get("namespace") or ""),
                _json_or_text(arguments),
            )
        elif kind == "response_item" and inner in ("function_call_output", "custom_tool_call_output"):
            outputs[str(payload.get("call_id"))] = _output_text(payload.get("output"))
        elif kind == "event_msg" and inner == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "McpToolCall":
                mcp[str(item.get("id"))] = _mcp_result(item)
        elif kind == "token_usage_record" and isinstance(payload.get("usage"), dict):
            parsed.calls.append(
                (int(payload["usage"].get("input_tokens") or 0), int(payload["usage"].get("output_tokens") or 0))
            )
        elif kind == "event_msg" and inner == "token_count":
            info = payload.get("info")
            totals = info.get("total_token_usage") if isinstance(info, dict) else None
            if isinstance(totals, dict):
                parsed.usage = {
                    "input": int(totals.get("input_tokens") or 0),
                    "output": int(totals.get("output_tokens") or 0),
                    "cached_input": int(totals.get("cached_input_tokens") or 0),
                }
        elif kind == "event_msg" and inner == "task_complete":  # the turn's end, with its error if it failed
            parsed.finished, parsed.stop_reason = True, "done"
            parsed.answer = str(payload.get("last_agent_message") or "")
            error = payload.get("error")
            if error:
                parsed.stop_reason = "model_error"
                parsed.warnings.append(
                    f"codex: {str(error.get('message') if isinstance(error, dict) else error)[:500]}"
                )
        elif kind == "event_msg" and inner in ("error", "stream_error"):
            parsed.warnings.append(f"codex: {str(payload.get('message') or payload)[:500]}")
    for call_id, (at, name, namespace, arguments) in calls.items():
        if call_id in mcp or namespace.startswith("mcp__"):
            server = namespace.removeprefix("mcp__")
            text, is_error = mcp.get(call_id, (outputs.get(call_id), call_id not in outputs))
            capability = "mcp" if server == MCP_SERVER else f"mcp:{server}"
            parsed.tool_steps.append(tool_step(at, name, arguments, text, is_error, capability))
        else:
            parsed.tool_steps.append(
                tool_step(at, name, arguments, outputs.get(call_id), call_id not in outputs, "builtin")
            )
    return parsed


def _json_or_text(value: object) -> object:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _output_text(output: object) -> str:
    if isinstance(output, list):
        return "\n".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    if isinstance(output, dict):
        return str(output.get("content") or output)
    return str(output or "")


def _mcp_result(item: dict[str, Any]) -> tuple[str, bool]:
    result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
    text = "".join(str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, dict))
    error = item.get("error")
    if error:
        text = str(error.get("message") if isinstance(error, dict) else error)
    failed = item.get("status") != "completed" or bool(error) or bool(result.get("isError") or result.get("is_error"))
    return text, failed
