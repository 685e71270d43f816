"""Spare execs: the next command of a kind finds its exec already started, waiting for it.

An exec is ~0.04 s of the engine's before its command runs (the exec's creation, runc starting
a process in the container, its seccomp filter): on an agent's every tool call, on the run's
critical path. A workspace told which kind of command comes again (``keep``: a user, a
directory, an environment, fixed when an exec is created) keeps one exec of that kind started
ahead: a shell that waits on its stdin for the command (its words, as one shell ``set --`` line
of known length, read byte by byte so the command's own stdin stays whole), then goes to its
directory and becomes the command under the same ``timeout`` an exec runs under, printing its pid
only then. Handed a command, the spare is used up and the next one starts beside it.

Off unless ``runtime.spare_execs`` is set. A spare hides the exec's start only where the CPU has
room for it beside the run: between a model agent's calls it does (~0.04 s a call); on this 2-core
machine, golden runs back to back, it does not (golden in-process 0.618 s with spares, 0.615
without; an 8-run sweep 5.25 s with, 5.08 without: the next spare's start competes with the run,
and the last one is never used).

Only the agent's kinds are kept (never root's): a spare waits as the uid its commands run as, and
what that uid can do to it (kill it, trace it) it could do to the command itself. A spare that did
not take its command (gone, or its directory gone) printed no pid: the command never ran there,
and runs in an exec of its own instead, whose result stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.interfaces import ROOT_UID
from engine.runtimes.docker.stream import HijackedStream

SPARE_SCRIPT = (
    'IFS= read -r n || exit 0; case $n in "" | *[!0-9]*) exit 0 ;; esac; '
    'eval "$(dd bs=1 count="$n" 2>/dev/null)" || exit 0; [ $# -gt 1 ] || exit 0; echo $$; exec timeout -s KILL "$@"'
)
SPARE_WRAPPER = ("/bin/sh", "-c", SPARE_SCRIPT, "crucible-exec")
"""The spare's shell; its handed line is ``[cd DIR && ]set -- SECONDS ARGV...``."""

Kind = tuple[int, str | None, tuple[tuple[str, str], ...]]
Started = tuple[str, HijackedStream]
"""An exec's id and its stream, as ``exec.start_exec`` returns them."""


def kind_of(user: int, cwd: str | None, env: Mapping[str, str]) -> Kind | None:
    """The kind an exec is of, where a spare may stand for it (the agent's: never root's)."""
    if user == ROOT_UID:
        return None
    return user, cwd, tuple(sorted(env.items()))


def handed(cwd: str | None, argv: Sequence[str], seconds: float, stdin: bytes | None) -> bytes:
    """What a spare reads to become ``argv`` in ``cwd`` (None: the image's) for ``seconds``, then the
    command's stdin. ``cwd`` is looked up again now: it may have been replaced since the spare began."""
    words = [f"{max(seconds, 0.001):.3f}", *argv]  # never "0.000": to timeout that is no deadline
    line = (f"cd {_quoted(cwd)} && " if cwd else "") + "set --" + "".join(f" {_quoted(w)}" for w in words)
    data = line.encode("utf-8", "surrogateescape")
    return f"{len(data)}\n".encode() + data + (stdin or b"")


def _quoted(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


class Spares:
    """One container's spare execs: at most one waiting per kind kept."""

    def __init__(self, start: Callable[[Kind], Started]) -> None:
        self._start = start  # blocking: creates and starts one spare of a kind
        self._kept: set[Kind] = set()
        self._waiting: dict[Kind, asyncio.Future[Started]] = {}
        self._closed = False

    def keep(self, kind: Kind) -> None:
        """Keep a spare of ``kind`` from now on (one starts now)."""
        if kind not in self._kept:
            self._kept.add(kind)
            self._refill(kind)

    async def take(self, kind: Kind | None) -> Started | None:
        """A spare of ``kind`` (the next one starting meanwhile), waited for where it is still
        starting (it began before this command's own exec would), or None."""
        waiting = self._waiting.pop(kind, None) if kind is not None else None
        if kind is None or waiting is None:
            return None
        self._refill(kind)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            waiting.add_done_callback(_let_go)  # ours no more: the container's removal ends it
            raise
        except Exception:  # noqa: BLE001 - it could not start: the command's own exec says why, if it fails too
            return None

    def _refill(self, kind: Kind) -> None:
        if not self._closed:
            self._waiting[kind] = asyncio.ensure_future(asyncio.to_thread(self._start, kind))
            self._waiting[kind].add_done_callback(_quiet)

    def close(self) -> None:
        """Let go of every spare (the container's removal ends their processes)."""
        self._closed = True
        waiting, self._waiting = list(self._waiting.values()), {}
        for future in waiting:
            future.add_done_callback(_let_go)


def _quiet(future: asyncio.Future[Any]) -> None:
    """A spare that could not start is simply not there (the next exec makes its own)."""
    if not future.cancelled():
        future.exception()


def _let_go(future: asyncio.Future[Started]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result()[1].close()


__all__ = ["SPARE_WRAPPER", "Kind", "Spares", "handed", "kind_of"]
