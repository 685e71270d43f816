"""The Anthropic messages protocol (``POST {base_url}/v1/messages``, ``anthropic-version: 2023-06-01``).

``base_url`` is the API root (``https://api.anthropic.com``); one that already ends in
``/v1`` is accepted too, so one stand-in or gateway URL can serve both protocols.
Tool calls arrive as ``tool_use`` blocks whose ``input`` the API has already parsed; the
results go back as ``tool_result`` blocks (with ``is_error``) in the next user turn.
The protocol has no seed: a configured seed is not sent, and the run says so once.
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

API_VERSION = "2023-06-01"


class AnthropicMessages(JsonOverHttp):
    protocol = "anthropic-messages"

    def __init__(self, model: str, *, base_url: str, api_key: str | None, sampling: Sampling) -> None:
        self.model = model
        self.url = f"{base_url}/messages" if base_url.endswith("/v1") else f"{base_url}/v1/messages"
        self.sampling = sampling
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        self.client = new_client(headers, self.url)
        self.warnings: list[str] = []
        if sampling.seed is not None:
            self.warnings.append(f"the Anthropic messages API has no seed parameter; seed={sampling.seed} was not sent")

    def request_body(self, system: str, messages: list[Message], tools: list[ToolSpec]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.sampling.max_tokens,
            "system": system,
            "messages": [_render(m) for m in messages],
        }
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools
            ]
        if self.sampling.temperature is not None:
            body["temperature"] = self.sampling.temperature
        return body

    def parse_reply(self, data: dict[str, Any]) -> ModelReply:
        return parse_reply(data)


def _render(message: Message) -> dict[str, Any]:
    if isinstance(message, UserText):
        return {"role": "user", "content": [{"type": "text", "text": message.text}]}
    if isinstance(message, AssistantTurn):
        # The API rejects empty text blocks and empty content.
        blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments if c.arguments is not None else {}}
            for c in message.tool_calls
        ]
        return {"role": "assistant", "content": blocks or [{"type": "text", "text": "(no reply)"}]}
    assert isinstance(message, ToolResults)
    return {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.text or "(no output)",
                "is_error": r.is_error,
            }
            for r in message.results
        ],
    }


def parse_reply(data: dict[str, Any]) -> ModelReply:
    content = data.get("content")
    if not isinstance(content, list):
        raise ModelAPIError(f"the reply has no content list: {json.dumps(data)[:300]}")
    texts, calls = [], []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(_tool_call(index, block))
    return ModelReply(
        text="".join(texts), tool_calls=calls, usage=_usage(data.get("usage")), finish_reason=data.get("stop_reason")
    )


def _tool_call(index: int, block: dict[str, Any]) -> ToolCall:
    name, arguments = block.get("name"), block.get("input")
    call = ToolCall(
        id=str(block.get("id") or f"toolu_{index}"),
        name=name if isinstance(name, str) else "",
        arguments=arguments if isinstance(arguments, dict) else None,
        raw=arguments,
    )
    if not call.name:
        call.problem = "the tool_use block names no tool"
    elif call.arguments is None:
        call.problem = f"the tool_use input is a {type(arguments).__name__}, not a JSON object"
    return call


def _usage(raw: object) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    fresh, out = _int(raw.get("input_tokens")), _int(raw.get("output_tokens"))
    read, write = _int(raw.get("cache_read_input_tokens")) or 0, _int(raw.get("cache_creation_input_tokens")) or 0
    total_in = None if fresh is None else fresh + read + write
    return Usage(input_tokens=total_in, output_tokens=out, cached_input_tokens=read, cache_write_tokens=write)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
