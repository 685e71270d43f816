"""Model providers: one small module per wire protocol, behind one ``Provider`` interface.

    model=openai/<name>              OpenAI chat completions   (api.openai.com, $OPENAI_API_KEY)
    model=anthropic/<name>           Anthropic messages API    (api.anthropic.com, $ANTHROPIC_API_KEY)
    model=openai-compatible/<name>   chat completions at ``base_url`` (vLLM, Ollama, a gateway);
                                     no key unless ``api_key_env`` names one

The agent loop speaks only the provider-neutral messages below; each provider renders
them into its protocol's JSON and parses the reply back. Providers raise ``ModelAPIError``
for every failure (HTTP status, transport, an unreadable reply) and never retry
themselves: ``engine.agents.providers.transport.with_retries`` does that, bounded by the
agent's wall clock. The API key lives only in the headers of one ``httpx`` client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.errors import ConfigError

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openai-compatible": None}
"""The environment variable a provider's key is read from when ``api_key_env`` is not set."""

DEFAULT_BASE_URL = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


# ---------------------------------------------------------------- provider-neutral messages
@dataclass
class ToolCall:
    """A tool call the model asked for. ``arguments`` is None when the model's arguments
    could not be read as a JSON object; ``raw`` is what it sent, echoed back verbatim."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw: Any = None
    problem: str | None = None


@dataclass
class UserText:
    text: str


@dataclass
class AssistantTurn:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class ToolResult:
    call_id: str
    name: str
    text: str
    is_error: bool = False


@dataclass
class ToolResults:
    results: list[ToolResult]


Message = UserText | AssistantTurn | ToolResults


@dataclass
class ToolSpec:
    """A tool as the run's MCP server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class Usage:
    input_tokens: int | None = None
    """Every prompt token, cached ones included."""
    output_tokens: int | None = None
    cached_input_tokens: int = 0
    """Prompt tokens read from the provider's cache (billed at the cached price)."""
    cache_write_tokens: int = 0


@dataclass
class ModelReply:
    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    finish_reason: str | None = None


@dataclass
class Sampling:
    """The request parameters that are part of the run spec."""

    temperature: float | None
    max_tokens: int
    seed: int | None


class ModelAPIError(Exception):
    """A model call that failed. ``retryable`` for rate limits, server errors and transport
    failures; ``context_length`` when the prompt no longer fits the model."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
        context_length: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.context_length = context_length


class Provider(Protocol):
    protocol: str
    warnings: list[str]
    """Things the provider could not honour (e.g. a seed the protocol lacks), said once."""

    async def complete(self, system: str, messages: list[Message], tools: list[ToolSpec], timeout: float) -> ModelReply:
        """One model call. Raises ``ModelAPIError``."""

    async def aclose(self) -> None: ...


# ---------------------------------------------------------------- selection
@dataclass(frozen=True)
class ModelChoice:
    provider: str
    name: str


def parse_model(model: str) -> ModelChoice:
    """``provider/name``; the name may itself contain slashes (``openai-compatible/org/model``)."""
    provider, sep, name = (model or "").partition("/")
    if not sep or not name or provider not in DEFAULT_KEY_ENV:
        raise ConfigError(
            f"model '{model}' must be <provider>/<name> with provider one of {', '.join(DEFAULT_KEY_ENV)}"
            " (e.g. openai/gpt-4o-mini, anthropic/claude-sonnet-4-5, openai-compatible/NAME with agent.base_url)"
        )
    return ModelChoice(provider, name)


def key_env_for(choice: ModelChoice, api_key_env: str | None) -> str | None:
    return api_key_env if api_key_env else DEFAULT_KEY_ENV[choice.provider]


def base_url_for(choice: ModelChoice, base_url: str | None) -> str:
    if base_url:
        return base_url.rstrip("/")
    if choice.provider not in DEFAULT_BASE_URL:
        raise ConfigError(f"model '{choice.provider}/{choice.name}' needs agent.base_url=<http(s)://host/v1>")
    return DEFAULT_BASE_URL[choice.provider]


def make_provider(choice: ModelChoice, *, base_url: str, api_key: str | None, sampling: Sampling) -> Provider:
    """The provider for ``choice``; its module is imported only when asked for."""
    if choice.provider == "anthropic":
        from engine.agents.providers.anthropic_messages import AnthropicMessages

        return AnthropicMessages(choice.name, base_url=base_url, api_key=api_key, sampling=sampling)
    from engine.agents.providers.openai_chat import OpenAIChat

    return OpenAIChat(
        choice.name, base_url=base_url, api_key=api_key, sampling=sampling, official=choice.provider == "openai"
    )
