"""Checks of clean-up: however a workspace's block ends (or its provisioning is cancelled), nothing is left."""

from __future__ import annotations

import asyncio

from engine.runtimes.conformance._core import LEFTOVERS, Target, check, expect, fresh_run_id, raises


@check(fresh=True, needs=(LEFTOVERS,))
async def check_close_is_idempotent(target: Target) -> None:
    """close twice, then leave the block: no error, nothing left."""
    run_id = fresh_run_id()
    ws = target.provision(run_id)
    await ws.__aenter__()
    await ws.close()
    await ws.close()
    await ws.__aexit__(None, None, None)
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after close: {left}")


class Boom(Exception):
    pass


@check(fresh=True, needs=(LEFTOVERS,), variants={e: {"ending": e} for e in ("normal", "exception", "cancelled")})
async def check_workspace_is_destroyed_however_the_block_ends(target: Target, *, ending: str) -> None:
    """Leaving the block destroys the workspace: normally, by an exception, by a cancel."""
    run_id = fresh_run_id()
    inside = asyncio.Event()

    async def body() -> None:
        async with target.provision(run_id) as ws:
            expect((await ws.exec(["true"])).ok, "`true` failed")
            expect(await target.leftovers(run_id), "the probe sees nothing of a live workspace")
            inside.set()
            if ending == "exception":
                raise Boom
            if ending == "cancelled":
                await asyncio.sleep(3600)

    task = asyncio.ensure_future(body())
    if ending == "cancelled":
        await inside.wait()
        task.cancel()
    expected = {"normal": None, "exception": Boom, "cancelled": asyncio.CancelledError}[ending]
    if expected is None:
        await task
    else:
        with raises(expected, f"the block ending by {ending}"):
            await task
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after the block ended ({ending}): {left}")


@check(fresh=True, needs=(LEFTOVERS,), variants={str(d): {"delay": d} for d in (0.05, 0.2, 0.5)})
async def check_cancel_while_provisioning_leaves_nothing_behind(target: Target, *, delay: float) -> None:
    """A cancel at any point of provisioning leaves nothing behind."""
    run_id = fresh_run_id()

    async def body() -> None:
        async with target.provision(run_id):
            await asyncio.sleep(3600)

    task = asyncio.ensure_future(body())
    await asyncio.sleep(delay)
    task.cancel()
    with raises(asyncio.CancelledError, f"a cancel {delay} s into provisioning"):
        await task
    left = await target.leftovers(run_id)
    expect(left == [], f"left behind after a cancel {delay} s into provisioning: {left}")
