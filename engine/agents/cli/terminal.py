"""A run's terminal: one tmux pane, recorded in the store while a CLI works in it (seed 001's
terminal lifecycle; the store's side is engine/store/terminals.py).

    start   -> a ``running`` terminal: its id, the run, its owner, its tmux server and session
    every N s, while it runs -> a snapshot of the screen, when the screen changed
    tmux gone with no end yet -> ``stale`` (the last snapshot kept as its final one)
    end     -> ``closing`` (the turn ended normally) or ``failed`` (crashed, timed out, cancelled),
               with a final snapshot of the scrollback taken before the pane is killed

The terminal's id names its private tmux server (``crucible-<id>``), so the tmux identity an end
event carries is unique across runs and hosts, whatever the container calls itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime

from engine.agents.cli.tmux import TmuxPane, TuiError
from engine.interfaces import TerminalSink
from engine.models import TerminalRecord
from engine.util.aio import within


def new_terminal_id() -> str:
    return uuid.uuid4().hex[:16]


def server_name(terminal_id: str) -> str:
    """The private tmux server of a terminal (``tmux -L NAME``)."""
    return f"crucible-{terminal_id}"


class TerminalRecorder:
    """Records ``pane`` as a terminal through ``sink`` from ``start`` until ``end``."""

    def __init__(self, pane: TmuxPane, sink: TerminalSink, *, terminal_id: str, owner: str, cwd: str) -> None:
        self.pane, self.sink, self.terminal_id, self.owner, self.cwd = pane, sink, terminal_id, owner, cwd
        self.last = ""
        """The newest screen recorded (the final snapshot when the pane is gone before the end)."""
        self.stale = False
        """True once the terminal is recorded stale (its pane gone before anyone ended it)."""
        self._stop = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        self._ended = False

    async def start(self) -> None:
        await self.sink.start(
            TerminalRecord(
                terminal_id=self.terminal_id,
                run_id=self.sink.run_id,
                owner=self.owner,
                tmux_server=self.pane.server,
                tmux_session=self.pane.session,
                state="running",
                started_at=datetime.now(UTC).isoformat(),
                cwd=self.cwd,
                width=self.pane.width,
                height=self.pane.height,
            )
        )
        self._watch = asyncio.ensure_future(self._watching())

    async def _watching(self) -> None:
        while not self._stop.is_set():
            if not await self._snapshot():
                return
            with contextlib.suppress(TimeoutError):
                await within(self._stop.wait(), self.sink.every)

    async def _snapshot(self) -> bool:
        """One periodic snapshot (only a changed screen is stored); False once the pane is gone,
        which marks the terminal stale: nobody has ended it."""
        try:
            text = "\n".join(await self.pane.screen()).rstrip()
        except TuiError:
            text = None
        if text is None or not await self.pane.alive():
            await self.sink.end(
                self.terminal_id,
                state="stale",
                reason="its tmux server went away",
                **self._keys(),
                final_text=self.last or None,
            )
            self.stale = True  # once it is recorded so: what reads the store then finds it
            return False
        if text != self.last:
            self.last = text
            await self.sink.snapshot(self.terminal_id, text)
        return True

    async def end(self, failure: str | None) -> None:
        """End the terminal: ``closing`` when ``failure`` is None, else ``failed`` with it as the
        reason; the final snapshot is the scrollback (bounded) while the pane is there, else the
        last screen recorded. Call before the pane is killed. Idempotent."""
        if self._ended or self._watch is None:  # ended already, or never started
            return
        self._ended = True
        self._stop.set()
        if self._watch is not None:
            await self._watch
        final = self.last
        with contextlib.suppress(TuiError):
            if await self.pane.alive():
                lines = await self.pane.screen(history=True)
                final = "\n".join(lines[-self.sink.final_lines :]).rstrip()
        await self.sink.end(
            self.terminal_id,
            state="failed" if failure else "closing",
            reason=failure or "done",
            **self._keys(),
            final_text=final,
        )

    def _keys(self) -> dict[str, str]:
        return {"tmux_server": self.pane.server, "tmux_session": self.pane.session, "owner": self.owner}


__all__ = ["TerminalRecorder", "new_terminal_id", "server_name"]
