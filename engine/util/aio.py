"""Small asyncio helpers shared by the workspace backends."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar, cast

T = TypeVar("T")
log = logging.getLogger("crucible.aio")


async def finish_even_if_cancelled(aw: Awaitable[T]) -> T:
    """Await ``aw`` to its end even if our caller is cancelled meanwhile; then re-raise the cancel.

    A cancel that arrives in the very step ``aw`` finishes still counts (it must not be
    swallowed: the caller would go on as if never cancelled).
    """
    fut = asyncio.ensure_future(aw)
    cancelled = False
    while True:
        try:
            await asyncio.shield(fut)
            break
        except asyncio.CancelledError:
            if fut.cancelled():
                raise  # aw itself was cancelled
            cancelled = True
            if fut.done():
                break
    if cancelled:
        if fut.exception() is not None:
            log.debug("finished after a cancel, with %r", fut.exception())
        raise asyncio.CancelledError
    return fut.result()


async def within(aw: Awaitable[T], timeout: float | None) -> T:
    """``asyncio.wait_for(aw, timeout)``, without Python 3.11's lost cancel: there, a cancel that
    arrives in the very loop turn ``aw`` finishes is swallowed and its result returned (the
    run goes on as if never cancelled: a Ctrl-C or SIGTERM recorded as a completed run). Here
    ``aw`` runs in the caller's own task under a deadline, so that cancel is raised.

    A future ``aw`` that finished in the very turn the deadline fired keeps its outcome (as
    ``wait_for``'s does): the deadline's cancel could no longer reach it, only our await. An
    outcome that is the deadline's own cancel (a ``gather`` it cancelled ends holding a
    CancelledError, not cancelled) is the timeout, as ``wait_for`` has it."""
    try:
        async with asyncio.timeout(timeout):
            return await aw
    except TimeoutError:
        if (
            isinstance(aw, asyncio.Future)
            and aw.done()
            and not aw.cancelled()
            and not isinstance(aw.exception(), asyncio.CancelledError)
        ):
            return cast(T, aw.result())
        raise
