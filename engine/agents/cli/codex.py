"""``codex``: OpenAI's Codex CLI, headless, inside the workspace.

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
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from engine.agents import AgentContext
from engine.agents.cli import (
    CLI_ROOT,
    MCP_PORT,
    MODEL_PORT,
    CliAgent,
    CliAgentConfig,
    Event,
    Parsed,
    tool_step,
)
from engine.errors import ConfigError

MCP_SERVER = "crucible"
BINARY = "/opt/crucible/codex/codex"
TOKEN_ENV = "CRUCIBLE_MCP_TOKEN"
DISABLED_FEATURES = ("enable_request_compression",)
"""Request compression is for OpenAI's own endpoint; the proxy and gateways read plain JSON."""
BUILTIN_FEATURES = ("shell_tool", "goals", "multi_agent")
"""Codex's own tools that ``builtin_tools.allow: []`` switches off (its shell, its goal
tracking, its sub-agents; web search too, by config)."""
ALWAYS_OFFERED = ("view_image", "request_user_input", "list_mcp_resources", "list_mcp_resource_templates",
                  "read_mcp_resource")
"""Codex's own tools that no switch of 0.171 removes; none reaches outside the workspace."""
_TOOL_ITEMS = {"mcp_tool_call", "command_execution", "file_change", "web_search"}


@dataclass
class CodexAgentConfig(CliAgentConfig):
    _target_: str = "engine.agents.cli.codex.CodexAgent"
    name: str = "codex"
    permission_mode: str = "never"
    """Codex's approval policy; only ``never`` works headless (nobody answers)."""


class CodexAgent(CliAgent):
    config_schema = CodexAgentConfig
    provider = "openai"
    key_header = "authorization"

    def __init__(self, name: str = "codex", model: str = "", **options) -> None:
        super().__init__(name, model, **options)
        if self.permission_mode != "never":
            raise ConfigError(f"agent {name}: permission_mode {self.permission_mode!r}: codex exec runs "
                              "headless, where only 'never' (no approvals asked) can work")
        if self.max_turns is not None:
            raise ConfigError(f"agent {name}: max_turns is not a limit codex has; leave it unset "
                              "(agent.wall_timeout bounds the run)")
        allow, deny = self.builtin_tools.allow, self.builtin_tools.deny
        if allow not in (["*"], []) or deny not in ([], ["shell"]):
            raise ConfigError(f"agent {name}: builtin_tools can only allow ['*'] or [] and deny [] or ['shell'] "
                              "for codex (its own tools switch off together, or its shell alone)")

    def command(self, ctx: AgentContext, mcp_token: str) -> tuple[list[str], dict[str, str], dict[str, str]]:
        home = f"{CLI_ROOT}/codex-home"
        argv = [BINARY, "exec", "--json", "--strict-config", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--color", "never", "-C", ctx.workdir]
        for feature in DISABLED_FEATURES:
            argv += ["--disable", feature]
        if self.builtin_tools.allow == []:
            for feature in BUILTIN_FEATURES:
                argv += ["--disable", feature]
        elif self.builtin_tools.deny == ["shell"]:
            argv += ["--disable", "shell_tool"]
        argv += ["--", ctx.prompt]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": f"{CLI_ROOT}/home", "LANG": "C.UTF-8",
               "USER": "agent", "CODEX_HOME": home, TOKEN_ENV: mcp_token}
        return argv, env, {f"{home}/config.toml": self.config_toml()}

    def config_toml(self) -> str:
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
        return "\n".join(lines) + "\n"

    def parse(self, events: list[Event]) -> Parsed:
        return parse_stream(events)


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
        item: dict = data["item"] if isinstance(data.get("item"), dict) else {}
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
            usage: dict = data["usage"] if isinstance(data.get("usage"), dict) else {}
            for key, name in (("input", "input_tokens"), ("output", "output_tokens"),
                              ("cached_input", "cached_input_tokens")):
                totals[key] += int(usage.get(name) or 0)
            parsed.usage = dict(totals)
        elif kind in ("turn.failed", "error"):
            parsed.finished, parsed.stop_reason = False, "model_error"
            error: dict = data["error"] if isinstance(data.get("error"), dict) else data
            parsed.warnings.append(f"codex: {str(error.get('message') or error)[:500]}")
    return parsed


def _tool(item: dict, at: float):
    kind = item.get("type")
    failed = item.get("status") == "failed"
    if kind == "mcp_tool_call":
        result: dict = item["result"] if isinstance(item.get("result"), dict) else {}
        text = "".join(str(c.get("text", "")) for c in result.get("content") or [] if isinstance(c, dict))
        error = item.get("error")
        if error:
            text = str(error.get("message") if isinstance(error, dict) else error)
        name = str(item.get("tool"))
        capability = "mcp" if item.get("server") == MCP_SERVER else f"mcp:{item.get('server')}"
        return tool_step(at, name, item.get("arguments"), text, failed or bool(error), capability)
    if kind == "command_execution":
        failed = failed or item.get("exit_code") not in (0, None)
        return tool_step(at, "shell", {"command": item.get("command")}, item.get("aggregated_output"), failed,
                         "builtin")
    return tool_step(at, str(kind), {k: v for k, v in item.items() if k not in ("id", "type", "status")},
                     None, failed, "builtin")
