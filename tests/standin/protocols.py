"""The two wire protocols the stand-in speaks: requests checked and read, replies written.

Requests are checked the way the real APIs check them, so a malformed conversation from
the agent fails here as it would there (HTTP 400 with the protocol's error body):
OpenAI wants every assistant ``tool_calls`` id answered by a ``tool`` message before the
next turn; Anthropic wants ``anthropic-version``, ``max_tokens``, alternating roles that
start with the user, non-empty text blocks, and every ``tool_use`` answered by a
``tool_result`` in the very next user message.
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass

from .script import Call, Error, Reply

IDS = re.compile(r"_c(\d+)_t\d+_\d+$")


class BadRequest(Exception):
    """The request breaks the protocol: answered with HTTP 400."""


@dataclass
class Parsed:
    model: str
    prompt: str
    assistant_turns: int
    conversation: int | None
    """From the ids of the tool calls the stand-in made earlier in this conversation."""
    tools: list[dict]
    results: list[dict]


def _conversation(ids: list[str]) -> int | None:
    for call_id in ids:
        if m := IDS.search(call_id):
            return int(m.group(1))
    return None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


# ---------------------------------------------------------------- OpenAI chat completions
def parse_openai(body: dict, headers: dict) -> Parsed:  # noqa: C901 (one branch per message part kind)
    messages = body.get("messages")
    if not isinstance(body.get("model"), str) or not isinstance(messages, list) or not messages:
        raise BadRequest("'model' (a string) and 'messages' (a non-empty list) are required")
    pending: set[str] = set()
    ids: list[str] = []
    assistant_turns, prompt = 0, None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise BadRequest(f"messages[{i}].role is {role!r}")
        if role == "tool":
            if message.get("tool_call_id") not in pending:
                raise BadRequest(f"messages[{i}]: a 'tool' message must answer a preceding tool_calls id")
            pending.discard(message["tool_call_id"])
            continue
        if pending:
            raise BadRequest(
                "An assistant message with 'tool_calls' must be followed by tool messages responding "
                f"to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                f"{', '.join(sorted(pending))}"
            )
        if role == "user" and prompt is None:
            prompt = _text(message.get("content"))
        if role == "assistant":
            assistant_turns += 1
            for call in message.get("tool_calls") or []:
                if not isinstance(call.get("function", {}).get("arguments"), str):
                    raise BadRequest(f"messages[{i}].tool_calls: function.arguments must be a string")
                pending.add(call["id"])
                ids.append(call["id"])
    if pending:
        raise BadRequest(f"tool_call_ids without a response: {', '.join(sorted(pending))}")
    tools = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest("each tool must be {'type': 'function', 'function': {'name': ...}}")
        tools.append(
            {
                "name": function["name"],
                "description": function.get("description", ""),
                "input_schema": function.get("parameters"),
            }
        )
    results = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results.insert(0, {"id": message["tool_call_id"], "text": _text(message.get("content")), "is_error": None})
    return Parsed(body["model"], prompt or "", assistant_turns, _conversation(ids), tools, results)


def openai_reply(reply: Reply, model: str, conv: int, turn: int, usage: tuple[int, int], serial: int) -> dict:
    message: dict = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": f"call_standin_c{conv}_t{turn}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_text(c)},
            }
            for i, c in enumerate(reply.calls)
        ]
    return {
        "id": f"chatcmpl-standin-{serial}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_standin",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if reply.calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }


def _arguments_text(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


OPENAI_ERROR_TYPES = {
    "rate_limit": ("rate_limit_exceeded", "requests"),
    "server": ("server_error", None),
    "context_length": ("invalid_request_error", "messages"),
}


def openai_error(err: Error) -> dict:
    kind, param = OPENAI_ERROR_TYPES.get(err.error_type or "", (err.error_type or "invalid_request_error", None))
    message = err.message or (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 131072 tokens. Please reduce the length of the messages."
    )
    return {"error": {"message": message, "type": kind, "param": param, "code": err.code}}


# ---------------------------------------------------------------- Anthropic messages
def parse_anthropic(body: dict, headers: dict) -> Parsed:
    if not headers.get("anthropic-version"):
        raise BadRequest("anthropic-version: header is required")
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        raise BadRequest("'model' (a string) and 'max_tokens' (an integer) are required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: at least one message is required")
    ids: list[str] = []
    expected_role, pending, assistant_turns = "user", set(), 0
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role != expected_role:
            raise BadRequest(
                f'messages: roles must alternate between "user" and "assistant", starting '
                f'with "user"; messages[{i}] is {role!r}'
            )
        blocks = _blocks(i, message.get("content"))
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if pending - answered:
            raise BadRequest(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(sorted(pending - answered))}"
            )
        pending = set()
        if role == "assistant":
            assistant_turns += 1
            for block in blocks:
                if block.get("type") == "tool_use":
                    if not isinstance(block.get("input"), dict):
                        raise BadRequest(f"messages.{i}: tool_use.input must be an object")
                    pending.add(block["id"])
                    ids.append(block["id"])
        expected_role = "assistant" if role == "user" else "user"
    if expected_role == "user":
        raise BadRequest("the last message must be from the user")
    tools = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or "input_schema" not in tool:
            raise BadRequest("each tool needs 'name' and 'input_schema'")
        tools.append(
            {"name": tool["name"], "description": tool.get("description", ""), "input_schema": tool["input_schema"]}
        )
    last = _blocks(len(messages) - 1, messages[-1]["content"])
    results = [
        {"id": b["tool_use_id"], "text": _text(b.get("content")), "is_error": bool(b.get("is_error"))}
        for b in last
        if b.get("type") == "tool_result"
    ]
    return Parsed(
        body["model"], _text(_blocks(0, messages[0]["content"])), assistant_turns, _conversation(ids), tools, results
    )


def _blocks(i: int, content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise BadRequest(f"messages.{i}: content must be a string or a non-empty list of blocks")
    for block in content:
        if not isinstance(block, dict) or "type" not in block:
            raise BadRequest(f"messages.{i}: every content block needs a type")
        if block["type"] == "text" and not block.get("text"):
            raise BadRequest(f"messages.{i}: text content blocks must be non-empty")
    return content


def anthropic_reply(reply: Reply, model: str, conv: int, turn: int, usage: tuple[int, int], serial: int) -> dict:
    content: list[dict] = [{"type": "text", "text": reply.text}] if reply.text else []
    for i, c in enumerate(reply.calls):
        content.append(
            {"type": "tool_use", "id": f"toolu_standin_c{conv}_t{turn}_{i}", "name": c.name, "input": c.arguments}
        )
    return {
        "id": f"msg_standin_{serial}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if reply.calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


ANTHROPIC_ERROR_TYPES = {
    "rate_limit": "rate_limit_error",
    "server": "api_error",
    "context_length": "invalid_request_error",
}


def anthropic_error(err: Error) -> dict:
    kind = ANTHROPIC_ERROR_TYPES.get(err.error_type or "", err.error_type or "invalid_request_error")
    if err.status == 529:
        kind = "overloaded_error"
    message = err.message or "prompt is too long: 210000 tokens > 200000 maximum"
    return {"type": "error", "error": {"type": kind, "message": message}}


def counted_usage(body: dict, reply: Reply) -> tuple[int, int]:
    """Deterministic token counts: about four characters a token, as real tokenizers average."""
    prompt = json.dumps({k: body.get(k) for k in ("system", "messages", "tools")}, sort_keys=True)
    said = reply.text + "".join(c.name + _arguments_text(c) for c in reply.calls)
    return math.ceil(len(prompt) / 4), max(1, math.ceil(len(said) / 4))


PROTOCOLS = {
    "openai": (parse_openai, openai_reply, openai_error),
    "anthropic": (parse_anthropic, anthropic_reply, anthropic_error),
}
