"""A stand-in for a hosted model API, which is unreachable here (see ``server.py``).

Tests import it as ``standin`` (tests/ is on pytest's path); a stand-in process started from
the repo root, and the script files it loads, import it as ``tests.standin``.
"""

from .script import (
    BEHAVIOURS,
    Call,
    Error,
    Reply,
    Turn,
    answer,
    call,
    context_length_exceeded,
    error,
    fixer,
    giver_up,
    golden_edits,
    hang,
    offered,
    outcome_table,
    rate_limited,
    raw_call,
    reply,
    server_error,
    wait,
)


def __getattr__(name: str):
    # Imported lazily, so `python -m tests.standin.server` does not find its own module
    # already imported by the package (runpy warns about that).
    if name in ("Exchange", "StandIn"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)


__all__ = [
    "BEHAVIOURS",
    "Call",
    "Error",
    "Exchange",
    "Reply",
    "StandIn",
    "Turn",
    "answer",
    "call",
    "context_length_exceeded",
    "error",
    "fixer",
    "giver_up",
    "golden_edits",
    "hang",
    "offered",
    "outcome_table",
    "rate_limited",
    "raw_call",
    "reply",
    "server_error",
    "wait",
]
