"""A wall-clock limit that runs out on an event, for the tests of an agent's limit.

Such a run must first reach the model (a CLI's first call came 28 s after its launch headless
and 53 s in tmux at a load average of ~20) and then be ended by the limit, however long the
first part took: a limit in seconds is either too short on a loaded machine or a long wait on a
quiet one. ``LimitOnEvent`` stands in for ``asyncio`` in the agent's module: everything is
asyncio's own, except that each ``timeout(delay)`` entered when ``fire()`` is called (from any
thread: the stand-in model's, as it starts to hang) runs out ``grace`` seconds later, with
``delay`` kept as the backstop. A fire while no limit is entered does nothing (both agents
enter theirs before they can reach the model; a late one must not cut the next run short).
What ends the run is still the agent's own limit (its ``asyncio.timeout``, its kill, its
record), only started by the event.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any


class LimitOnEvent:
    def __init__(self, grace: float = 1.0) -> None:
        self.grace = grace
        self.ran_out: list[str] = []
        """How each limit that ran out did: "event" (``fire`` moved it) or "backstop" (its delay)."""
        self._armed: list[_Armed] = []
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    def timeout(self, delay: float | None) -> _Armed:
        return _Armed(self, delay)

    def fire(self) -> None:
        with self._lock:
            armed = list(self._armed)
        for each in armed:
            each.run_out_soon()

    def _enter(self, armed: _Armed) -> None:
        with self._lock:
            self._armed.append(armed)

    def _leave(self, armed: _Armed) -> None:
        with self._lock:
            self._armed.remove(armed)


class _Armed:
    def __init__(self, clock: LimitOnEvent, delay: float | None) -> None:
        self.clock = clock
        self.timer = asyncio.timeout(delay)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.moved = False

    async def __aenter__(self) -> _Armed:
        self.loop = asyncio.get_running_loop()
        await self.timer.__aenter__()
        self.clock._enter(self)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self.clock._leave(self)
        try:
            return await self.timer.__aexit__(kind, exc, tb)
        finally:
            if self.timer.expired():
                self.clock.ran_out.append("event" if self.moved else "backstop")

    def run_out_soon(self) -> None:
        loop = self.loop
        assert loop is not None

        def reschedule() -> None:
            with self.clock._lock:
                entered = self in self.clock._armed  # not left meanwhile
            if entered and not self.timer.expired():  # nor run out already (a second fire, the backstop)
                due, soon = self.timer.when(), loop.time() + self.clock.grace
                if due is None or soon < due:
                    self.timer.reschedule(soon)
                    self.moved = True

        loop.call_soon_threadsafe(reschedule)

    def expired(self) -> bool:
        return self.timer.expired()
