"""The start/close protocol every workspace shares, whatever runs it.

``new -> starting -> running -> closing -> closed``: started once; a start that fails or is
cancelled closes what it had made before the error goes on; ``close`` runs the teardown once
(a second call, or one while it runs, waits for the same teardown) and finishes it even
through a cancel, so no container or sandbox outlives its run.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Self

from engine.errors import WorkspaceError
from engine.util.aio import finish_even_if_cancelled

log = logging.getLogger(__name__)


class StartedOnce:
    """Mixin: a runtime's workspace implements ``_start`` and ``_teardown`` (which sets
    ``_state`` to "closing" and, finally, "closed"); this gives it the async context
    manager and an idempotent ``close``."""

    _state: str = "new"
    _closing: asyncio.Future[None] | None = None

    async def _start(self) -> None:
        raise NotImplementedError

    async def _teardown(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        if self._state != "new":
            raise WorkspaceError(f"{self!r} was already started")
        self._state = "starting"
        try:
            await self._start()
        except BaseException:
            try:
                await self.close()
            except WorkspaceError:
                log.warning("could not remove %r after a failed start", self, exc_info=True)
            raise
        self._state = "running"
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:  # as ``Workspace`` declares it
        try:
            await self.close()
        except WorkspaceError:
            if exc_type is None:
                raise
            log.warning("could not remove %r while handling %s", self, type(exc).__name__, exc_info=True)

    async def close(self) -> None:
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._teardown())
        await finish_even_if_cancelled(self._closing)
