"""A run's record as it is assembled: its first ("running") version and the files written
beside it, the phase it is in and what each phase took, the store writes it need not wait
for, and what the record says of the integrity and the limits the run got.

The record is written durably beside the run's outputs before it reaches the store; the
final one (``Runner._finish``) is authoritative.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import socket
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.errors import InfrastructureError
from engine.interfaces import Runtime, Store, Workspace
from engine.models import BuildRecord, RunRecord, RunSpec
from engine.plan.spec import Plan
from engine.run.resources import through_cancel

log = logging.getLogger(__name__)

LIMIT_NOTICE = "task limit: "
"""How a task-limit warning begins: a notice of what the run withheld, not a failed step (the
shipping gate, which fails a golden with warnings, passes over these)."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def new_run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S") + "-" + uuid.uuid4().hex[:10]


def new_record(
    plan: Plan, run_dir: Path, *, sweep_id: str | None, run_id: str | None = None, retry_of: str | None = None
) -> RunRecord:
    """The run's "running" record, before anything of it starts (``retry_of``: the run it tries
    again after an infrastructure error)."""
    spec = plan.spec
    return RunRecord(
        run_id=run_id or new_run_id(),
        spec_hash=spec.spec_hash,
        spec=spec.to_dict(),
        status="running",
        task_id=spec.task_id,
        agent=spec.agent_name,
        model=spec.model,
        flavor=spec.flavor.name,
        runtime=spec.runtime.name,
        integrity_requested=spec.integrity.mode,
        integrity_obtained=None,
        attempt=spec.attempt,
        seed=spec.seed,
        sweep_id=sweep_id,
        started_at=now_iso(),
        run_dir=str(run_dir),
        image_tag=plan.image.tag,
        owner_pid=os.getpid(),
        owner_host=socket.gethostname(),
        retry_of=retry_of,
    )


def infrastructure_failure(exc: BaseException) -> InfrastructureError | None:
    """The ``InfrastructureError`` behind ``exc`` (itself, or what it was raised from), if the
    machinery failed rather than the task or the agent; None otherwise."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, InfrastructureError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def write_plan_files(plan: Plan, run_dir: Path) -> None:
    """What the run was planned as, beside its outputs: its spec, its pins, and the named
    tests it is graded on (from the task or its lock, as the lock was then): a re-plan uses
    these, not whatever the lock says by the time of a rerun."""
    run_dir.mkdir(parents=True, exist_ok=True)
    task = plan.spec.task
    (run_dir / "spec.json").write_text(json.dumps(plan.spec.to_dict(), indent=2, sort_keys=True))
    (run_dir / "pins.json").write_text(json.dumps(task.pins, indent=2, sort_keys=True))
    (run_dir / "named_tests.json").write_text(
        json.dumps({"fail_to_pass": list(task.fail_to_pass), "pass_to_pass": list(task.pass_to_pass)}, indent=2)
    )


def write_traceback(run_dir: Path) -> None:
    (run_dir / "error.log").write_text(traceback.format_exc())


class Phase:
    """Tracks the current phase (for error records) and per-stage wall time."""

    def __init__(self, record: RunRecord) -> None:
        self.record = record
        self.name = "plan"

    @contextmanager
    def timed(self, name: str, *, is_phase: bool = True) -> Iterator[None]:
        if is_phase:  # teardown runs in a finally: it must not hide the phase that failed
            self.name = name
        began = time.perf_counter()
        try:
            yield
        finally:
            self.record.timings[name] = round(self.record.timings.get(name, 0.0) + time.perf_counter() - began, 4)


class EarlyWrites:
    """Store writes a run need not wait for (its "running" record, its build records): made in
    order, in a worker thread, while the run goes on. ``drain`` waits for them; a failed one is
    logged, since the final record supersedes it (and ``Runner._finish`` raises if the store
    still fails).

    They are written durably but not ingested: the final record's ingest commits them in the
    same turn at the store (each turn opens the file: ~20 ms), and any crucible command that
    reads the store ingests them first, so a running run is never missing from a query."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._last: asyncio.Future[None] | None = None

    def record_run(self, record: RunRecord) -> None:
        self._then(self.store.record_run, copy.deepcopy(record))  # a snapshot: the run goes on mutating it

    def record_build(self, record: BuildRecord) -> None:
        self._then(self.store.record_build, record)

    def _then(self, write: Callable[..., None], item: RunRecord | BuildRecord) -> None:
        previous = self._last

        async def in_order() -> None:
            if previous is not None:
                await previous
            try:
                await asyncio.to_thread(write, item, ingest=False)
            except Exception as exc:
                log.warning("an early store write failed (the final record supersedes it): %s", exc)

        self._last = asyncio.ensure_future(in_order())

    async def drain(self) -> bool:
        """Wait until every write is done, even through a cancel; whether one arrived meanwhile
        (then the caller still writes its final record, and re-raises the cancel after)."""
        return await through_cancel(self._last)


class BuildRecords:
    """Stands in for the store during ``ensure`` (a worker thread): keeps its build records."""

    def __init__(self) -> None:
        self.records: list[BuildRecord] = []

    def record_build(self, record: BuildRecord, *, ingest: bool = True) -> None:
        self.records.append(record)  # written by the run's early writes, which never ingest


def obtained_integrity(requested: Any, ws: Workspace | None) -> str:
    """The mode the run actually got, from what the workspace reports of itself: a mode
    that wants the agent off the network, given a workspace with one, is recorded as
    ``none`` (the runtime refuses what it cannot give before anything starts; this is the
    record of what it gave). No workspace (an agent that works alone): nothing had a network."""
    if not requested.agent_network and ws is not None and ws.network:
        return "none"
    mode: str = requested.mode
    return mode


def limit_warnings(spec: RunSpec, runtime: Runtime) -> list[str]:
    """One line each for a task limit the run does not give: a network the integrity mode
    withholds, cpus or memory a runtime without cgroups cannot set."""
    limits, found = getattr(spec, "limits", None), list[str]()
    if limits is None:
        return found
    if limits.network and not spec.integrity.agent_network:
        found.append(
            f"{LIMIT_NOTICE}the task allows the agent internet access; integrity {spec.integrity.mode} "
            "gives it no network"
        )
    if (limits.cpus or limits.memory_bytes) and not getattr(runtime, "limits_resources", False):
        found.append(
            f"{LIMIT_NOTICE}the task's cpus/memory are not applied: runtime "
            f"{getattr(runtime, 'name', spec.runtime.name)} sets no cgroups"
        )
    return found
