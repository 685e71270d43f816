"""What the coding CLIs speak beyond plain JSON: the OpenAI Responses API (``POST .../responses``,
Codex) and server-sent events for both it and the Anthropic messages API (Claude Code always
streams). Same scripts, same conversations: a streamed reply is the plain reply cut into the
protocol's real event sequence, so the CLI's own SDK reassembles exactly what a JSON reply holds.

Anthropic: ``message_start`` (usage with the prompt tokens), per block ``content_block_start`` /
``content_block_delta`` (``text_delta`` or ``input_json_delta``) / ``content_block_stop``, then
``message_delta`` (stop reason, output tokens) and ``message_stop``.
Responses: ``response.created``, per output item ``response.output_item.added`` (text deltas for
a message) ``response.output_item.done``, then ``response.completed`` with the whole response.
"""

from __future__ import annotations

import json
import time

from .protocols import IDS, BadRequest, Parsed, _arguments_text
from .script import Error, Reply

_OUTPUT_ITEMS = {"function_call", "reasoning", "custom_tool_call", "local_shell_call", "web_search_call"}


# ---------------------------------------------------------------- OpenAI Responses
def parse_responses(body: dict, headers: dict) -> Parsed:  # noqa: C901 (one branch per event kind of the stream)
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    if not isinstance(body.get("model"), str) or not isinstance(items, list) or not items:
        raise BadRequest("'model' (a string) and 'input' (a string or a non-empty list) are required")
    prompt, turns, in_output, ids, pending = [], 0, False, [], set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{i}] is not an object")
        kind = item.get("type", "message")
        assistant = kind in _OUTPUT_ITEMS or (kind == "message" and item.get("role") == "assistant")
        if assistant and not in_output:
            turns += 1
        in_output = assistant
        if kind == "message" and item.get("role") == "user" and turns == 0:
            prompt.append(_text(item.get("content")))
        if kind == "function_call":
            if not isinstance(item.get("arguments"), str) or not item.get("call_id"):
                raise BadRequest(f"input[{i}]: a function_call needs call_id and string arguments")
            ids.append(item["call_id"])
            pending.add(item["call_id"])
        if kind == "function_call_output":
            if item.get("call_id") not in pending:
                raise BadRequest(
                    f"input[{i}]: No tool call found for function call output with call_id {item.get('call_id')}."
                )
            pending.discard(item["call_id"])
    if pending:
        raise BadRequest(f"No tool output found for function call {', '.join(sorted(pending))}.")
    tools = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict) or not isinstance(t.get("name"), str):
            continue
        if t.get("type") == "namespace":  # Codex groups an MCP server's tools: NAMESPACE.TOOL here
            tools += [
                {
                    "name": f"{t['name']}.{inner['name']}",
                    "description": inner.get("description", ""),
                    "input_schema": inner.get("parameters"),
                }
                for inner in t.get("tools") or []
                if isinstance(inner, dict) and isinstance(inner.get("name"), str)
            ]
        else:
            tools.append(
                {"name": t["name"], "description": t.get("description", ""), "input_schema": t.get("parameters")}
            )
    results = []
    for item in reversed(items):
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            break
        output = item.get("output")
        results.insert(
            0, {"id": item["call_id"], "text": output if isinstance(output, str) else _text(output), "is_error": None}
        )
    conversation = next((int(m.group(1)) for c in ids if (m := IDS.search(c))), None)
    return Parsed(body["model"], "\n".join(prompt), turns, conversation, tools, results)


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def responses_reply(reply: Reply, model: str, conv: int, turn: int, usage: tuple[int, int], serial: int) -> dict:
    output: list[dict] = []
    if reply.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_standin_{serial}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for i, c in enumerate(reply.calls):
        namespace, _, name = c.name.rpartition(".")
        item = {
            "type": "function_call",
            "id": f"fc_standin_{serial}_{i}",
            "status": "completed",
            "call_id": f"call_standin_c{conv}_t{turn}_{i}",
            "name": name,
            "arguments": _arguments_text(c),
        }
        if namespace:
            item["namespace"] = namespace
        output.append(item)
    return {
        "id": f"resp_standin_{serial}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "usage": {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(usage),
        },
    }


def responses_error(err: Error) -> dict:
    from .protocols import openai_error

    return openai_error(err)


def responses_events(response: dict) -> list[tuple[str, dict]]:
    started = dict(response, status="in_progress", output=[], usage=None)
    events: list[tuple[str, dict]] = [
        ("response.created", {"response": started}),
        ("response.in_progress", {"response": started}),
    ]
    for index, item in enumerate(response["output"]):
        if item["type"] == "message":
            events.append(
                (
                    "response.output_item.added",
                    {"output_index": index, "item": dict(item, status="in_progress", content=[])},
                )
            )
            text = item["content"][0]["text"]
            events.append(
                (
                    "response.content_part.added",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []},
                    },
                )
            )
            for piece in _pieces(text):
                events.append(
                    (
                        "response.output_text.delta",
                        {"item_id": item["id"], "output_index": index, "content_index": 0, "delta": piece},
                    )
                )
            events.append(
                (
                    "response.output_text.done",
                    {"item_id": item["id"], "output_index": index, "content_index": 0, "text": text},
                )
            )
            events.append(
                (
                    "response.content_part.done",
                    {"item_id": item["id"], "output_index": index, "content_index": 0, "part": item["content"][0]},
                )
            )
        else:
            events.append(
                (
                    "response.output_item.added",
                    {"output_index": index, "item": dict(item, status="in_progress", arguments="")},
                )
            )
            events.append(
                (
                    "response.function_call_arguments.delta",
                    {"item_id": item["id"], "output_index": index, "delta": item["arguments"]},
                )
            )
            events.append(
                (
                    "response.function_call_arguments.done",
                    {"item_id": item["id"], "output_index": index, "arguments": item["arguments"]},
                )
            )
        events.append(("response.output_item.done", {"output_index": index, "item": item}))
    events.append(("response.completed", {"response": response}))
    return [(name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(events)]


# ---------------------------------------------------------------- Anthropic messages, streamed
def anthropic_events(message: dict) -> list[tuple[str, dict]]:
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, stop_sequence=None, usage=dict(usage, output_tokens=1))
    events: list[tuple[str, dict]] = [("message_start", {"message": start}), ("ping", {})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}))
            for piece in _pieces(block["text"]):
                events.append(("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": piece}}))
        else:
            events.append(("content_block_start", {"index": index, "content_block": dict(block, input={})}))
            events.append(
                (
                    "content_block_delta",
                    {"index": index, "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
                )
            )
        events.append(("content_block_stop", {"index": index}))
    events.append(
        (
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {}))
    return [(name, {"type": name, **data}) for name, data in events]


def _pieces(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


STREAMS = {"anthropic": anthropic_events, "responses": responses_events}
"""protocol -> its reply as the SSE events a streaming client gets."""
