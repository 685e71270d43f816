"""A sweep on a Ray cluster (``hydra/launcher=ray``): what crucible's Ray launcher does in
the launching process (hydra_plugins/crucible_ray_launcher, a thin subclass of Hydra's own).

Ray schedules; crucible only plans, dispatches and ingests:

1. each job is planned here first (``resume=true`` skips a spec the store has completed,
   exactly as an in-process sweep does: marked, and linked to the sweep); a job whose
   config cannot run is marked with its one line;
2. the rest go to the cluster, each as it is planned, with the plugin's own
   ``launch_job_on_ray``; the task function is a ``RemoteJob`` (engine/run/ray_job.py)
   carrying the planned spec hash and the run id;
3. results are collected as they finish (``ray.wait``): each finished run arrives as data and
   is ingested into this store once (files into ``<sweep dir>/<job>/``, which the progress
   display and ``rerun`` read; the record upserted by run id);
4. a job whose Ray task failed (its worker process or node died) is recorded here as an
   ``error`` labelled ``infrastructure``, with the worker it ran on, and its containers (if
   on this machine's engine) are removed: every job ends with a status, the sweep goes on.

Ray retries nothing (``max_retries: 0`` in conf/hydra/launcher/crucible_ray.yaml): crucible's
policy does. A job whose worker died is sent again, in ``<job>/retry-N``, while
``retries.infrastructure`` allows; a run the machinery failed on a worker that lived is tried
again there (``run_one(retries=...)``, what is left of the policy). Progress: a job counts as
running from when it is planned here (as in an in-process sweep), and finished when its run
comes back.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import StoreError, UserError
from engine.models import BuildRecord, RunRecord
from engine.run.progress import USER_ERROR_MARKER, mark_job
from engine.store.duckdb import FINAL_RUN_STATUSES

if TYPE_CHECKING:
    from hydra.core.utils import JobReturn

    from engine.plan.spec import Plan
    from engine.run.ray_job import JobResult
    from engine.run.session import Session

WORKER_SWEEP_DIR = "${oc.env:CRUCIBLE_HOME,${oc.env:HOME}/.crucible}/ray-jobs/"
"""Where a job's directory goes on its worker: under the worker's own home (resolved there)."""
LOCAL_OBJECT_STORE = 78_643_200
"""The plugin's object store size for a cluster it starts itself (never sent to an existing one)."""


@dataclass
class _Job:
    num: int
    plan: Plan
    session: Session
    sweep_config: Any
    """What Hydra hands the job on its worker (a ``load_sweep_config``)."""
    job_dir: Path
    retries: int
    """More tries left for a run the machinery failed (``retries.infrastructure``)."""
    run_id: str = ""
    retry_of: str | None = None
    repos: dict[str, bytes] | None = None
    """The git bundles of its local repos, made on its first try (``repo_bundles``)."""
    tries: int = 0
    """Tries sent again after their worker died."""

    @property
    def run_dir(self) -> Path:
        """This try's directory here: the job's, or ``<job>/retry-N`` after its worker died."""
        return self.job_dir / f"retry-{self.tries}" if self.tries else self.job_dir


def launch(launcher: Any, job_overrides: Any, initial_job_idx: int) -> list[JobReturn]:
    """The Ray launcher's ``launch``: every job ends stored (or marked), none aborts the sweep."""
    import ray
    from hydra.core.utils import setup_globals
    from hydra_plugins.hydra_ray_launcher._launcher_util import start_ray
    from omegaconf import open_dict

    setup_globals()
    config = launcher.config
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    init = launcher.ray_cfg.init
    if not init.get("address"):
        with open_dict(init):
            init.setdefault("object_store_memory", LOCAL_OBJECT_STORE)
    start_ray(init)
    board = _job_board()
    pending: dict[Any, _Job] = {}
    planning: Iterator[_Job] | None = _planned(launcher, job_overrides, initial_job_idx, sweep_dir)
    returns: list[JobReturn] = []
    try:
        while planning is not None or pending:
            # Planned and sent one by one, with what has finished meanwhile taken in between.
            job = next(planning, None) if planning is not None else None
            if job is not None:
                pending[_send(launcher, job, board)] = job
            elif planning is not None:
                planning = None
            if not pending:
                continue
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0 if planning is not None else None)
            for ref in ready:
                job = pending.pop(ref)
                record = _collect(ref, job, board, str(config.sweep_id))
                if record is not None and record.infrastructure and job.run_id == record.run_id and job.retries:
                    _retry(job, record)  # its worker died: tried again, as the policy allows
                    pending[_send(launcher, job, board)] = job
                    continue
                returns.append(_job_return(record))
    except KeyboardInterrupt:
        finished, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in finished:  # done before the interrupt: stored as it came back
            _collect(ref, pending.pop(ref), board, str(config.sweep_id))
        for ref in pending:
            ray.cancel(ref, force=True)
        for job in pending.values():  # what its worker had started ends canceled here, not lost
            _canceled(job, board, str(config.sweep_id))
        raise
    return returns


def _planned(launcher: Any, job_overrides: Any, first: int, sweep_dir: Path) -> Iterator[_Job]:
    """Each job planned here, as it is planned (``resume=true`` skips a done one; a bad one is
    marked with its line): those that must run, ready to send."""
    from omegaconf import open_dict

    from engine.cli.sweep import plan_job
    from engine.config.text import config_yaml
    from engine.run.batch import CONFIG_FILE

    config = launcher.config
    sweep_id = str(config.sweep_id)
    sessions: dict[tuple[object, ...], Session] = {}
    for num, overrides in enumerate(job_overrides, start=first):
        job_dir = sweep_dir / str(num)
        try:
            planned, session = plan_job(list(overrides), None, sweep_id, job_dir, sessions)
        except UserError as exc:
            print(f"crucible run: {exc}", file=sys.stderr)
            mark_job(job_dir, USER_ERROR_MARKER, str(exc))  # the sweep's summary reports it
            continue
        if planned is None:
            continue  # resume=true: done already, marked skipped and linked to the sweep
        (job_dir / CONFIG_FILE).write_text(config_yaml(planned.config))  # for rerun, whatever happens
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"job_id_for_{num}"
            sweep_config.hydra.job.num = num
            sweep_config.hydra.sweep.dir = WORKER_SWEEP_DIR + sweep_id
        yield _Job(num, planned.plan, session, sweep_config, job_dir, planned.retries)


def _send(launcher: Any, job: _Job, board: Any) -> Any:
    """One try of ``job`` to the cluster, with the plugin's own ``launch_job_on_ray``; its ref."""
    from hydra.core.singleton import Singleton
    from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray
    from omegaconf import open_dict

    from engine.plan import lock
    from engine.plan.repos import repo_bundles
    from engine.run.ray_job import RemoteJob
    from engine.run.records import new_run_id

    job.run_id = new_run_id()
    with open_dict(job.sweep_config):
        job.sweep_config.hydra.sweep.subdir = f"{job.num}-{job.run_id}"  # each try a directory of its own there
    if job.repos is None:  # the task's local repos travel with it (a worker may lack them)
        job.repos = repo_bundles(json.dumps(job.plan.spec.to_dict()))
    task_id = job.plan.spec.task_id
    locks = {task_id: lock.READ[task_id]} if task_id in lock.READ else {}  # and the lock it was planned with
    remote = RemoteJob(job.num, job.run_id, job.plan.spec.spec_hash, job.retries, board, job.repos, locks)
    return launch_job_on_ray(
        launcher.hydra_context, launcher.ray_cfg.remote, job.sweep_config, remote, Singleton.get_state()
    )


def _retry(job: _Job, failed: RunRecord) -> None:
    """Ready ``job`` for its next try, in ``<job>/retry-N`` (made now: the display shows it retrying)."""
    job.retries, job.tries, job.retry_of = job.retries - 1, job.tries + 1, failed.run_id
    job.run_dir.mkdir(parents=True, exist_ok=True)


def _job_return(record: RunRecord | None) -> JobReturn:
    from hydra.core.utils import JobReturn, JobStatus

    done = JobReturn()
    done.status, done.return_value = JobStatus.COMPLETED, record  # Hydra's sweeper re-raises a failed one
    return done


def _collect(ref: Any, job: _Job, board: Any, sweep_id: str) -> RunRecord | None:
    """One finished Ray task into this store, its record returned (or the job's one-line
    reason into its directory, and None)."""
    import ray
    import ray.exceptions

    from engine.cli.sweep import print_record

    record: RunRecord | None = None
    try:
        returned = ray.get(ref)
        result: JobResult = returned.return_value  # raises what the job raised there
    except ray.exceptions.RayError as exc:
        record = _worker_died(job, exc, board, sweep_id)
    except Exception as exc:  # noqa: BLE001 (a job that failed on its worker still gets a status)
        record = _failed_there(job, exc, board, sweep_id)
    else:
        if result.user_error is not None:
            print(f"crucible run: {result.user_error}", file=sys.stderr)
            mark_job(job.run_dir, USER_ERROR_MARKER, result.user_error)
        else:
            record = ingest(result, job.run_dir, job.session.store, retry_of=job.retry_of)
    if record is not None:
        print_record(record)
    return record


def ingest(result: JobResult, run_dir: Path, store: Any, *, retry_of: str | None = None) -> RunRecord:
    """A run that came back as data, into ``store``: its files under ``run_dir`` (where its
    records now point), its build records, then each try's record; returns the run's (its last
    try's). Upserts by run id: ingesting the same result again changes nothing. ``retry_of``:
    the run whose dead worker this try replaces."""
    run_dir = run_dir.resolve()
    records = []
    for name, data in sorted(result.files.items(), key=lambda item: len(Path(item[0]).parts)):
        target = (run_dir / name).resolve()
        if not target.is_relative_to(run_dir):
            continue  # nothing lands outside the job
        if target.name == "record.json":
            record = RunRecord.from_dict(json.loads(data))
            if record.status in FINAL_RUN_STATUSES:  # a try's final record (never a "running" one)
                record.run_dir, record.host = str(target.parent), record.host or result.worker
                records.append(record)
            continue  # written below, pointing here
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    known = {f.name for f in fields(BuildRecord)}
    for build in result.builds:
        store.record_build(BuildRecord(**{k: v for k, v in build.items() if k in known}), ingest=False)
    for record in records:
        if record.run_id == records[0].run_id and record.retry_of is None:
            record.retry_of = retry_of
        store.record_run(record)
    final = next((r for r in records if r.run_id == result.run_id), None)
    if final is None:
        raise StoreError(f"the run {result.run_id} came back from {result.worker} without its final record")
    return final


def _worker_died(job: _Job, exc: BaseException, board: Any, sweep_id: str) -> RunRecord:
    """The job's Ray task failed (its worker process or node died, or Ray lost it): an error run,
    labelled infrastructure, naming the worker; its containers on this engine go with it."""
    worker, pid = _where(board, job.num)
    where = f"worker {worker} (pid {pid})" if worker else "its worker (which one is unknown: it died before it started)"
    first = (str(exc).strip().splitlines() or [""])[0]
    record = _error_record(
        job, sweep_id, f"the Ray task running this job failed: {where} died ({type(exc).__name__}: {first})"
    )
    record.infrastructure, record.host = True, worker
    _remove_containers(job.run_id)
    job.session.store.record_run(record)
    return record


def _canceled(job: _Job, board: Any, sweep_id: str) -> None:
    """A job the user interrupted while a worker ran it: a ``canceled`` run, as an in-process
    sweep records one (its worker's own record went with the worker); its containers on this
    engine go with it. A job no worker had started yet never ran: nothing to record."""
    worker, _ = _where(board, job.num)
    if worker is None:
        return
    record = _error_record(job, sweep_id, "canceled by the user")
    record.status, record.host = "canceled", worker
    _remove_containers(job.run_id)
    job.session.store.record_run(record)


def _failed_there(job: _Job, exc: BaseException, board: Any, sweep_id: str) -> RunRecord:
    """The job raised on its worker (crucible's fault, not the machinery's): an error run saying what."""
    worker, _ = _where(board, job.num)
    record = _error_record(job, sweep_id, f"the job failed on worker {worker}: {type(exc).__name__}: {exc}")
    record.host = worker
    job.session.store.record_run(record)
    return record


def _error_record(job: _Job, sweep_id: str, error: str) -> RunRecord:
    from engine.run.records import new_record, now_iso

    record = new_record(job.plan, job.run_dir, sweep_id=sweep_id, run_id=job.run_id, retry_of=job.retry_of)
    record.status, record.ended_at, record.error_phase, record.error = "error", now_iso(), "agent", error
    record.owner_pid = record.owner_host = None  # owned by no process here: nothing to reap
    return record


def _where(board: Any, num: int) -> tuple[str | None, int | None]:
    """The worker a job started on, as it told the board; (None, None) if it never did."""
    import ray
    import ray.exceptions

    try:
        found = ray.get(board.where.remote(num), timeout=30)
    except ray.exceptions.RayError:
        return None, None
    return (found[0], found[1]) if found else (None, None)


def _remove_containers(run_id: str) -> None:
    """Best effort: the dead job's containers on this machine's engine (a worker elsewhere has
    its own engine, whose housekeeping reaps them: their owner pid is dead)."""
    from engine.runtimes.docker.reaper import LABEL_RUN_ID

    try:
        import docker

        client = docker.from_env(timeout=30)
        for container in client.api.containers(all=True, filters={"label": f"{LABEL_RUN_ID}={run_id}"}):
            client.api.remove_container(container["Id"], force=True, v=True)
    except Exception:  # noqa: BLE001 (no engine here, or one already gone: housekeeping reaps later)
        return


def _job_board() -> Any:
    """An actor on the launcher's node where each job says, as it starts, which worker runs it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0, max_restarts=0)
    class JobBoard:
        def __init__(self) -> None:
            self.workers: dict[int, tuple[str, int]] = {}

        def started(self, num: int, worker: str, pid: int) -> None:
            self.workers[num] = (worker, pid)

        def where(self, num: int) -> tuple[str, int] | None:
            return self.workers.get(num)

    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    return JobBoard.options(scheduling_strategy=here).remote()  # type: ignore[attr-defined]


def require_ray_launcher(overrides: list[str]) -> list[str]:
    """``overrides`` with ``hydra/launcher=ray`` read as crucible's Ray launcher
    (conf/hydra/launcher/crucible_ray.yaml), which must be installed (the ``ray`` extra) and
    registered with Hydra (whose plugin scan may not walk an editable install). ConfigError."""
    if not any(o.lstrip("+~") == "hydra/launcher=ray" for o in overrides):
        return overrides
    from engine.errors import ConfigError

    try:
        from hydra_plugins.crucible_ray_launcher.crucible_ray_launcher import CrucibleRayLauncher
    except ImportError as exc:
        raise ConfigError(
            f"hydra/launcher=ray needs the ray extra (hydra-ray-launcher and ray): pip install 'crucible[ray]' ({exc})"
        ) from exc
    from hydra.core.plugins import Plugins

    Plugins.instance().register(CrucibleRayLauncher)
    for text in overrides:
        key, _, address = text.partition("=")
        if key == "hydra.launcher.ray.init.address":
            _check_reachable(address)
    return [
        o.replace("hydra/launcher=ray", "hydra/launcher=crucible_ray") if o.lstrip("+~") == "hydra/launcher=ray" else o
        for o in overrides
    ]


def _check_reachable(address: str) -> None:
    """An existing cluster's address must answer now: Ray itself retries for minutes. ConfigError."""
    import socket

    from engine.errors import ConfigError

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local", null: Ray finds or starts the cluster itself
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(
            f"hydra.launcher.ray.init.address={address}: no Ray cluster answers there ({exc.strerror or exc}); "
            "start one with `ray start --head`, or leave the address out for a local cluster"
        ) from exc
