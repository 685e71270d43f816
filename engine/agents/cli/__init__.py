"""Coding CLIs as agents (``claude_code``, ``codex``): the CLI itself runs inside the workspace.

    the agent's layer (engine/plan/layer.py): the CLI's pinned native binary, socat
    run:  sh -c sh/crucible_cli.sh crucible-cli MODEL_PORT MCP_PORT <cli argv>   as the agent's uid, in the repo dir
          - the model:  CLI -> 127.0.0.1:MODEL_PORT -> /run/crucible/model.sock -> ModelProxy (host,
                        adds the key, records every call) -> the provider
          - the tools:  CLI -> 127.0.0.1:MCP_PORT/mcp/ -> /run/crucible/mcp.sock -> the run's MCP server

The workspace keeps no network but its loopback and never holds the API key. A CLI is mostly
data (its argv, environment and per-run config files) plus a parser of its event stream: a
subclass of ``CliAgent`` gives ``command`` and ``parse``. Completion is the process's exit
together with the CLI's final event; the wall-clock limit kills the CLI's process group.

Steps: each model call as the proxy recorded it (tokens, cache tokens, latency, cost from the
price table), each tool call as the CLI's event stream reported it, in the order they happened;
the usage the CLI reports itself is cross-checked against the proxy's record (a warning says
where they differ).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from engine.agents import AgentContext, AgentOutcome, pricing
from engine.agents.cli.proxy import ModelProxy, Upstream
from engine.agents.providers import DEFAULT_BASE_URL, DEFAULT_KEY_ENV, parse_model
from engine.config.schema import AgentConfig
from engine.errors import AgentError, ConfigError
from engine.interfaces import BRIDGE_PATH, Process
from engine.models import Step
from engine.util import shell

if TYPE_CHECKING:
    from engine.agents.cli.terminal import TerminalRecorder
    from engine.agents.cli.tmux import Over, TmuxPane, TuiProfile

MODEL_SOCKET = "model.sock"
"""The model proxy's socket in the run's bridge (beside the MCP server's ``mcp.sock``)."""
MODEL_PORT = 41000
MCP_PORT = 41001
"""The relays' loopback ports inside the container: its network namespace is its own (no
network but loopback), so fixed ports collide with nothing."""
CLI_ROOT = "/tmp/crucible-cli"
"""Per-run home and config files of the CLI inside the workspace (owned by the agent's uid)."""
PLACEHOLDER_KEY = "crucible-model-proxy-holds-the-key"
"""What the CLI is given as its key: the proxy replaces it with the real one on the host."""


@dataclass
class BuiltinToolsConfig:
    """The CLI's own tools (its shell, file edits, web fetch, ...), beside the run's MCP tools."""

    allow: list[str] = field(default_factory=lambda: ["*"])
    """Tool names the CLI may use; ``["*"]`` = all of its defaults, ``[]`` = none (only the run's tools)."""
    deny: list[str] = field(default_factory=list)
    """Tool names it must not use (on top of ``allow``)."""


@dataclass
class CliAgentConfig(AgentConfig):
    """A coding CLI run inside the workspace. The model is the top-level ``model=<provider>/<name>``."""

    version: str = ""
    """The CLI's pinned version (its binary comes from ``image``; this names it in the spec)."""
    default_model: str | None = None
    """The model when the top-level ``model=`` is not given (``<provider>/<name>``)."""
    base_url: str | None = None
    """The provider's API root the host proxy forwards to; None = the provider's own."""
    api_key_env: str | None = None
    """The host variable holding the key (read by the proxy only); None = the provider's default."""
    permission_mode: str = "bypassPermissions"
    """How the CLI asks before acting; nobody answers, so the workspace is the sandbox."""
    max_turns: int | None = None
    """Model turns at most (where the CLI has such a limit); None = the CLI's own default."""
    builtin_tools: BuiltinToolsConfig = field(default_factory=BuiltinToolsConfig)
    wall_timeout: float | None = None
    """The CLI's wall-clock limit; None = just inside ``timeouts.agent``. Its process group is
    killed then, and the run ends as ``timeout``."""
    request_timeout: float = 600.0
    """Seconds one model call through the proxy may take."""
    transport: str = "headless"
    """``headless`` (the CLI's non-interactive mode and its event stream) or ``tmux`` (its TUI,
    driven through a private tmux server: engine/agents/cli/tmux.py)."""


@dataclass
class Event:
    """One line of the CLI's event stream, with when it arrived (for ordering steps)."""

    data: dict[str, Any]
    at: float


def session_events(jsonl: bytes) -> list[Event]:
    """The JSON objects of a CLI's own session file (JSONL), each at its ``timestamp`` (epoch
    seconds; 0 when it has none or an unreadable one); other lines are skipped."""
    events = []
    for line in jsonl.decode("utf-8", "replace").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            try:
                at = datetime.fromisoformat(str(data.get("timestamp")).replace("Z", "+00:00")).timestamp()
            except ValueError:
                at = 0.0
            events.append(Event(data, at))
    return events


@dataclass
class Parsed:
    """What a CLI's event stream says: its tool calls, its answer, whether it finished."""

    tool_steps: list[tuple[float, Step]] = field(default_factory=list)
    answer: str = ""
    finished: bool = False
    """The CLI's final event arrived (a result / a completed turn)."""
    stop_reason: str = "done"
    session_id: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    """Token totals the CLI reports itself (input, cached_input, output), for the cross-check."""
    calls: list[tuple[int, int]] | None = None
    """(input, output) tokens of each model call the CLI counted, where its record lists them: then
    the cross-check is per call, and a call of the CLI's own outside its session (a TUI's title)
    is no difference."""
    warnings: list[str] = field(default_factory=list)


class CliAgent:
    """The shared part of every coding CLI agent; a subclass is the CLI's data and its parser."""

    takes_model = True
    deterministic = False
    capabilities = ("mcp",)
    timeout_ends_run = True
    """A CLI killed at its wall-clock limit ends the run as ``timeout`` (its steps kept), not graded."""
    provider: str = ""
    """The provider whose protocol the CLI speaks (``anthropic``, ``openai``)."""
    key_header: str = ""
    tui: TuiProfile | None = None
    """What the CLI's TUI looks like, for the tmux transport; None = headless only."""

    def __init__(
        self,
        name: str,
        model: str = "",
        *,
        version: str = "",
        default_model: str | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
        permission_mode: str = "bypassPermissions",
        max_turns: int | None = None,
        builtin_tools: BuiltinToolsConfig | None = None,
        wall_timeout: float | None = None,
        request_timeout: float = 600.0,
        transport: str = "headless",
    ) -> None:
        self.name, self.model, self.version = name, model or default_model or "", version
        model = self.model
        choice = parse_model(model)
        if choice.provider != self.provider:
            raise ConfigError(
                f"agent {name}: model {model} must be {self.provider}/<name> "
                f"(the {name} CLI speaks only that provider's protocol)"
            )
        self.model_name = choice.name
        self.base_url = (base_url or DEFAULT_BASE_URL[self.provider]).rstrip("/")
        self.key_env = api_key_env or DEFAULT_KEY_ENV[self.provider]
        if self.key_env and not os.environ.get(self.key_env):
            raise AgentError(
                f"agent {name}: model {model} reads its API key from ${self.key_env} on the host, "
                "which is not set (set it, or choose another variable with agent.api_key_env=NAME)"
            )
        self.permission_mode = permission_mode
        self.max_turns = max_turns
        self.builtin_tools = builtin_tools or BuiltinToolsConfig()
        self.wall_timeout = wall_timeout
        self.request_timeout = request_timeout
        if transport not in ("headless", "tmux") or (transport == "tmux" and self.tui is None):
            offered = "headless or tmux" if self.tui is not None else "headless (its tmux transport is not built yet)"
            raise ConfigError(f"agent {name}: transport {transport!r}; {name} offers {offered}")
        self.transport = transport
        self.price = pricing.load_prices().get(model)

    # ------------------------------------------------------------ what a CLI says
    def command(self, ctx: AgentContext, mcp_token: str) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(argv, environment, files to write as the agent's uid: path -> text) for one run."""
        raise NotImplementedError

    def parse(self, events: list[Event]) -> Parsed:
        raise NotImplementedError

    # ------------------------------------------------------------ the run
    def wall_limit(self, ctx: AgentContext) -> float:
        from engine.agents.tool_calling import wall_limit

        return wall_limit(self.wall_timeout, ctx)

    def upstream(self) -> Upstream:
        origin = self.base_url[:-3] if self.base_url.endswith("/v1") else self.base_url
        key = os.environ.get(self.key_env) if self.key_env else None
        return Upstream(origin=origin, key_header=self.key_header, key=key)

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        ws = ctx.workspace
        if ws is None or ws.bridge is None or ctx.bridge_host is None or "mcp_socket" not in ctx.capabilities:
            raise AgentError(
                f"agent {self.name} works inside the workspace and needs its bridge "
                "(runtime=docker; the run's MCP server reached without a network)"
            )
        proxy = ModelProxy(
            os.path.join(ctx.bridge_host, MODEL_SOCKET), self.upstream(), self.price, self.request_timeout
        )
        async with proxy:
            argv, env, files = self.command(ctx, ctx.capability_auth.get("mcp_socket", ""))
            await self._stage(ctx, files)
            if ctx.setup_done is not None:
                await ctx.setup_done  # the CLI's own tools do not wait for setup as the run's tools do
            if self.transport == "tmux":
                parsed, exit_code, timed_out, stderr = await self._execute_tmux(ctx, argv, env)
            else:
                events, exit_code, timed_out, stderr = await self._execute(ctx, argv, env)
                parsed = self.parse(events)
        return self._outcome(parsed, proxy.steps, exit_code, timed_out, stderr, ctx)

    async def transcript(self, ctx: AgentContext, env: dict[str, str]) -> list[Event]:
        """The session's record the CLI keeps itself (its tool calls, for the tmux transport)."""
        return []

    def turn_over(self, ctx: AgentContext, env: dict[str, str]) -> Over | None:
        """Whether the session's record says the turn ended, for a TUI that can look idle in the
        middle of a turn; None = the screen alone tells."""
        return None

    async def _execute_tmux(
        self, ctx: AgentContext, argv: list[str], env: dict[str, str]
    ) -> tuple[Parsed, int | None, bool, str]:
        """Run the CLI's TUI in a private tmux server, submit the prompt, wait until it is idle
        and stable, take its answer from the pane and its tool calls from its transcript. The
        pane is recorded as the run's terminal (``ctx.terminals``) from launch to its end."""
        from engine.agents.cli.terminal import TerminalRecorder, new_terminal_id, server_name
        from engine.agents.cli.tmux import TmuxPane, TuiError, in_workspace

        assert ctx.workspace is not None and self.tui is not None
        launcher = [
            "sh",
            "-c",
            shell.script(__file__, "crucible_cli.sh"),
            "crucible-cli",
            str(MODEL_PORT),
            str(MCP_PORT),
            *argv,
        ]
        terminal_id = new_terminal_id()
        pane = TmuxPane(in_workspace(ctx.workspace, ctx.uid), server_name(terminal_id), profile=self.tui)
        recorder = (
            None
            if ctx.terminals is None
            else TerminalRecorder(
                pane, ctx.terminals, terminal_id=terminal_id, owner=f"agent:{self.name}", cwd=ctx.workdir
            )
        )
        answer, problem, timed_out, code = "", "", False, None
        failure: str | None = "canceled"  # until the turn ends otherwise
        try:
            await pane.start(launcher, cwd=ctx.workdir, env={**env, "CRUCIBLE_CLI_TTY": "1"})
            if recorder is not None:
                await recorder.start()
            async with asyncio.timeout(self.wall_limit(ctx)):
                await pane.wait_ready(120)
                answer = await pane.turn(ctx.prompt, self.wall_limit(ctx), over=self.turn_over(ctx, env))
                code, failure = 0, None
        except TimeoutError:
            timed_out, failure = True, f"killed at the wall-clock limit of {self.wall_limit(ctx):g} s"
        except TuiError as exc:
            problem = failure = str(exc)
        finally:
            # The final snapshot before the pane goes; then the pane and everything of the agent's uid.
            await asyncio.shield(self._end_tmux(ctx, pane, recorder, failure))
        parsed = self.parse(await self.transcript(ctx, env))
        # The turn's end is the screen's (and the record's, where it has one); a failure the record
        # names (a model error) stays the run's stop reason.
        parsed.answer, parsed.finished = answer or parsed.answer, code == 0 and parsed.stop_reason == "done"
        return parsed, code, timed_out, problem

    async def _end_tmux(
        self, ctx: AgentContext, pane: TmuxPane, recorder: TerminalRecorder | None, failure: str | None
    ) -> None:
        """The terminal's end is recorded, then the TUI's server goes, and with it every process of
        the agent's uid (a TUI may outlive its terminal's hang-up; nothing of the CLI may outlive its run)."""
        assert ctx.workspace is not None
        if recorder is not None:
            await recorder.end(failure)
        await pane.kill()
        await ctx.workspace.exec(["sh", "-c", "kill -9 -1 2>/dev/null; true"], user=ctx.uid, timeout=30)

    async def _stage(self, ctx: AgentContext, files: dict[str, str]) -> None:
        assert ctx.workspace is not None
        for path, text in files.items():
            await ctx.workspace.write_file(path, text.encode(), mode=0o600, owner=ctx.uid)
        # Parents made by write_file are root's: the CLI writes its own state under its home.
        result = await ctx.workspace.exec(["chown", "-R", f"{ctx.uid}:{ctx.uid}", CLI_ROOT], timeout=30)
        if result.exit_code != 0:
            raise AgentError(f"agent {self.name}: could not prepare {CLI_ROOT}: {result.stderr[-300:]!r}")

    async def _execute(
        self, ctx: AgentContext, argv: list[str], env: dict[str, str]
    ) -> tuple[list[Event], int | None, bool, str]:
        """Run the CLI with stdin closed; its events as they arrived, its exit code (None when
        killed), whether the wall clock ran out, and what it wrote that is not an event."""
        assert ctx.workspace is not None
        launcher = [
            "sh",
            "-c",
            shell.script(__file__, "crucible_cli.sh"),
            "crucible-cli",
            str(MODEL_PORT),
            str(MCP_PORT),
            *argv,
        ]
        process = await ctx.workspace.open_process(launcher, user=ctx.uid, cwd=ctx.workdir, env=env)
        events: list[Event] = []
        other: list[str] = []
        timed_out, code = False, None
        try:
            await process.close_stdin()
            try:
                async with asyncio.timeout(self.wall_limit(ctx)):
                    await _read_lines(process, events, other)
                    code = await process.wait()
            except TimeoutError:
                timed_out = True
        finally:
            # Whatever ended the run (the limit, a cancel, an error): the CLI's whole group goes.
            await asyncio.shield(process.kill())
        return events, code, timed_out, "\n".join(other)

    def _outcome(
        self,
        parsed: Parsed,
        model_steps: list[Step],
        exit_code: int | None,
        timed_out: bool,
        stderr: str,
        ctx: AgentContext,
    ) -> AgentOutcome:
        outcome = AgentOutcome(answer=parsed.answer, warnings=list(parsed.warnings))
        timeline = [(_epoch(s.started_at), s) for s in model_steps] + parsed.tool_steps
        for idx, (_, step) in enumerate(sorted(timeline, key=lambda pair: pair[0])):
            step.idx = idx
            outcome.steps.append(step)
        if timed_out:
            outcome.stop_reason = "timeout"
            outcome.warnings.append(f"the CLI was killed at the wall-clock limit of {self.wall_limit(ctx):g} s")
        elif exit_code != 0 or not parsed.finished:
            outcome.stop_reason = "cli_error" if parsed.stop_reason == "done" else parsed.stop_reason
            tail = stderr.strip()[-800:]
            if self.transport == "tmux" and exit_code == 0:  # the TUI's turn ended; its record says how
                outcome.warnings.append(f"{self.name}'s turn in its TUI ended as {outcome.stop_reason}")
            else:
                outcome.warnings.append(
                    f"{self.name} exited with code {exit_code}"
                    + ("" if parsed.finished else " without its final event")
                    + (f": {tail}" if tail else "")
                )
        else:
            outcome.stop_reason = parsed.stop_reason
        if parsed.calls is not None:
            outcome.warnings.extend(cross_check_calls(parsed.calls, model_steps, self.model_name))
        else:
            outcome.warnings.extend(cross_check(parsed.usage, model_steps, self.model_name))
        if parsed.session_id:
            outcome.warnings.append(f"{self.name} session {parsed.session_id}")
        return outcome


async def _read_lines(process: Process, events: list[Event], other: list[str]) -> None:
    buffer = b""
    while chunk := await process.read():
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            _take(line, events, other)
    if buffer:
        _take(buffer, events, other)


def _take(line: bytes, events: list[Event], other: list[str]) -> None:
    text = line.decode("utf-8", "replace").strip()
    if not text:
        return
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        events.append(Event(data, time.time()))
    elif len(other) < 200:
        other.append(text[:2000])


def cross_check(reported: dict[str, int], model_steps: list[Step], model: str) -> list[str]:
    """Where the CLI's own token totals differ from what the proxy saw of calls to ``model``."""
    if not reported:
        return []
    mine = [s for s in model_steps if (s.arguments or {}).get("model") == model and not s.is_error]
    seen = {
        "input": sum(s.tokens_in or 0 for s in mine),
        "output": sum(s.tokens_out or 0 for s in mine),
        "cached_input": sum((s.arguments or {}).get("cached_input_tokens", 0) for s in mine),
    }
    return [
        f"cross-check: the CLI reports {value} {kind} tokens for {model}, the model proxy recorded {seen[kind]}"
        for kind, value in sorted(reported.items())
        if kind in seen and value != seen[kind]
    ]


def cross_check_calls(counted: list[tuple[int, int]], model_steps: list[Step], model: str) -> list[str]:
    """The model calls the CLI counted that the proxy did not record with the same tokens; the
    proxy's other calls to ``model`` are the CLI's own side calls (recorded and priced as steps)."""
    seen = [
        (s.tokens_in or 0, s.tokens_out or 0)
        for s in model_steps
        if (s.arguments or {}).get("model") == model and not s.is_error
    ]
    missing = []
    for call in counted:
        if call in seen:
            seen.remove(call)
        else:
            missing.append(call)
    return [
        f"cross-check: the CLI counts a call of {i} input and {o} output tokens to {model} "
        "that the model proxy did not record"
        for i, o in missing
    ]


def _epoch(iso: str | None) -> float:
    return datetime.fromisoformat(iso).timestamp() if iso else 0.0


def now_iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(at if at is not None else time.time(), UTC).isoformat()


def tool_step(
    at: float, tool: str, arguments: object, result: str | None, is_error: bool, capability: str
) -> tuple[float, Step]:
    return at, Step(
        idx=0,
        kind="tool_call",
        capability=capability,
        tool=tool,
        arguments=arguments,
        result=result,
        is_error=is_error,
        started_at=now_iso(at),
    )


__all__ = ["BRIDGE_PATH", "BuiltinToolsConfig", "CliAgent", "CliAgentConfig", "Event", "Parsed"]
