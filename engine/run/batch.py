"""Many runs: planned specs in, stored records out. The one way crucible runs runs.

``crucible run -m``, ``crucible check``, ``crucible rerun``, the bench scripts and the tests
all come here (a single run through ``run_one``, a batch of one), so what a batch does is
done once:

- every distinct image is ensured once, before anything fans out (parallel runs never race
  a build, and a missing base fails the batch before a container starts): each plan's task
  image, then the agent's layer over it;
- the verdict cache: a job whose spec already has a completed run in the store is answered
  from the store (``reuse=True``: ``resume=true``, ``check`` without ``--rebuild``);
- ``repeats`` more runs of each job (``check --check N``);
- a run the machinery failed (``RunRecord.infrastructure``: a Docker host or worker that went
  away) is tried again, up to the job's ``retries`` more times, in ``<its dir>/retry-N``; the
  failed run stays stored, labelled, and the job's record is its last try's;
- at most ``parallel`` runs at once, in this process's event loop: a run costs no worker
  start-up and no compose beyond its own plan;
- the next runs waiting for a slot (``parallel`` of them by default) have their workspaces
  started while they wait, so a run begins with its containers already up (``RunSlots``);
- each run's directory gets its config (``.hydra/config.yaml``, what ``rerun`` re-plans
  from) before the run starts; its record lands beside it (``record.json``), which is what a
  sweep's progress display reads.

Ctrl-C cancels the runs in flight; each is recorded ``canceled`` before this returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import BuildError
from engine.interfaces import RecordsBuilds
from engine.models import BuildRecord, ImageRef, RunRecord
from engine.plan.spec import Plan

if TYPE_CHECKING:
    from engine.run.progress import TaskProgress
    from engine.run.session import Session

log = logging.getLogger(__name__)

CONFIG_FILE = Path(".hydra") / "config.yaml"
"""Where a run directory keeps the config its spec was planned from (as Hydra's own jobs do)."""


class RunSlots:
    """How many runs a batch (or several batches sharing it) runs at once, and how many more
    may start their workspaces while they wait for a slot.

    A run's two container starts (its workspace, its fresh grading container) are most of
    its time beyond the tests themselves, and mostly waiting on the engine: started ahead,
    they overlap the runs in progress instead of adding to each run's own time. What is
    started ahead is the run's own (its run id, its labels, its bridge) and stays untouched
    until the run uses it, exactly as a run's grading container always waited for grading.
    """

    def __init__(self, parallel: int, ahead: int | None = None) -> None:
        self.parallel = max(1, parallel)
        self.ahead = self.parallel if ahead is None else max(0, ahead)
        self.running = asyncio.Semaphore(self.parallel)
        self.holding = asyncio.Semaphore(self.parallel + self.ahead)
        """Runs holding workspaces: those running and those started ahead."""


class EnsuredImages:
    """The images that batches sharing this (with one session) have ensured, each once: a
    sweep runs each job as a batch of its own, and its second job of a task would otherwise
    inspect the task's images again and record their builds again (a store write each)."""

    def __init__(self) -> None:
        self._by_tag: dict[str, asyncio.Future[bool]] = {}
        self._early: dict[str, concurrent.futures.Future[dict[str, bool]]] = {}
        """Images checked ahead (``prefetch``), by tag: the check of the job that asked first,
        whose answer holds the tag where it was a current cache hit (recorded then)."""

    def prefetch(self, images: Sequence[ImageRef], session: Session) -> None:
        """Check one job's ``images`` (base first: the task image, the agent's layer, the setup
        layer) now, in a thread: each that exists on its bases as they are now is ensured then
        (a cache hit, its build recorded), so the first batches find it done while the next
        jobs are planned (inspects and a durable write each: 20-60 ms on the way to the first
        container). Nothing is built ahead: from the first image that is missing or sits on an
        earlier base, that one and those over it are left to ``ensure``, in order, as ever. An
        image another job's check has taken is checked again here, not recorded again."""
        check_only = getattr(session.builder, "ensure_if_current", None)
        if check_only is None:  # a builder with no check that builds nothing: ensure decides
            return
        mine = [image.tag for image in images if image.tag not in self._early and image.tag not in self._by_tag]
        if not mine:
            return
        checked = _ahead().submit(_current_hits, list(images), set(mine), check_only, _Spooled(session.store))
        for tag in mine:
            self._early[tag] = checked

    def forget_prefetched(self) -> None:
        """Drop the checks not begun yet (a sweep that will not run: its exit waits for none)."""
        for checked in self._early.values():
            checked.cancel()

    async def ensure(self, image: ImageRef, session: Session) -> bool:
        """Whether ``image`` was cached, ensuring it first unless another batch has (or is).
        Raises BuildError as ``ImageBuilder.ensure`` does, to every batch that asked."""
        future = self._by_tag.get(image.tag)
        if future is None:
            future = self._by_tag[image.tag] = asyncio.ensure_future(self._ensured(image, session))
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # each asker sees it
        return await asyncio.shield(future)

    async def _ensured(self, image: ImageRef, session: Session) -> bool:
        checked = self._early.pop(image.tag, None)
        if checked is not None and not checked.cancelled():
            try:
                if (await asyncio.wrap_future(checked)).get(image.tag):
                    return True
            except Exception:  # the engine's, in the thread: ensuring it here says it where it belongs
                pass
        return await self._cache_hit(image, session)

    @staticmethod
    async def _cache_hit(image: ImageRef, session: Session) -> bool:
        spooled = _Spooled(session.store)
        return (await asyncio.to_thread(session.builder.ensure, image, spooled)).cache_hit


def _current_hits(
    images: list[ImageRef], mine: set[str], check_only: Callable[..., BuildRecord | None], store: RecordsBuilds
) -> dict[str, bool]:
    """The tags of ``images`` (base first) that are current cache hits, up to the first that is
    not; those in ``mine`` recorded as ensured, the others only checked."""
    hits: dict[str, bool] = {}
    for image in images:
        if check_only(image, store if image.tag in mine else None) is None:
            break
        hits[image.tag] = True
    return hits


_AHEAD: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None


def _ahead() -> concurrent.futures.ThreadPoolExecutor:
    """This process's threads for ``EnsuredImages.prefetch`` (made in it: a warm fork starts none of its server's)."""
    global _AHEAD
    if _AHEAD is None or _AHEAD[0] != os.getpid():
        _AHEAD = (os.getpid(), concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="crucible-images-ahead"))
    return _AHEAD[1]


class _Spooled:
    """The store, for a batch's build records: written durably and not ingested (a turn at the
    store, ~20 ms before the first run could start), as a run's early writes are; its first
    record's ingest commits them, and every reader ingests them first."""

    def __init__(self, store: RecordsBuilds) -> None:
        self.store = store

    def record_build(self, record: BuildRecord, *, ingest: bool = True) -> None:
        self.store.record_build(record, ingest=False)


@dataclass
class BatchJob:
    plan: Plan
    run_dir: Path | None = None
    """The run's directory; None = ``<root>/<new run id>`` (``root`` of ``run_batch``)."""
    config: Any = None
    """The composed config (a DictConfig), saved in the run directory so the run can be
    re-planned; rendered only for a job that runs (a cached check renders none)."""
    label: str = ""
    run_id: str | None = None
    """The first run's id; None = a new one (``run_dir``'s name when that is new too)."""
    records: list[RunRecord] = field(default_factory=list)
    from_store: bool = False
    """The first record came from the store (the verdict cache), not from a run."""
    retries: int = 0
    """More tries of a run whose error was the infrastructure's (``retries.infrastructure``)."""


async def run_batch(  # noqa: C901 (the batch loop: slots, the verdict cache, cancellation and progress in one place)
    jobs: list[BatchJob],
    session: Session,
    *,
    root: Path | None = None,
    parallel: int = 2,
    reuse: bool = False,
    repeats: int = 0,
    sweep_id: str | None = None,
    on_record: Callable[[BatchJob, RunRecord], None] | None = None,
    slots: RunSlots | None = None,
    progress: TaskProgress | None = None,
    images: EnsuredImages | None = None,
    ingest_each: bool = True,
    on_written: Callable[[RunRecord], None] | None = None,
) -> list[BatchJob]:
    """Run ``jobs`` (each once, plus ``repeats``), at most ``parallel`` at a time (or as
    ``slots`` allow, shared with other batches); returns them with their records.
    ``reuse``: a spec with a completed run in the store is not run again. ``progress`` is told
    as each run starts and ends (an answer from the store counts as skipped). ``images``: what
    batches sharing it (of one session) have ensured already. ``ingest_each`` False: each run's
    final record is written durably and spooled, and the caller ingests them all at once;
    ``on_written`` is told of each final record once it is written (``Runner.on_written``)."""
    # The verdict cache first, in one read: what it answers needs no image and no runner.
    done = session.store.completed_runs_for([job.plan.spec.spec_hash for job in jobs]) if reuse else {}
    for job in jobs:
        cached = done.get(job.plan.spec.spec_hash)
        if cached is not None:
            job.records.append(cached)
            job.from_store = True
            if progress is not None:
                progress.finished(cached.status, was_running=False, from_store=True)
            if sweep_id is not None:  # the sweep's report counts the run it reused
                session.store.link_sweep_run(sweep_id, cached.run_id)
            if on_record is not None:
                on_record(job, cached)
    pending = [job for job in jobs if not job.from_store or repeats]
    if not pending:
        return jobs
    slots = slots or RunSlots(parallel)
    # Imported here: a batch answered wholly from the store (a cached check) never loads the
    # run machinery.
    from engine.capabilities.preload import serving_loaded
    from engine.run.records import new_run_id
    from engine.run.trial import Runner

    # What serves the runs' tools (the MCP SDK, asyncssh) loads in a thread while the images
    # are checked and the first runs' containers start (a sweep started it even earlier).
    serving = asyncio.wrap_future(serving_loaded())
    serving.add_done_callback(lambda f: f.cancelled() or f.exception())  # awaited by every run
    images = images or EnsuredImages()
    ensured = {}
    for image in {image.tag: image for job in pending for image in job.plan.images}.values():
        try:
            ensured[image.tag] = await images.ensure(image, session)
        except BuildError as exc:
            # The builder knows images, not tasks: the user fixes a task, so it is named first.
            tasks = sorted({job.plan.spec.task_id for job in pending if image in job.plan.images})
            raise BuildError(f"task{'s' if len(tasks) > 1 else ''} {', '.join(tasks)}: {exc}") from exc
    ensured.update(await _setup_layers(pending, session, images))
    runner = Runner(
        store=session.store,
        builder=session.builder,
        runtime=session.runtime,
        ensured=ensured,
        serving=serving,
        ingest_each=ingest_each,
        on_written=on_written,
    )

    async def execute(
        job: BatchJob, run_dir: Path | None, run_id: str | None, retry_of: RunRecord | None = None
    ) -> RunRecord:
        async with slots.holding:
            run_id = run_id or new_run_id()
            ahead = runner.start_ahead(job.plan, run_id)
            try:
                await ahead.placed()  # a listed host's slot before a running slot, never the other way round
                async with _Slot(slots.running) as slot:
                    if progress is not None and retry_of is None:  # a retry is the same run again
                        progress.running()
                    where = run_dir or (root or _default_root()) / run_id
                    where.mkdir(parents=True, exist_ok=True)
                    if job.config is not None:
                        from engine.config.text import config_yaml

                        (where / CONFIG_FILE).parent.mkdir(parents=True, exist_ok=True)
                        (where / CONFIG_FILE).write_text(config_yaml(job.config))
                    # The slot is the next run's once this one works in no workspace: its final
                    # store write and its grading container's removal overlap that run's start.
                    record = await runner.execute(
                        job.plan,
                        where,
                        run_id=run_id,
                        resources=ahead,
                        sweep_id=sweep_id,
                        done_with_workspaces=slot.release,
                        retry_of=None if retry_of is None else retry_of.run_id,
                    )
            except BaseException:
                await ahead.discard()  # a run that never began (or failed to): nothing of it stays
                raise
        if on_record is not None:
            on_record(job, record)
        return record

    async def tried(job: BatchJob, run_dir: Path | None, run_id: str | None) -> None:
        """One run of ``job``, tried again while the infrastructure failed it and tries are left:
        the job (and the progress) count only its last try."""
        record = await execute(job, run_dir, run_id)
        first_dir = Path(record.run_dir or _default_root() / record.run_id)
        for retry in range(1, job.retries + 1):
            if not record.infrastructure:
                break
            # Made now, so a sweep's display sees the job retrying, not failed (progress.job_state).
            again = first_dir / f"retry-{retry}"
            again.mkdir(parents=True, exist_ok=True)
            record = await execute(job, again, None, retry_of=record)
        if progress is not None:
            progress.finished(record.status)
        job.records.append(record)

    async def one(job: BatchJob) -> None:
        if not job.from_store:
            await tried(job, job.run_dir, job.run_id)
        for _ in range(repeats):
            await tried(job, None, None)  # a repeat gets a directory of its own

    await _all_of(*(one(job) for job in pending))
    return jobs


async def _setup_layers(jobs: list[BatchJob], session: Session, images: EnsuredImages) -> dict[str, bool]:
    """The jobs' setup layers (``engine/plan/setup_layer.py``) that could be built, each once, by
    tag (whether it was cached). One that fails to build leaves its runs to set themselves up in
    their workspaces, as a flavor always can: a setup that fails is then each run's own error,
    recorded with its phase, and never the batch's."""
    built: dict[str, bool] = {}
    for image in {job.plan.setup_image.tag: job.plan.setup_image for job in jobs if job.plan.setup_image}.values():
        try:
            built[image.tag] = await images.ensure(image, session)
        except BuildError as exc:
            tasks = sorted({job.plan.spec.task_id for job in jobs if job.plan.setup_image == image})
            log.warning("task%s %s: set up in each run's workspace: %s", "s" * (len(tasks) > 1), ", ".join(tasks), exc)
    return built


async def run_one(
    plan: Plan,
    session: Session,
    *,
    run_dir: Path | None = None,
    root: Path | None = None,
    run_id: str | None = None,
    config: Any = None,
    sweep_id: str | None = None,
    retries: int = 0,
) -> RunRecord:
    """One planned run to its stored record: a batch of one, so a single run (``crucible run``,
    ``rerun``, ``serve``, a bench's, a test's) goes exactly as each run of a batch does. The
    arguments are ``BatchJob``'s and ``run_batch``'s."""
    job = BatchJob(plan, run_dir=run_dir, config=config, run_id=run_id, retries=retries)
    await run_batch([job], session, root=root, sweep_id=sweep_id)
    return job.records[0]


class _Slot:
    """One of ``RunSlots.running``, held from ``async with`` until ``release`` (or the block's
    end, whichever comes first): released exactly once."""

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self.semaphore, self.held = semaphore, False

    async def __aenter__(self) -> _Slot:
        await self.semaphore.acquire()
        self.held = True
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.semaphore.release()


async def _all_of(*runs: Awaitable[object]) -> None:
    """Await every run. On a cancel or a failure, the others are cancelled, and this returns
    (raises) only once every one of them has ended: a cancelled run records itself and takes
    down what it started, which ``asyncio.gather`` would leave running unawaited."""
    tasks = [asyncio.ensure_future(run) for run in runs]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        while not all(task.done() for task in tasks):
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                continue  # cancelled again: still wait, the runs are ending
        raise


def _default_root() -> Path:
    from engine.util import paths

    return paths.runs_dir() / "batch"
