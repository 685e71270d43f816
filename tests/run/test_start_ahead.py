"""Runs waiting for a slot have their workspaces started (their task set up, their grading
prepared) ahead (``RunSlots``), as their own, and nothing started ahead outlives a batch: not when the runs complete, not when the batch is
cancelled while runs still wait for their slot.

Real runs of ``sample/last_page`` (the ``noop`` agent: no change, reward 0) on Docker, one
slot and one run ahead, so a run always waits while another one runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.runtimes.docker.reaper import LABEL_PURPOSE, LABEL_RUN_ID
from engine.runtimes.owner import LABEL_OWNER_PID, owner_labels

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(autouse=True)
def every_run_its_workspace(monkeypatch):
    """These runs are about the agent's workspace: none is spared by a kept untouched capture
    (engine/run/untouched.py, tests/run/test_untouched.py)."""
    from engine.run.untouched import UntouchedCaptures

    monkeypatch.setattr(UntouchedCaptures, "lookup", lambda self, key: None)


@pytest.fixture(scope="module")
def planned(base_image):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config(["task=sample/last_page", "agent=noop"]))
    session = session_for(typed)
    return session, plan(typed, builder=session.builder)


def _ours(docker_client) -> list:
    """Every container this process owns (the owner labels name this pid). A run that ends
    removes its containers while another one looks: one listed and gone before it is
    inspected is not ours any more, so it is left out rather than failing the look."""
    pid = owner_labels()[LABEL_OWNER_PID]
    return docker_client.containers.list(all=True, filters={"label": f"{LABEL_OWNER_PID}={pid}"}, ignore_removed=True)


def _bridges_made(monkeypatch) -> list[str]:
    import engine.run.resources as resources

    made: list[str] = []
    original = resources.new_bridge

    def recording() -> str:
        made.append(original())
        return made[-1]

    monkeypatch.setattr(resources, "new_bridge", recording)
    return made


def test_a_run_waiting_for_its_slot_already_has_its_own_workspaces_up(planned, docker_client, tmp_path, monkeypatch):
    import time

    import engine.run.trial as trial
    from engine.run.batch import BatchJob, RunSlots, run_batch

    session, plan = planned
    bridges = _bridges_made(monkeypatch)
    seen: dict[str, list[str]] = {}
    set_up: dict[str, tuple[int, str]] = {}
    prepared: dict[str, bool] = {}

    def look(run_id: str) -> None:
        """What a run has when its turn comes, before it does anything: its own containers,
        and in its agent's its task set up already (the fresh repo's one commit)."""
        containers = [c for c in _ours(docker_client) if c.labels[LABEL_RUN_ID] == run_id]
        seen[run_id] = sorted(c.labels[LABEL_PURPOSE] for c in containers)
        for container in containers:
            if container.labels[LABEL_PURPOSE] == "agent":
                deadline = time.monotonic() + 120  # a setup still under way: it is the waiting run's own
                while True:
                    log = container.exec_run(
                        ["git", "-c", "safe.directory=*", "-C", plan.spec.task.workdir, "log", "--format=%s"]
                    )
                    if log.exit_code == 0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                set_up[run_id] = (log.exit_code, log.output.decode().strip())
            if container.labels[LABEL_PURPOSE] == "grade":  # grading prepared: its test process waits for "go"
                deadline = time.monotonic() + 120
                while True:
                    waiting = container.exec_run(["sh", "-c", "grep -ls -- --wait-for-g[o] /proc/[0-9]*/cmdline"])
                    if waiting.exit_code == 0 or time.monotonic() > deadline:
                        break
                    time.sleep(0.1)
                prepared[run_id] = waiting.exit_code == 0

    original = trial.Runner.execute

    turns: list[str] = []

    async def execute(self, plan, run_dir, **kwargs):
        turns.append(kwargs["run_id"])
        if len(turns) > 1:  # the first run's turn came at once; the others waited for the slot
            await asyncio.to_thread(look, kwargs["run_id"])
        return await original(self, plan, run_dir, **kwargs)

    monkeypatch.setattr(trial.Runner, "execute", execute)
    jobs = [BatchJob(plan) for _ in range(3)]
    asyncio.run(run_batch(jobs, session, root=tmp_path, slots=RunSlots(1, ahead=1)))

    records = [job.records[0] for job in jobs]
    assert [r.status for r in records] == ["completed"] * 3, [r.error for r in records]
    assert [r.reward for r in records] == [0.0] * 3
    # The runs that waited: their own id on both containers, their agent's and their grading's
    # (one: this strict task's verdict is isolated, so no differential re-run needs a second).
    assert set(seen) == {r.run_id for r in records[1:]}, (seen, [r.run_id for r in records])
    assert list(seen.values()) == [["agent", "grade"]] * 2, seen
    assert all(r.raw_grade.get("rerun_skipped", "").startswith("no differential re-run") for r in records)
    assert not any("renamed" in r.raw_grade for r in records)  # nor random test names: out of reach already
    # ... and their task already set up in their agent's workspace (setup waits for nothing of
    # the agent's) before their turn: what that setup took is recorded apart.
    assert list(set_up.values()) == [(0, "baseline")] * 2, set_up
    # Recorded, not measured against a floor: from the setup layer it is a no-op that rounds
    # (to 0.1 ms) to 0.0 on a quick turn (CI at stop 51).
    assert all("setup_ahead" in r.timings for r in records), [r.timings for r in records]
    # ... and their grading workspace prepared (its test process started, waiting for "go").
    assert list(prepared.values()) == [True] * 2, prepared
    # Nothing outlives the batch: no container, no bridge directory.
    assert _ours(docker_client) == []
    assert len(bridges) == 3 and not any(Path(b).exists() for b in bridges)


def test_a_batch_cancelled_while_runs_wait_leaves_nothing_started_ahead(planned, docker_client, tmp_path, monkeypatch):
    from engine.run.batch import BatchJob, RunSlots, run_batch
    from envs.coding.flavor import CodingFlavor

    session, plan = planned
    bridges = _bridges_made(monkeypatch)
    jobs = [BatchJob(plan) for _ in range(4)]

    async def never_done(self, ws, spec):  # the running run stays in its capture until cancelled
        await asyncio.Event().wait()

    monkeypatch.setattr(CodingFlavor, "capture", never_done)

    async def scenario() -> None:
        batch = asyncio.ensure_future(run_batch(jobs, session, root=tmp_path, slots=RunSlots(1, ahead=2)))
        # Cancel once the runs ahead hold started containers while the first still runs.
        deadline = asyncio.get_running_loop().time() + 120
        while asyncio.get_running_loop().time() < deadline:
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
    # The run that had begun is recorded canceled; the runs that only waited never began: no
    # record, and none of their containers or bridges stays.
    records = [record for job in jobs for record in job.records]
    assert [r.status for r in records] in ([], ["canceled"]), [r.status for r in records]
    assert _ours(docker_client) == []
    assert len(bridges) >= 3 and not any(Path(b).exists() for b in bridges)


def test_a_runs_slot_goes_to_the_next_run_before_its_final_record_is_written(planned, tmp_path, monkeypatch):
    """With one slot, the waiting run begins while the first one's final record is still being
    written (its grading container going too): those no longer hold the slot."""
    import time

    from engine.run.batch import BatchJob, RunSlots, run_batch

    session, plan = planned
    original = session.store.record_run
    began_meanwhile: list[bool] = []

    def slow_final_write(record, **kwargs) -> None:
        if record.status != "running" and not began_meanwhile:  # the first run's final record
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and len(list(tmp_path.iterdir())) < 2:
                time.sleep(0.05)
            began_meanwhile.append(len(list(tmp_path.iterdir())) == 2)
        original(record, **kwargs)

    monkeypatch.setattr(session.store, "record_run", slow_final_write)
    jobs = [BatchJob(plan) for _ in range(2)]
    asyncio.run(run_batch(jobs, session, root=tmp_path, slots=RunSlots(1, ahead=1)))
    assert [job.records[0].status for job in jobs] == ["completed"] * 2
    assert began_meanwhile == [True]
