"""The stand-in's scripting API: what a test says the "model" does, turn by turn.

A script is a function ``script(turn: Turn) -> reply``, called once per HTTP request the
stand-in receives (a retry is a new call, with ``turn.retry`` counting the failures already
sent for that turn). It may decide by anything in ``Turn``: the protocol, the model name,
the task (recognised from the prompt), the conversation's number for that (model, task)
— which is how a sweep's attempts get different outcomes — the turn number, and the tool
results the agent sent back. Replies:

    answer("text")                      a final answer, no tool calls (the run ends "done")
    reply("text", call("bash", command="ls"), ...)   tool calls (several = parallel calls)
    raw_call("bash", '{"command": "ls"')  a tool call whose arguments are this raw text (malformed JSON)
    rate_limited(retry_after=0.05)      HTTP 429 with Retry-After
    server_error(503)                   HTTP 5xx
    context_length_exceeded()           HTTP 400, the protocol's real context-length error
    error(status, message)              any other API error
    hang(seconds)                       no reply for that long (the agent's timeouts fire)
    wait(event, then=reply, timeout=60) hold the reply until a threading.Event is set

Ready-made behaviours: ``fixer`` (replays the task's golden edits through the tools, then
answers), ``giver_up`` (looks around, then gives up), and ``outcome_table`` (per model,
task and conversation number: "fix" / "give_up" / any script), e.g.::

    script = outcome_table({("standin-a", "sample/last_page"): ["fix", "give_up", "fix"],
                            ("standin-b", "*"): ["give_up"]}, default="give_up")
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    protocol: str
    """'openai' (chat completions) or 'anthropic' (messages)."""
    model: str
    prompt: str
    """The first user message: the task's prompt."""
    task: str | None
    """The task id whose prompt this is (``sample/last_page``), or None."""
    conversation: int
    """This conversation's number among those of the same (model, task), from 0, fixed by
    its first successful reply. Attempts of a sweep are conversations 0, 1, 2, ..."""
    turn: int
    """Model calls already answered in this conversation (0 = the first call)."""
    retry: int
    """Error replies already sent for this same turn (0 = first try)."""
    tools: list[dict]
    """The tools the agent offered: ``{name, description, input_schema}``."""
    results: list[dict]
    """The previous turn's tool results: ``{id, text, is_error}`` (is_error None for openai)."""
    request: dict = field(repr=False)
    """The raw request body."""

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]


# ---------------------------------------------------------------- replies
@dataclass
class Call:
    name: str
    arguments: Any
    """A dict, or a raw string sent verbatim as the arguments (malformed JSON)."""


@dataclass
class Reply:
    kind = "reply"
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    """(input tokens, output tokens); None = counted from the request and reply sizes."""


@dataclass
class Error:
    kind = "error"
    status: int
    message: str
    error_type: str | None = None
    code: str | None = None
    retry_after: float | None = None


@dataclass
class Hang:
    kind = "hang"
    seconds: float


@dataclass
class Wait:
    kind = "wait"
    event: threading.Event
    then: Any
    timeout: float = 60.0


def call(name: str, **arguments: Any) -> Call:
    return Call(name, arguments)


def raw_call(name: str, raw_arguments: str) -> Call:
    return Call(name, raw_arguments)


def reply(text: str = "", *calls: Call, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(text, list(calls), usage)


def answer(text: str, *, usage: tuple[int, int] | None = None) -> Reply:
    return Reply(text, [], usage)


def error(
    status: int,
    message: str,
    *,
    error_type: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
) -> Error:
    return Error(status, message, error_type, code, retry_after)


def rate_limited(retry_after: float | None = 0.05) -> Error:
    return Error(429, "Rate limit reached for requests (stand-in)", "rate_limit", None, retry_after)


def server_error(status: int = 500) -> Error:
    return Error(status, "The server had an error while processing your request (stand-in)", "server", None)


def context_length_exceeded() -> Error:
    return Error(400, "", "context_length", "context_length_exceeded")


def hang(seconds: float = 3600.0) -> Hang:
    return Hang(seconds)


def wait(event: threading.Event, then: Any, timeout: float = 60.0) -> Wait:
    return Wait(event, then, timeout)


# ---------------------------------------------------------------- behaviours
def offered(turn: Turn, name: str) -> str:
    """The agent's name for the run's tool ``name``: the name itself, or the name a coding CLI
    gives an MCP server's tool (Claude Code ``mcp__crucible__bash``; Codex, whose tools come
    in a namespace, ``mcp__crucible.bash`` here: see streaming.py)."""
    for tool in turn.tool_names:
        if tool == name:
            return tool
    for tool in turn.tool_names:
        if tool.endswith(f"__{name}") or tool.endswith(f".{name}"):
            return tool
    return name


def golden_edits(turn: Turn) -> list[Call]:
    from .tasks import golden_calls

    if turn.task is None:
        return []
    return [Call(offered(turn, c["name"]), dict(c.get("arguments") or {})) for c in golden_calls(turn.task)]


def fixer(turn: Turn) -> Reply:
    """Looks around, makes the golden's edits (all in one turn, as parallel tool calls), answers."""
    if turn.turn == 0:
        return reply(
            "Let me look at the repository first.", call(offered(turn, "bash"), command="git status --short; ls")
        )
    if turn.turn == 1:
        edits = golden_edits(turn)
        if not edits:
            return answer("I do not recognise this task, so I cannot fix it.")
        return reply("I found the bug; fixing it.", *edits)
    return answer("Fixed: the change is in place.")


def giver_up(turn: Turn) -> Reply:
    """Looks around once, then gives up without changing anything."""
    if turn.turn == 0:
        return reply("Let me look at the repository.", call(offered(turn, "bash"), command="ls"))
    return answer("I could not find the cause of the problem; giving up.")


BEHAVIOURS: dict[str, Callable[[Turn], Any]] = {"fix": fixer, "give_up": giver_up}


def outcome_table(table: dict[tuple[str, str], list[Any]], default: Any = "give_up") -> Callable[[Turn], Any]:
    """A script choosing a behaviour per (model, task) and conversation number.

    ``table[(model, task)]`` (task may be ``"*"``) lists one behaviour per conversation:
    a name from ``BEHAVIOURS`` or a script function; conversations past the list, and
    pairs not in the table, get ``default``.
    """

    def script(turn: Turn) -> Any:
        plan = table.get((turn.model, turn.task or "")) or table.get((turn.model, "*")) or []
        chosen = plan[turn.conversation] if turn.conversation < len(plan) else default
        behaviour = BEHAVIOURS[chosen] if isinstance(chosen, str) else chosen
        return behaviour(turn)

    return script
