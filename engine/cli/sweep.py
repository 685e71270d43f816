"""``crucible run -m``, in this process: every job of the sweep through the batch API.

Hydra's multirun syntax is kept whole (``a,b``, ``range()``, ``glob()`` with nested task
sets, ``hydra.launcher.n_jobs=N``, ``hydra.sweep.dir``), and each job gets what a Hydra job
gets: ``<sweep dir>/<num>/`` with ``.hydra/config.yaml`` and ``.hydra/overrides.yaml``. What
changes is the launcher: the jobs share one process, one store handle and one event loop,
so a job costs its compose, its plan and its run, and no worker interpreter start-up
(joblib's loky workers import the whole stack, each). Jobs are planned while earlier ones
already run; the jobs that use each choice of each axis first are planned before anything
runs, so a missing repo or ref ends the sweep in one line before any container starts.
``hydra/launcher=<name>`` (joblib, a Ray launcher, ...) still hands the sweep to that Hydra
launcher instead.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.config.compose import compose_config, to_typed
from engine.config.text import config_yaml
from engine.errors import CrucibleError, StoreError, UserError
from engine.models import RunRecord
from engine.plan import repos
from engine.plan.spec import Plan, plan
from engine.run.batch import BatchJob, EnsuredImages, RunSlots, run_batch
from engine.run.progress import SKIPPED_MARKER, USER_ERROR_MARKER, mark_job
from engine.run.session import Session, require_integrity, session_for

if TYPE_CHECKING:
    from engine.store.duckdb import DuckDBStore


def uses_hydra_launcher(overrides: list[str]) -> bool:
    """Whether the command line picks a Hydra launcher, or sets one's options beyond n_jobs."""
    for text in overrides:
        key = text.lstrip("+~").split("=", 1)[0]
        if key == "hydra/launcher" or (key.startswith("hydra.launcher.") and key != "hydra.launcher.n_jobs"):
            return True
    return False


def parallelism(overrides: list[str], default: int) -> int:
    for text in overrides:
        key, _, value = text.partition("=")
        if key == "hydra.launcher.n_jobs":
            if not value.strip().isdigit() or int(value) < 1:
                raise UserError(f"hydra.launcher.n_jobs must be a positive number, not {value!r}")
            return int(value)
    return default


class Sweep:
    """A sweep run in this process: ``plan_first`` (before anything runs or is shown), then ``run``."""

    def __init__(
        self,
        composed: list[tuple[list[str], Any]],
        *,
        sweep_id: str,
        sweep_dir: Path,
        parallel: int,
        store: tuple[str | None, DuckDBStore] | None = None,
    ) -> None:
        self.composed, self.sweep_id, self.sweep_dir, self.parallel = composed, sweep_id, sweep_dir, parallel
        self.store = store
        """The sweep's store (its ``store`` setting, and the store opened already for it): the
        jobs with that setting plan and run on it; None: each session opens its own."""
        self.sessions: dict[tuple[object, ...], Session] = {}
        self.first: list[tuple[BatchJob | None, Session]] = []
        self.images: dict[int, EnsuredImages] = {}
        """One per session: each image ensured once a sweep (the first jobs' ahead, as planned)."""
        self.pinned: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        """Each task repository's refs as the sweep's first plan of them resolved them (``repos.pinned_once``)."""

    def plan_first(self) -> None:
        """Plan the jobs validation composed, which use every choice of every axis: every
        task's repo and refs are checked before any container starts. Raises UserError."""
        with repos.pinned_once(self.pinned):
            self._plan_first()

    def _plan_first(self) -> None:
        try:
            for num, (combo, cfg) in enumerate(self.composed):
                if cfg is None:
                    continue
                job, session = plan_job(combo, cfg, self.sweep_id, self.sweep_dir / str(num), self.sessions, self.store)
                self.first.append((job, session))
                if job is not None:  # its images checked while the next jobs are planned
                    setup = [job.plan.setup_image] if job.plan.setup_image is not None else []
                    self.images.setdefault(id(session), EnsuredImages()).prefetch([*job.plan.images, *setup], session)
        except BaseException:  # the sweep ends here: it waits for no check of its images
            for images in self.images.values():
                images.forget_prefetched()
            raise
        for session in self.sessions.values():  # a runtime's own (a Docker host's dead owners' containers)
            if hasattr(session.runtime, "housekeeping"):
                session.runtime.housekeeping()

    def run(self) -> int:
        """Run every job (the rest planned while the first ones run); the jobs' exit code."""
        return asyncio.run(self._run())

    async def _run(self) -> int:
        with repos.pinned_once(self.pinned):  # the rest planned with the first jobs' pins (threads inherit it)
            return await self._run_all()

    async def _run_all(self) -> int:
        slots: dict[int, RunSlots] = {}  # one per session: ``parallel`` bounds the sweep's runs
        running: list[asyncio.Task[list[BatchJob]]] = []
        ingest = _IngestOnceWritten(self.ingest_spooled, running)

        async def one_job(job: BatchJob, session: Session) -> list[BatchJob]:
            """One job's batch. What fails before its run starts (its image cannot be built, the
            engine that would build it went away) ends this job, said and marked, never the sweep."""
            try:
                return await run_batch(
                    [job],
                    session,
                    parallel=self.parallel,
                    sweep_id=self.sweep_id,
                    on_record=lambda job, record: print_record(record),
                    slots=slots.setdefault(id(session), RunSlots(self.parallel)),
                    images=self.images.setdefault(id(session), EnsuredImages()),
                    ingest_each=False,  # one ingest at the sweep's end, not a store turn a run
                    on_written=ingest.written,
                )
            except CrucibleError as exc:
                text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                print(f"crucible run: {job.plan.spec.task_id} {job.plan.spec.agent_name}: {text}", file=sys.stderr)
                if job.run_dir is not None:
                    mark_job(job.run_dir, USER_ERROR_MARKER, text)  # the sweep's summary reports it
                return [job]  # no record: the exit code says so

        def start(job: BatchJob | None, session: Session) -> None:
            if job is not None:
                running.append(asyncio.ensure_future(one_job(job, session)))

        code = 0
        try:
            for job, session in self.first:
                start(job, session)
            for num, (combo, cfg) in enumerate(self.composed):
                if cfg is not None:
                    continue
                job_dir = self.sweep_dir / str(num)
                try:
                    planned = await asyncio.to_thread(
                        plan_job, combo, cfg, self.sweep_id, job_dir, self.sessions, self.store
                    )
                    start(*planned)
                except UserError as exc:
                    print(f"crucible run: {exc}", file=sys.stderr)
                    mark_job(job_dir, USER_ERROR_MARKER, str(exc))  # the sweep's summary reports it
                    code = exc.exit_code
            ingest.planned_all()
            for done in await asyncio.gather(*running):
                if any(not job.records or any(r.status != "completed" for r in job.records) for job in done):
                    code = code or 1
        finally:  # a cancelled or failed sweep's too: its runs ended (cancelled) first
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            ingested = await ingest.ended() and self.ingest_spooled()
        return code if ingested else code or 1

    def ingest_spooled(self) -> bool:
        """The sweep's records, each written durably and spooled as its run ended, ingested in
        one turn at each store (not one a run); whether all went in."""
        ingested = True
        for session in self.sessions.values():
            try:
                session.store.ingest_pending()
            except StoreError as exc:  # durable in the spool: the next command's first read takes them
                print(f"crucible run: the sweep's records are not in the store yet: {exc}", file=sys.stderr)
                ingested = False
        return ingested


class _IngestOnceWritten:
    """A sweep's records ingested as soon as every job's run has written its final one, in a
    thread while the last grading containers are removed (~0.1 s of the store's CPU, with a
    checkpoint every other sweep, beside ~0.07 s of the engine's and the kernel's): the runs
    read the store no more by then. A job is done with its first record that is not the
    infrastructure's (one that is may be tried again, and the try reads the store). What lands
    after it (a record rewritten because its container could not be removed) is ingested at the
    end, as all was before."""

    def __init__(self, ingest: Callable[[], bool], running: list[asyncio.Task[list[BatchJob]]]) -> None:
        self.ingest, self.running = ingest, running
        self.done = 0
        self.all_planned = False
        self.started: asyncio.Future[bool] | None = None

    def written(self, record: RunRecord) -> None:
        if not record.infrastructure:
            self.done += 1
            self._start_if_all()

    def planned_all(self) -> None:
        self.all_planned = True
        self._start_if_all()

    def _start_if_all(self) -> None:
        if self.all_planned and self.started is None and self.running and self.done >= len(self.running):
            self.started = asyncio.ensure_future(asyncio.to_thread(self.ingest))

    async def ended(self) -> bool:
        """Once it has ended, whether it went in (True where it never started): a store that
        said no has been said already, and one locked past its wait is not waited for again.
        Anything else it raised is raised here, as the end's ingest would have."""
        if self.started is None:
            return True
        [outcome] = await asyncio.gather(self.started, return_exceptions=True)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome is True


def plan_job(
    combo: list[str],
    cfg: Any,
    sweep_id: str,
    job_dir: Path,
    sessions: dict[tuple[object, ...], Session],
    store: tuple[str | None, DuckDBStore] | None = None,
) -> tuple[BatchJob | None, Session]:
    """One job's plan (None when ``resume=true`` finds it done), with the session it runs in:
    on ``store``'s opened store where the job's ``store`` setting is that one's."""
    combo = [o for o in combo if not o.lstrip("+~").startswith("hydra")]
    cfg = compose_config(combo) if cfg is None else cfg
    typed = to_typed(cfg)  # as validated (the evaluation cache has it), then this sweep's id
    typed.sweep_id = cfg.sweep_id = sweep_id
    key = (repr(typed.runtime), typed.build.ca_bundle, typed.store)
    opened = store[1] if store is not None and store[0] == typed.store else None
    session = sessions.get(key) or sessions.setdefault(key, session_for(typed, opened))
    planned = plan(typed, builder=session.builder)
    require_integrity(session.runtime, planned.spec.integrity)
    (job_dir / ".hydra").mkdir(parents=True, exist_ok=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text(config_yaml(combo))
    if typed.resume and already_done(planned, session, job_dir, sweep_id):
        return None, session
    return BatchJob(planned, run_dir=job_dir, config=cfg, retries=typed.retries.infrastructure), session


def already_done(planned: Plan, session: Session, job_dir: Path, sweep_id: str | None = None) -> bool:
    """Whether the spec already has a completed run (for ``resume=true``): if so, says so, marks
    the job skipped (for the progress display and the summary) and links the run to
    ``sweep_id`` in the store, so the sweep's report counts it as the sweep's own."""
    spec_hash = planned.spec.spec_hash
    done = session.store.completed_run_for(spec_hash)
    if done is None:
        return False
    line = (
        f"skip {planned.spec.task_id} {planned.spec.agent_name}: spec {spec_hash[:12]} already has "
        f"completed run {done.run_id} (resume=true)"
    )
    print(line)
    if sweep_id is not None:
        session.store.link_sweep_run(sweep_id, done.run_id)
    mark_job(job_dir, SKIPPED_MARKER, line)
    return True


def print_record(record: RunRecord) -> None:
    """A job's one line: status, reward, task, agent, error, run id and directory."""
    line = f"{record.status:9} reward={record.reward} {record.task_id} {record.agent}"
    if record.error:
        line += f"  [{record.error_phase}] {record.error}"
    print(f"{line}  run {record.run_id}  ({record.run_dir})")
