"""The OpenAI chat-completions protocol (``POST {base_url}/chat/completions``).

Serves ``model=openai/<name>`` and any OpenAI-compatible endpoint
(``model=openai-compatible/<name>`` with ``agent.base_url``: vLLM, Ollama, a gateway).
Tool-call arguments arrive as a JSON *string* the model wrote, so they can be malformed:
such a call comes back with ``arguments=None`` and a ``problem``, and its raw string is
echoed back verbatim in the history so the model sees what it sent.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.providers import (
    AssistantTurn,
    Message,
    ModelAPIError,
    ModelReply,
    Sampling,
    ToolCall,
    ToolResults,
    ToolSpec,
    Usage,
    UserText,
)
from engine.agents.providers.transport import JsonOverHttp, new_client


class OpenAIChat(JsonOverHttp):
    protocol = "openai-chat"

    def __init__(
        self, model: str, *, base_url: str, api_key: str | None, sampling: Sampling, official: bool = True
    ) -> None:
        self.model = model
        self.url = f"{base_url}/chat/completions"
        self.sampling = sampling
        # api.openai.com deprecated max_tokens (reasoning models reject it); compatible
        # servers (vLLM, Ollama) know max_tokens, and not always max_completion_tokens.
        self.max_tokens_key = "max_completion_tokens" if official else "max_tokens"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = new_client(headers, self.url)
        self.warnings: list[str] = []

    def request_body(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [{"role": "system", "content": system}]}
        for message in messages:
            body["messages"].extend(_render(message))
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
                }
                for t in tools
            ]
        body[self.max_tokens_key] = self.sampling.max_tokens
        if self.sampling.temperature is not None:
            body["temperature"] = self.sampling.temperature
        if self.sampling.seed is not None:
            body["seed"] = self.sampling.seed
        return body

    def parse_reply(self, data: dict[str, Any]) -> ModelReply:
        return parse_reply(data)


def _render(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, UserText):
        return [{"role": "user", "content": message.text}]
    if isinstance(message, AssistantTurn):
        rendered: dict[str, Any] = {"role": "assistant", "content": message.text or None}
        if message.tool_calls:
            rendered["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _raw_arguments(c)}}
                for c in message.tool_calls
            ]
        else:
            rendered["content"] = message.text
        return [rendered]
    assert isinstance(message, ToolResults)
    return [{"role": "tool", "tool_call_id": r.call_id, "content": r.text} for r in message.results]


def _raw_arguments(call: ToolCall) -> str:
    if isinstance(call.raw, str):
        return call.raw
    return json.dumps(call.arguments if call.arguments is not None else {})


def parse_reply(data: dict[str, Any]) -> ModelReply:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelAPIError(f"the reply has no choices: {json.dumps(data)[:300]}")
    message = choices[0].get("message") or {}
    calls = [parse_tool_call(i, raw) for i, raw in enumerate(message.get("tool_calls") or [])]
    return ModelReply(
        text=_text(message.get("content")),
        tool_calls=calls,
        usage=_usage(data.get("usage")),
        finish_reason=choices[0].get("finish_reason"),
    )


def parse_tool_call(index: int, raw: object) -> ToolCall:
    if not isinstance(raw, dict):
        return ToolCall(
            id=f"call_{index}", name="", arguments=None, raw=None, problem="a tool call that is not an object"
        )
    function = fn if isinstance(fn := raw.get("function"), dict) else {}
    name = function.get("name")
    call = ToolCall(
        id=str(raw.get("id") or f"call_{index}"),
        name=name if isinstance(name, str) else "",
        arguments=None,
        raw=function.get("arguments"),
    )
    if not call.name:
        call.problem = "the tool call names no function"
        return call
    arguments = call.raw
    if isinstance(arguments, dict):  # some compatible servers send an object, not a string
        call.arguments = arguments
        return call
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        call.arguments = {}
        return call
    if not isinstance(arguments, str):
        call.problem = f"the arguments are a {type(arguments).__name__}, not a JSON object"
        return call
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        call.problem = f"the arguments are not valid JSON ({exc.msg} at character {exc.pos})"
        return call
    if not isinstance(parsed, dict):
        call.problem = f"the arguments are JSON but not an object (a {type(parsed).__name__})"
        return call
    call.arguments = parsed
    return call


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts, as some compatible servers send them
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = d if isinstance(d := raw.get("prompt_tokens_details"), dict) else {}
    return Usage(
        input_tokens=_int(raw.get("prompt_tokens")),
        output_tokens=_int(raw.get("completion_tokens")),
        cached_input_tokens=_int(details.get("cached_tokens")) or 0,
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
