"""tool_calling: a model drives the task through the run's MCP tools.

    system prompt + task prompt -> model -> tool calls -> results -> model -> ... -> answer

The tools are whatever the run's MCP server lists (never a fixed set), shown to the model
in its provider's protocol (``engine.agents.providers``). Every model call and every tool
call becomes a ``Step``: model steps carry tokens in/out, latency and cost (from the price
table, ``engine.agents.pricing``; null when the price is unknown), tool steps the call, its
result and whether it failed.

The loop stops for one of these reasons (``AgentOutcome.stop_reason``):

- ``done``: the model answered without calling a tool;
- ``max_steps``: ``max_steps`` model calls were made;
- ``timeout``: the wall-clock limit (``wall_timeout``, and always inside the runner's
  ``timeouts.agent``) ran out; the steps so far are kept;
- ``model_error``: the API failed for good (after bounded retries on 429/5xx), or the
  conversation no longer fits the model's context (the warning says so);
- ``malformed_tool_call``: ``max_malformed`` tool calls in a row were unusable (arguments
  that are not a JSON object, or a tool the server does not offer). Each such call is
  answered with an error result the model can correct itself from; only a streak stops.

The API key is read from the environment variable ``api_key_env`` when the run starts and
lives only in one HTTP client's headers: the spec records the variable's name, never its value.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from engine.agents import AgentContext, AgentOutcome, pricing
from engine.agents.providers import (
    AssistantTurn,
    Message,
    ModelAPIError,
    ModelReply,
    Provider,
    Sampling,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
    UserText,
    base_url_for,
    key_env_for,
    make_provider,
    parse_model,
)
from engine.agents.providers.transport import with_retries
from engine.config.schema import AgentConfig
from engine.errors import AgentError
from engine.models import Step

if TYPE_CHECKING:
    from mcp import ClientSession

DEFAULT_WALL_TIMEOUT = 1800.0


@dataclass
class ToolCallingAgentConfig(AgentConfig):
    """The agent's keys, every one part of the run spec; the API key is not (only the
    variable's name), nor are prices. The model itself is the top-level ``model=<provider>/<name>``.
    """

    _target_: str = "engine.agents.tool_calling.ToolCallingAgent"
    name: str = "tool_calling"
    base_url: str | None = None
    """The API root; None = the provider's own. Required for ``openai-compatible/...``."""
    api_key_env: str | None = None
    """The environment variable holding the key; None = OPENAI_API_KEY for openai/,
    ANTHROPIC_API_KEY for anthropic/, no key for openai-compatible/."""
    system_prompt: str = (
        "You are an autonomous software engineer working on a task in a code repository, using only "
        "the tools provided. Explore the code, make the change the task asks for, and check your work "
        "(for example by running the tests) before you finish. Nobody will answer questions: decide "
        "for yourself. When you are done, reply with a short summary of what you changed and call no "
        "more tools."
    )
    max_steps: int = 50
    """Model calls at most."""
    temperature: float | None = 0.0
    """None = not sent (some reasoning models accept only their default)."""
    max_tokens: int = 4096
    """Output tokens per model call."""
    seed: int | None = None
    """Sent as the request's ``seed`` where the protocol has one (OpenAI); None = not sent."""
    request_timeout: float = 300.0
    """Seconds one model request may take before it is retried."""
    max_retries: int = 4
    """Retries per model call on 429, 408/409, 5xx and transport errors (exponential backoff,
    Retry-After honoured)."""
    wall_timeout: float | None = None
    """The agent's own wall-clock limit; None = just inside ``timeouts.agent``. Either way it
    ends before the runner's, so the steps so far are kept (stop reason ``timeout``)."""
    max_malformed: int = 3
    """Unusable tool calls in a row (bad JSON, unknown tool) before stopping."""


DEFAULT_SYSTEM_PROMPT = ToolCallingAgentConfig.system_prompt


def _now() -> str:
    return datetime.now(UTC).isoformat()


def runner_margin(agent_timeout: float) -> float:
    """How long before the runner's ``timeouts.agent`` the agent stops itself, to close cleanly."""
    return min(30.0, max(3.0, 0.05 * agent_timeout))


def wall_limit(wall_timeout: float | None, ctx: AgentContext) -> float:
    """An agent's own wall-clock limit: its ``wall_timeout``, and a margin inside the runner's
    ``timeouts.agent`` so it stops itself first; the default when neither is set."""
    limits = [wall_timeout] if wall_timeout else []
    runner = ctx.spec.timeouts.agent if ctx.spec is not None else None
    if runner:
        limits.append(max(1.0, runner - runner_margin(runner)))
    return min(limits) if limits else DEFAULT_WALL_TIMEOUT


class ToolCallingAgent:
    takes_model = True
    deterministic = False
    capabilities = ("mcp",)
    config_schema = ToolCallingAgentConfig

    def __init__(
        self,
        name: str = "tool_calling",
        model: str = "",
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        max_steps: int = 50,
        temperature: float | None = 0.0,
        max_tokens: int = 4096,
        seed: int | None = None,
        request_timeout: float = 300.0,
        max_retries: int = 4,
        wall_timeout: float | None = None,
        max_malformed: int = 3,
    ) -> None:
        self.name = name
        self.model = model
        self.choice = parse_model(model)
        self.base_url = base_url_for(self.choice, base_url)
        self.key_env = key_env_for(self.choice, api_key_env)
        if self.key_env and not os.environ.get(self.key_env):
            # Fail before anything is built or started: the run could never reach the model.
            raise AgentError(
                f"agent {name}: model {model} reads its API key from ${self.key_env}, which is not set "
                "(set it, or choose another variable with agent.api_key_env=NAME)"
            )
        self.system_prompt = system_prompt
        self.max_steps = max_steps
        self.sampling = Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed)
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.wall_timeout = wall_timeout
        self.max_malformed = max_malformed
        self.price = pricing.load_prices().get(model)
        """Looked up when the run is set up, never stored in the spec (prices change; runs do not)."""

    def wall_limit(self, ctx: AgentContext) -> float:
        return wall_limit(self.wall_timeout, ctx)

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        outcome = AgentOutcome(stop_reason="done")
        limit = self.wall_limit(ctx)
        api_key = os.environ.get(self.key_env) if self.key_env else None
        provider = make_provider(self.choice, base_url=self.base_url, api_key=api_key, sampling=self.sampling)
        outcome.warnings.extend(provider.warnings)
        timer = asyncio.timeout(limit)
        try:
            async with timer:
                await _Loop(self, provider, ctx, outcome).run()
        except TimeoutError:
            if not timer.expired():  # some other deadline, not ours: not this agent's stop reason
                raise
            outcome.stop_reason = "timeout"
            outcome.warnings.append(
                f"stopped at the wall-clock limit of {limit:g} s (agent.wall_timeout, kept inside timeouts.agent)"
            )
        finally:
            await provider.aclose()
        return outcome


class _Loop:
    """One conversation: the model, the MCP session, the steps."""

    def __init__(self, agent: ToolCallingAgent, provider: Provider, ctx: AgentContext, outcome: AgentOutcome) -> None:
        self.agent = agent
        self.provider = provider
        self.ctx = ctx
        self.outcome = outcome

    def record(self, step: Step) -> None:
        step.idx = len(self.outcome.steps)
        self.outcome.steps.append(step)

    @contextlib.contextmanager
    def recorded_if_cancelled(self, step: Step, began: float, what: str) -> Iterator[None]:
        """A step cut off by the wall clock is kept, marked as such."""
        try:
            yield
        except asyncio.CancelledError:
            step.is_error, step.seconds = True, time.monotonic() - began
            step.note = f"{what} cut off by the wall-clock limit"
            self.record(step)
            raise

    async def run(self) -> None:
        if "mcp" not in self.ctx.capabilities:
            raise AgentError("the task offers no mcp capability; the tool_calling agent has no tools to use")
        from engine.capabilities.mcp_client import open_mcp  # here: planning imports this module

        async with open_mcp(self.ctx.capabilities["mcp"], self.ctx.capability_auth.get("mcp", "")) as session:
            listed = (await session.list_tools()).tools
            tools = [ToolSpec(t.name, t.description or "", dict(t.inputSchema)) for t in listed]
            await self.converse(session, tools)

    async def converse(self, session: ClientSession, tools: list[ToolSpec]) -> None:
        known = {t.name for t in tools}
        messages: list[Message] = [UserText(self.ctx.prompt)]
        unusable_streak = 0
        for _ in range(self.agent.max_steps):
            reply = await self.model_step(messages, tools)
            if reply is None:
                return
            self.outcome.answer = reply.text
            messages.append(AssistantTurn(reply.text, reply.tool_calls))
            if not reply.tool_calls:
                if reply.finish_reason in ("length", "max_tokens"):
                    self.outcome.warnings.append("the model's last reply was cut off at max_tokens")
                self.outcome.stop_reason = "done"
                return
            results = []
            for call in reply.tool_calls:
                result, usable = await self.tool_step(session, known, call)
                results.append(result)
                unusable_streak = 0 if usable else unusable_streak + 1
            messages.append(ToolResults(results))
            if unusable_streak >= self.agent.max_malformed:
                self.outcome.stop_reason = "malformed_tool_call"
                self.outcome.warnings.append(
                    f"stopped after {unusable_streak} unusable tool calls in a row "
                    f"(agent.max_malformed={self.agent.max_malformed})"
                )
                return
        self.outcome.stop_reason = "max_steps"
        self.outcome.warnings.append(f"stopped after max_steps={self.agent.max_steps} model calls")

    async def model_step(self, messages: list[Message], tools: list[ToolSpec]) -> ModelReply | None:
        """One model call (retried on 429/5xx); None after a model error, which ends the run."""
        step, began = Step(idx=0, kind="model", started_at=_now()), time.monotonic()
        retries: list[str] = []
        with self.recorded_if_cancelled(step, began, "the model call was"):
            try:
                reply = await with_retries(
                    lambda: self.provider.complete(
                        self.agent.system_prompt, messages, tools, self.agent.request_timeout
                    ),
                    max_retries=self.agent.max_retries,
                    log=retries,
                )
            except ModelAPIError as exc:
                step.is_error, step.result, step.seconds = True, str(exc), time.monotonic() - began
                step.note = "; ".join(retries + ["context length exceeded" if exc.context_length else "model error"])
                self.record(step)
                self.outcome.stop_reason = "model_error"
                self.outcome.warnings.append(f"model error: {exc}")
                return None
        step.seconds = time.monotonic() - began
        step.result = reply.text
        step.arguments = {"finish_reason": reply.finish_reason, "tool_calls": [c.name for c in reply.tool_calls]}
        step.tokens_in, step.tokens_out = reply.usage.input_tokens, reply.usage.output_tokens
        step.cost_usd = pricing.cost_usd(self.agent.price, reply.usage)
        step.note = "; ".join(retries) or None
        self.record(step)
        return reply

    async def tool_step(self, session: ClientSession, known: set[str], call: ToolCall) -> tuple[ToolResult, bool]:
        """Run one tool call; (its result for the model, whether the call was usable)."""
        arguments = call.arguments if call.arguments is not None else call.raw
        step = Step(idx=0, kind="tool_call", capability="mcp", tool=call.name, arguments=arguments, started_at=_now())
        problem = call.problem
        if problem is None and call.name not in known:
            problem = f"there is no tool named {call.name!r}; the tools are: {', '.join(sorted(known))}"
        if problem is not None:
            text = f"Error: this tool call was not executed: {problem}."
            step.result, step.is_error, step.note = text, True, "unusable tool call, not executed"
            self.record(step)
            return ToolResult(call.id, call.name, text, True), False
        began = time.monotonic()
        with self.recorded_if_cancelled(step, began, "the tool call was"):
            try:
                from engine.capabilities.mcp_client import call_tool

                text, is_error = await call_tool(session, call.name, call.arguments or {})
            except Exception as exc:  # the MCP transport itself failed: not the model's doing
                raise AgentError(f"MCP call {call.name} failed: {type(exc).__name__}: {exc}") from exc
        step.result, step.is_error, step.seconds = text, is_error, time.monotonic() - began
        self.record(step)
        return ToolResult(call.id, call.name, text, is_error), True
