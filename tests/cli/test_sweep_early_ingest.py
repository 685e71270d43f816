"""When a sweep ingests its records early (engine/cli/sweep.py, ``_IngestOnceWritten``): once
every job's run has written a final record that will not be tried again, and only once every
job is planned; the runs read the store until then, and the ingest holds it while it goes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from engine.cli.sweep import _IngestOnceWritten


def _record(*, infrastructure: bool = False) -> SimpleNamespace:
    return SimpleNamespace(infrastructure=infrastructure)  # what the sweep reads of a RunRecord


def test_it_waits_for_every_job_and_not_for_a_try_the_infrastructure_failed():
    async def sweep() -> list[str]:
        said: list[str] = []
        running = [asyncio.ensure_future(asyncio.sleep(0)) for _ in range(2)]
        ingest = _IngestOnceWritten(lambda: said.append("ingested") or True, running)
        ingest.written(_record())
        ingest.written(_record(infrastructure=True))  # its job is tried again: not done
        assert ingest.started is None
        ingest.written(_record())  # the try's, the last job done: but a job may be planned yet
        assert ingest.started is None
        ingest.planned_all()
        assert ingest.started is not None
        assert await ingest.ended() is True
        await asyncio.gather(*running)
        return said

    assert asyncio.run(sweep()) == ["ingested"]


def test_an_early_ingest_that_failed_is_not_waited_for_again():
    async def sweep() -> tuple[bool, bool]:
        running = [asyncio.ensure_future(asyncio.sleep(0))]
        never = _IngestOnceWritten(lambda: True, running)
        never.planned_all()  # no record written: it never starts, and the end's ingest does it all
        failed = _IngestOnceWritten(lambda: False, running)  # the store was locked past its wait
        failed.planned_all()
        failed.written(_record())
        outcome = (await never.ended(), await failed.ended())
        await asyncio.gather(*running)
        return outcome

    assert asyncio.run(sweep()) == (True, False)


def test_what_an_early_ingest_raises_beyond_the_store_saying_no_is_raised_at_the_end():
    def broken() -> bool:
        raise RuntimeError("an ingest that broke")

    async def sweep() -> None:
        running = [asyncio.ensure_future(asyncio.sleep(0))]
        ingest = _IngestOnceWritten(broken, running)
        ingest.planned_all()
        ingest.written(_record())
        try:
            await ingest.ended()
        finally:
            await asyncio.gather(*running)

    with pytest.raises(RuntimeError, match="an ingest that broke"):
        asyncio.run(sweep())
