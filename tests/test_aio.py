"""engine.util.aio: the awaits whose cancel must never be lost."""

from __future__ import annotations

import asyncio

import pytest

from engine.util.aio import finish_even_if_cancelled, within


async def _cancelled_as_it_finishes(wrap) -> asyncio.Task:
    """A task awaiting ``wrap(step)``, cancelled in the very loop turn ``step`` finishes (a
    Ctrl-C that lands as an exec returns)."""
    step = asyncio.get_running_loop().create_future()
    task = asyncio.ensure_future(wrap(step))
    await asyncio.sleep(0)  # the task waits on the step now
    step.set_result("the step's result")
    task.cancel()
    await asyncio.wait([task])
    return task


def test_a_cancel_in_the_turn_the_awaited_step_finishes_is_raised_not_swallowed():
    task = asyncio.run(_cancelled_as_it_finishes(lambda step: within(step, 60)))
    assert task.cancelled()
    task = asyncio.run(_cancelled_as_it_finishes(lambda step: finish_even_if_cancelled(step)))
    assert task.cancelled()


def test_within_returns_the_result_in_time_and_times_out_past_it():
    async def main() -> None:
        assert await within(asyncio.sleep(0, "done"), 60) == "done"
        assert await within(asyncio.sleep(0, "no deadline"), None) == "no deadline"
        never = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await within(never, 0.01)
        assert never.cancelled()  # what timed out is cancelled, as wait_for's is
        shielded = asyncio.get_running_loop().create_future()
        with pytest.raises(TimeoutError):
            await within(asyncio.shield(shielded), 0.01)
        assert not shielded.done()  # a shielded step goes on

    asyncio.run(main())


def test_a_step_that_finishes_in_the_turn_its_deadline_fires_keeps_its_result():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        for outcome in ("the step's result", ValueError("the step's own error")):
            step = loop.create_future()
            # Queued first: the step's end; then (timeout 0) the deadline, in that same turn,
            # before the awaiting task wakes.
            loop.call_soon(step.set_exception if isinstance(outcome, Exception) else step.set_result, outcome)
            if isinstance(outcome, Exception):
                with pytest.raises(ValueError, match="own error"):
                    await within(step, 0)
            else:
                assert await within(step, 0) == outcome
        with pytest.raises(TimeoutError):  # a step still going at its deadline times out
            await within(loop.create_future(), 0)

    asyncio.run(main())


def test_a_gather_the_deadline_cancelled_is_a_timeout_not_a_cancel():
    """A gather cancelled by the deadline ends holding a CancelledError rather than cancelled:
    that is the timeout, never an outcome to hand on as if someone had cancelled the caller."""

    async def main() -> None:
        for return_exceptions in (False, True):
            with pytest.raises(TimeoutError):
                await within(asyncio.gather(asyncio.sleep(60), return_exceptions=return_exceptions), 0.01)

    asyncio.run(main())
