"""One sweep job on a Ray worker (``hydra/launcher=ray``, engine/cli/ray_sweep.py).

A Ray worker shares no file system with the machine that launched the sweep: it never
opens the launcher's store or its $CRUCIBLE_HOME. The job runs against the worker's own
home (its $CRUCIBLE_HOME, or ~/.crucible there: caches, generated repos, locks) with a
store of its own, one per job, beside the job's directory; the finished run then travels
back as data (``JobResult``: the record, its build records and every file of its run
directory) and the launcher ingests it into its store. What the worker made is removed.

The launcher planned the job first (for ``resume=true``); the job carries that plan's spec
hash and run id. The worker plans again from the same config: a generated repo is rebuilt
deterministically, a lock file and a task's YAML come with crucible's conf/, a dataset row
from the dataset the task names. A plan whose hash differs means the worker's inputs are
not the launcher's; it is refused in one line, as is an input the worker lacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import BuildError, PlanError, UserError

STORE_DIR_PREFIX = ".store-"
"""The job's own store lives in ``<worker sweep dir>/.store-<job>/``, beside its run directory."""


@dataclass
class JobResult:
    """What a job sends back: a finished run (``run_id``, its directory's files and its build
    records), or ``user_error``, the one line that says why it could not run (the launcher
    marks the job with it). Each try of the run (a run tried again after an infrastructure
    error, in ``retry-N/``) is a ``record.json`` among the files."""

    worker: str
    run_id: str | None = None
    """The job's run: its last try."""
    files: dict[str, bytes] = field(default_factory=dict)
    """The run directory's files (records, logs, diff, trajectory, config) by relative path."""
    builds: list[dict[str, Any]] = field(default_factory=list)
    user_error: str | None = None


@dataclass(frozen=True)
class RemoteJob:
    """Hydra's task function for one job on a Ray worker: picklable, carrying what the
    launcher planned. ``board``: the launcher's ``JobBoard`` actor, told when the job starts
    (so the launcher knows which worker a job that dies was on)."""

    num: int
    run_id: str
    spec_hash: str
    retries: int = 0
    """More tries of a run the machinery failed on this worker (what is left of ``retries.infrastructure``)."""
    board: Any = None
    repos: dict[str, bytes] = field(default_factory=dict)
    """The task's local repos as the launcher has them (git bundles, by the path the task
    gives): a worker that lacks a path uses the copy (engine/plan/repos.py ``receive_repos``)."""
    locks: dict[str, str] = field(default_factory=dict)
    """The task's lock as the launcher planned with it (task id -> text; engine/plan/lock.py ``SENT``)."""

    def __call__(self, cfg: Any) -> JobResult:
        from hydra.core.hydra_config import HydraConfig

        worker = worker_name()
        if self.board is not None:
            self.board.started.remote(self.num, worker, os.getpid())
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        store_dir = run_dir.parent / f"{STORE_DIR_PREFIX}{run_dir.name}"  # beside: not shipped back
        try:
            return self._run(cfg, run_dir, store_dir, worker)
        except (UserError, PlanError) as exc:
            return JobResult(worker, user_error=f"on worker {worker}: {exc}")
        except BuildError as exc:  # no run started: the step and its first line, as _job says it
            return JobResult(worker, user_error=f"on worker {worker}: {str(exc).splitlines()[0]}")
        finally:
            from engine.store.duckdb import DuckDBStore

            shutil.rmtree(DuckDBStore(store_dir / "store.duckdb").spool, ignore_errors=True)  # its spool too
            shutil.rmtree(store_dir, ignore_errors=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            with contextlib.suppress(OSError):  # the sweep's folder, once its last job here is gone
                run_dir.parent.rmdir()

    def _run(self, cfg: Any, run_dir: Path, store_dir: Path, worker: str) -> JobResult:
        from omegaconf import OmegaConf, open_dict

        from engine.config.compose import to_typed
        from engine.plan.spec import plan
        from engine.run.batch import run_one
        from engine.run.session import session_for

        store_dir.mkdir(parents=True, exist_ok=True)
        if self.repos:
            from engine.plan.repos import receive_repos
            from engine.util import paths

            receive_repos(self.repos, paths.sub("sent-repos"))
        if self.locks:
            from engine.plan import lock

            lock.SENT.update(self.locks)
        with open_dict(cfg):
            cfg.store = str(store_dir / "store.duckdb")  # the job's own, never the launcher's store=
        OmegaConf.resolve(cfg)
        typed = to_typed(cfg)
        session = session_for(typed)
        planned = plan(typed, builder=session.builder)
        if planned.spec.spec_hash != self.spec_hash:
            raise PlanError(
                f"task {planned.spec.task_id} plans as spec {planned.spec.spec_hash[:12]} here but as "
                f"{self.spec_hash[:12]} on the launcher: this worker's inputs differ (its crucible, "
                "conf/ and lock files, a generated repo or a dataset row)"
            )
        record = asyncio.run(
            run_one(
                planned, session, run_dir=run_dir, run_id=self.run_id, sweep_id=typed.sweep_id, retries=self.retries
            )
        )
        return JobResult(worker, run_id=record.run_id, files=_files(run_dir), builds=_builds(session.store))


def worker_name() -> str:
    """This worker as a run's ``host``: its node's address and id, its host name."""
    try:
        import ray

        context = ray.get_runtime_context()
        address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # (ray: untyped)
        return f"ray node {address}/{context.get_node_id()[:8]} ({socket.gethostname()})"
    except Exception:  # noqa: BLE001 (not in a Ray worker: a name is still owed)
        return socket.gethostname()


def _builds(store: Any) -> list[dict[str, Any]]:
    """The build records the job's own store holds (only this job's: the store is its alone)."""
    from engine.store.files import safe_name
    from engine.util import paths

    _, rows = store.query("SELECT build_id FROM builds")
    found = []
    for (build_id,) in rows:
        try:
            document = json.loads((paths.builds_dir() / f"{safe_name(build_id)}.json").read_text())
        except (OSError, ValueError):
            continue  # a record another job replaced meanwhile: its row is all the store needs
        found.append({k: v for k, v in document.items() if k not in ("record_kind", "record_seq")})
    return found


def _files(run_dir: Path) -> dict[str, bytes]:
    """Every plain file of the run directory, by path relative to it."""
    return {
        str(path.relative_to(run_dir)): path.read_bytes()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
