"""A sweep's completed runs write their final records durably and leave them in the spool; the
sweep ingests them in one turn once every run's is written (while the last grading containers are
removed), not one store turn a run, and what lands after that at its end. A run that did not complete
is ingested at once (a cancelled sweep may end before its last runs have written theirs). Meanwhile
every reader ingests the spool first, so nothing is missed; the DuckDB file itself is read
here as an outside tool would (engine.store.lock.open_store: no ingest).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from engine.store.files import pending_files
from engine.store.lock import open_store

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _in_the_file(store, run_ids: list[str]) -> dict[str, str]:
    """run id -> status, as the DuckDB file holds them (nothing ingested first)."""
    with open_store(store.path, read_only=True, timeout=60) as con:
        rows = con.execute("SELECT run_id, status FROM runs WHERE list_contains(?::VARCHAR[], run_id)", [run_ids])
        return dict(rows.fetchall())


def test_a_batch_that_leaves_ingesting_to_its_caller_loses_nothing_a_reader_asks_for(base_image, tmp_path):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import BatchJob, run_batch
    from engine.run.session import session_for

    typed = to_typed(compose_config(["task=sample/last_page", "agent=integration_test"]))
    session = session_for(typed)
    session.store.ingest_pending()
    jobs = [BatchJob(plan(typed, builder=session.builder)) for _ in range(2)]
    asyncio.run(run_batch(jobs, session, root=tmp_path, ingest_each=False))
    run_ids = [job.records[0].run_id for job in jobs]
    assert [job.records[0].status for job in jobs] == ["completed"] * 2
    assert _in_the_file(session.store, run_ids) in ({}, dict.fromkeys(run_ids, "running"))  # spooled only
    assert any(run_ids[0] in p.name for p in pending_files(session.store.spool))
    # A reader ingests first: both final records, as written.
    _, rows = session.store.query(
        f"SELECT run_id, status, reward FROM runs WHERE run_id IN ('{run_ids[0]}', '{run_ids[1]}') ORDER BY run_id"
    )
    assert rows == sorted((run_id, "completed", 1.0) for run_id in run_ids)
    assert _in_the_file(session.store, run_ids) == dict.fromkeys(run_ids, "completed")


def _sweep(tmp_path, seed: int):
    from engine.cli.sweep import Sweep
    from engine.config.compose import compose_config

    combos = [["task=sample/last_page", f"agent={agent}", f"seed={seed}"] for agent in ("noop", "integration_test")]
    sweep = Sweep(
        [(combo, compose_config(combo)) for combo in combos],
        sweep_id=f"ingest-{seed}",
        sweep_dir=tmp_path / "sweep",
        parallel=2,
    )
    sweep.plan_first()
    return sweep


def test_a_sweep_ingests_its_runs_in_one_turn_once_all_are_written(base_image, tmp_path, monkeypatch):
    from engine.store.duckdb import DuckDBStore

    sweep = _sweep(tmp_path, random.randrange(10**9))
    turns: list[int] = []
    original = DuckDBStore.ingest_pending

    def counted(self) -> int:
        turns.append(original(self))
        return turns[-1]

    monkeypatch.setattr(DuckDBStore, "ingest_pending", counted)
    assert sweep.run() == 0
    [session] = sweep.sessions.values()
    # the two runs' final records (and their early ones) at once; nothing left for the end's look
    assert len(turns) == 2 and turns[0] >= 2 and turns[1] == 0, turns
    _, rows = session.store.query(f"SELECT agent, status FROM runs WHERE sweep_id = '{sweep.sweep_id}' ORDER BY agent")
    assert rows == [("integration_test", "completed"), ("noop", "completed")]


def test_the_ingest_begins_while_the_last_grading_containers_are_removed(base_image, tmp_path, monkeypatch):
    """Once every run's final record is written, the ingest need not wait for the containers to
    go: each grading container's removal here waits for the ingest to have begun (it cannot end
    before that, so a sweep that ingested only after its runs ended would never finish them)."""
    import threading

    from engine.runtimes.docker.workspace import DockerWorkspace
    from engine.store.duckdb import DuckDBStore

    sweep = _sweep(tmp_path, random.randrange(10**9))
    began = threading.Event()
    waited: list[bool] = []
    ingest, remove = DuckDBStore.ingest_pending, DockerWorkspace._remove

    def ingest_pending(self) -> int:
        began.set()
        return ingest(self)

    def removed_once_the_ingest_began(self) -> None:
        if self.purpose == "grade":
            waited.append(began.wait(timeout=120))
        remove(self)

    monkeypatch.setattr(DuckDBStore, "ingest_pending", ingest_pending)
    monkeypatch.setattr(DockerWorkspace, "_remove", removed_once_the_ingest_began)
    assert sweep.run() == 0
    assert waited == [True, True]


def test_a_cancelled_sweeps_runs_are_in_the_store_file_as_canceled(base_image, tmp_path, monkeypatch):
    from engine.cli.sweep import Sweep
    from envs.coding.flavor import CodingFlavor

    sweep = _sweep(tmp_path, random.randrange(10**9))
    captured = asyncio.Event()
    original = CodingFlavor.grade

    async def cancelled_in_grading(self, ws, spec, submission):
        captured.set()
        await asyncio.Event().wait()  # until the sweep is cancelled
        return await original(self, ws, spec, submission)

    monkeypatch.setattr(CodingFlavor, "grade", cancelled_in_grading)
    run = Sweep._run

    async def cancelled(self) -> int:
        task = asyncio.ensure_future(run(self))
        await captured.wait()
        task.cancel()
        return await task

    monkeypatch.setattr(Sweep, "_run", cancelled)
    with pytest.raises(asyncio.CancelledError):
        sweep.run()
    [session] = sweep.sessions.values()
    with open_store(session.store.path, read_only=True, timeout=60) as con:  # the file, nothing ingested first
        statuses = con.execute("SELECT status FROM runs WHERE sweep_id = ?", [sweep.sweep_id]).fetchall()
    assert statuses and {s for (s,) in statuses} == {"canceled"}, statuses


def test_a_sweeps_jobs_of_one_task_pin_its_refs_with_one_git_call(base_image, tmp_path, monkeypatch):
    """Each job of a task pins the same refs: within the sweep git is asked once (``repos.pinned_once``)."""
    from engine.plan import repos

    asked: list[list[str]] = []
    rev_parse = repos._rev_parse_commits
    monkeypatch.setattr(repos, "_rev_parse_commits", lambda path, revs: asked.append(revs) or rev_parse(path, revs))
    sweep = _sweep(tmp_path, random.randrange(10**9))
    assert len(sweep.first) == 2 and len(asked) == 1
