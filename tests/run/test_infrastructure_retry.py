"""A run the machinery failed (``InfrastructureError``: a Docker host or worker that went away)
is labelled as such, never scored, tried again by policy (``retries.infrastructure``) and
counted apart: in the store, in ``crucible report`` and in a sweep's progress.

Real runs of ``sample/last_page`` on Docker. The failure itself is injected: the first
container start of the agent's workspace raises ``InfrastructureError`` instead of starting
(a fault injector standing in for a host that dies; the real one, a second dockerd stopped
mid-sweep, is tests/runtimes/docker's). Everything after it is the real thing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from engine.errors import InfrastructureError

pytestmark = [pytest.mark.docker, pytest.mark.slow]

INJECTED_HOST = "ssh://fault-injected"


@pytest.fixture(scope="module")
def planned_once(base_image):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config(["task=sample/last_page", "agent=integration_test"]))
    session = session_for(typed)
    return session, plan(typed, builder=session.builder)


@pytest.fixture
def planned(planned_once, tmp_path):
    """The plan, with a store of the test's own: what one test stores, another never counts."""
    from engine.run.session import Session, open_store

    session, plan = planned_once
    own = Session(store=open_store(str(tmp_path / "store.duckdb")), builder=session.builder, runtime=session.runtime)
    return own, plan


@pytest.fixture
def host_dies(monkeypatch):
    """The next agent workspace starts (``host_dies["left"]`` of them, 1 by default) fail as a
    dead host's would; later starts are real."""
    from engine.runtimes.docker.runtime import DockerWorkspace

    real = DockerWorkspace._create_and_start
    failures = {"left": 1}

    def start(self) -> None:
        if self.purpose == "agent" and failures["left"]:
            failures["left"] -= 1
            raise InfrastructureError("the Docker host went away (injected)", phase="provision", host=INJECTED_HOST)
        real(self)

    monkeypatch.setattr(DockerWorkspace, "_create_and_start", start)
    return failures


def _run(session, plan, job_dir: Path, retries: int):
    from engine.run.batch import BatchJob, run_batch

    job = BatchJob(plan, run_dir=job_dir, retries=retries)
    asyncio.run(run_batch([job], session))
    return job


def _stored(session, run_id: str) -> dict:
    cols, rows = session.store.query(
        "SELECT status, infrastructure, host, retry_of, error_phase, reward, run_dir FROM runs "
        f"WHERE run_id = '{run_id}'"
    )
    return dict(zip(cols, rows[0]))


def test_a_run_the_infrastructure_failed_is_labelled_and_tried_again_in_a_directory_of_its_own(
    planned, host_dies, tmp_path, capsys
):
    from engine.cli.show import run_show
    from engine.run.progress import job_state

    session, plan = planned
    job = _run(session, plan, tmp_path / "job", retries=1)
    assert host_dies["left"] == 0
    [record] = job.records  # the job's record is its last try's
    assert record.status == "completed" and record.reward == 1.0
    assert record.retry_of is not None and not record.infrastructure
    assert Path(record.run_dir) == tmp_path / "job" / "retry-1"
    failed = _stored(session, record.retry_of)
    assert failed["status"] == "error" and failed["infrastructure"] is True
    assert failed["host"] == INJECTED_HOST and failed["error_phase"] == "provision"
    assert failed["reward"] is None  # never scored
    assert json.loads((tmp_path / "job" / "record.json").read_text())["infrastructure"] is True
    assert _stored(session, record.run_id)["retry_of"] == record.retry_of
    assert job_state(tmp_path / "job") == "completed"  # what a sweep's display shows for the job
    host_dies["left"] = 2  # then twice in a row: every retry goes beside the first try, not inside the last
    [again] = _run(session, plan, tmp_path / "again", retries=2).records
    assert again.status == "completed" and Path(again.run_dir) == tmp_path / "again" / "retry-2"
    assert (tmp_path / "again" / "retry-1" / "record.json").exists()
    capsys.readouterr()
    run_show(record.retry_of, store_path=str(tmp_path / "store.duckdb"), as_json=False)
    run_show(record.run_id, store_path=str(tmp_path / "store.duckdb"), as_json=False)
    shown = capsys.readouterr().out
    assert "status     error (infrastructure: not scored) in provision" in shown
    assert f"placed     on {INJECTED_HOST}" in shown and f"retries run {record.retry_of}" in shown


def test_with_no_retries_left_the_failure_stays_an_infrastructure_error_and_no_attempt(planned, host_dies, tmp_path):
    from engine.report.compute import build_report
    from engine.report.query import Filters
    from engine.run.progress import job_state

    session, plan = planned
    job = _run(session, plan, tmp_path / "job", retries=0)
    [record] = job.records
    assert record.status == "error" and record.infrastructure and record.host == INJECTED_HOST
    assert job_state(tmp_path / "job") == "failed"
    report = build_report(session.store, Filters(tasks=(plan.spec.task_id,)))
    [group] = [g for g in report.groups if g.agent == "integration_test"]
    assert (group.runs, group.infrastructure, group.attempts, group.errors) == (1, 1, 0, 0)
    assert report.matrix is not None and not report.matrix.cells  # nothing scored, not even a 0
    assert any("failed by the infrastructure" in note for note in report.notes)
    assert session.store.completed_run_for(plan.spec.spec_hash) is None  # resume=true runs it again


def test_an_agent_error_is_its_verdict_and_never_retried(planned, tmp_path):
    from engine.run.records import infrastructure_failure

    assert infrastructure_failure(RuntimeError("the agent broke the task")) is None
    try:
        try:
            raise InfrastructureError("socket gone", host="unix:///x.sock")
        except InfrastructureError as cause:
            raise RuntimeError("exec failed") from cause
    except RuntimeError as wrapped:
        found = infrastructure_failure(wrapped)
    assert found is not None and found.host == "unix:///x.sock"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("retries.infrastructure=-1", "retries.infrastructure must be 0 or more, not -1"),
        ("retries.infrastucture=1", "retries.infrastucture"),
    ],
)
def test_a_bad_retry_policy_fails_at_compose_time_in_one_line(override, message):
    from engine.config.compose import compose_config, to_typed
    from engine.errors import UserError

    with pytest.raises(UserError) as caught:
        to_typed(compose_config(["task=sample/last_page", override]))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_run_cut_off_by_its_host_going_away_is_labelled_the_infrastructures(planned_once, tmp_path, monkeypatch):
    """A command's stream cut by its host's death reads as the command's own failure (a
    ``WorkspaceError``): when the run's host has been found unreachable since, the run is the
    infrastructure's. Real runs on this engine listed as a host; the cut is injected."""
    from engine.errors import WorkspaceError
    from engine.run.batch import BatchJob, run_batch
    from engine.run.session import Session, open_store
    from engine.runtimes.docker.runtime import DockerRuntime, DockerWorkspace

    session, plan = planned_once
    runtime = DockerRuntime(hosts=[{"url": "unix:///var/run/docker.sock", "slots": 2}])
    own = Session(store=open_store(str(tmp_path / "store.duckdb")), builder=session.builder, runtime=runtime)
    real_exec, real_process = DockerWorkspace.exec, DockerWorkspace.open_process

    def cutting(real):
        async def cut(self, argv, **kwargs):
            if self.purpose == "agent":  # the host dies at the first command in the agent's workspace
                runtime.pool.mark_down(0, "gone (injected)")
                raise WorkspaceError("docker exec failed: the stream ended (injected)")
            return await real(self, argv, **kwargs)

        return cut

    # Every command there: an exec, or a process (the capture started ahead, envs/coding/held.py).
    monkeypatch.setattr(DockerWorkspace, "exec", cutting(real_exec))
    monkeypatch.setattr(DockerWorkspace, "open_process", cutting(real_process))
    job = BatchJob(plan, run_dir=tmp_path / "job", retries=0)
    asyncio.run(run_batch([job], own))
    [record] = job.records
    assert (record.status, record.infrastructure, record.host) == ("error", True, "unix:///var/run/docker.sock")
    assert record.error.startswith("InfrastructureError: Docker host unix:///var/run/docker.sock went away")
    monkeypatch.setattr(DockerWorkspace, "exec", real_exec)
    monkeypatch.setattr(DockerWorkspace, "open_process", real_process)
    runtime.pool._down_until.clear()  # back up: the same failure on a host that answers is the run's own
    monkeypatch.setattr(DockerWorkspace, "exec", _failing_agent_side(real_exec))
    monkeypatch.setattr(DockerWorkspace, "open_process", _failing_agent_side(real_process))
    again = BatchJob(plan, run_dir=tmp_path / "again", retries=0)
    asyncio.run(run_batch([again], own))
    assert again.records[0].status == "error" and not again.records[0].infrastructure


def _failing_agent_side(real):
    """``real`` (a workspace's exec or open_process), failing every command in the agent's workspace."""
    from engine.errors import WorkspaceError

    async def failing(self, argv, **kwargs):
        if self.purpose == "agent":
            raise WorkspaceError("docker exec failed: the container has stopped (injected)")
        return await real(self, argv, **kwargs)

    return failing
