"""Runs waiting for a slot have their workspaces started ahead (``RunSlots``), as their own,
and nothing started ahead outlives a batch: not when the runs complete, not when the batch is
cancelled while runs still wait for their slot.

Real runs of ``sample/last_page`` (the ``noop`` agent: no change, reward 0) on Docker, one
slot and one run ahead, so a run always waits while another one runs.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.run.reaper import LABEL_OWNER_PID, LABEL_PURPOSE, LABEL_RUN_ID, owner_labels

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def planned(base_image):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config(["task=sample/last_page", "agent=noop"]))
    session = session_for(typed)
    return session, plan(typed, builder=session.builder)


def _ours(docker_client) -> list:
    """Every container this process owns (the owner labels name this pid)."""
    pid = owner_labels()[LABEL_OWNER_PID]
    return docker_client.containers.list(all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"})


def _bridges_made(monkeypatch) -> list[str]:
    import engine.run.trial as trial

    made: list[str] = []
    original = trial._new_bridge

    def recording() -> str:
        made.append(original())
        return made[-1]

    monkeypatch.setattr(trial, "_new_bridge", recording)
    return made


def test_a_run_waiting_for_its_slot_already_has_its_own_workspaces_up(planned, docker_client, tmp_path,
                                                                     monkeypatch):
    from engine.run.batch import BatchJob, RunSlots, run_batch

    session, plan = planned
    bridges = _bridges_made(monkeypatch)
    seen: list[dict[str, list[str]]] = []

    def on_record(job, record) -> None:
        # The first run has just ended (its containers are gone); the second has been
        # waiting for the one slot all along and has not begun: no run directory yet.
        if not seen:
            by_run: dict[str, list[str]] = {}
            for container in _ours(docker_client):
                labels = container.labels
                if not (tmp_path / labels[LABEL_RUN_ID]).exists():  # not begun
                    by_run.setdefault(labels[LABEL_RUN_ID], []).append(labels[LABEL_PURPOSE])
            seen.append(by_run)

    jobs = [BatchJob(plan) for _ in range(3)]
    asyncio.run(run_batch(jobs, session, root=tmp_path, slots=RunSlots(1, ahead=1), on_record=on_record))

    records = [job.records[0] for job in jobs]
    assert [r.status for r in records] == ["completed"] * 3, [r.error for r in records]
    assert [r.reward for r in records] == [0.0] * 3
    # Exactly the next run: its own id on both containers, its agent's and its grading's (one:
    # this strict task's verdict is isolated, so no differential re-run needs a second).
    assert [sorted(purposes) for purposes in seen[0].values()] == [["agent", "grade"]], seen[0]
    assert all(r.raw_grade.get("rerun_skipped", "").startswith("no differential re-run") for r in records)
    assert not any("renamed" in r.raw_grade for r in records)  # nor random test names: out of reach already
    assert set(seen[0]) <= {r.run_id for r in records}
    # Nothing outlives the batch: no container, no bridge directory.
    assert _ours(docker_client) == []
    assert len(bridges) == 3 and not any(Path(b).exists() for b in bridges)


def test_a_batch_cancelled_while_runs_wait_leaves_nothing_started_ahead(planned, docker_client, tmp_path,
                                                                        monkeypatch):
    from engine.run.batch import BatchJob, RunSlots, run_batch

    session, plan = planned
    bridges = _bridges_made(monkeypatch)
    jobs = [BatchJob(plan) for _ in range(4)]

    async def scenario() -> None:
        batch = asyncio.ensure_future(run_batch(jobs, session, root=tmp_path, slots=RunSlots(1, ahead=2)))
        # Cancel once the runs ahead hold started containers while the first still runs.
        for _ in range(600):
            purposes = [c.labels[LABEL_PURPOSE] for c in await asyncio.to_thread(_ours, docker_client)]
            if len(purposes) >= 6:  # three runs' two containers each: one running, two ahead
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the runs ahead never had their containers up")
        batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await batch

    asyncio.run(scenario())
    # A run that had begun is recorded canceled (or completed, if it ended first); the runs
    # that only waited never began: no record, and none of their containers or bridges stays.
    records = [record for job in jobs for record in job.records]
    assert all(r.status in ("canceled", "completed") for r in records), [r.status for r in records]
    assert len(records) <= 2
    assert _ours(docker_client) == []
    assert len(bridges) >= 3 and not any(Path(b).exists() for b in bridges)
