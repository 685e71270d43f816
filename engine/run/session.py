"""What every command needs once: the store, the builder, the runtime, and housekeeping.

Housekeeping runs at the start of every command: containers whose owner process is gone
are removed (a ``kill -9`` must not leak containers) and runs it left "running" are
recorded as errors, so no run stays stuck; terminals such a run left running become stale,
and terminals past their retention window are closed.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from engine.runtimes.docker.daemon import EngineNotListening, ask_local_engine, local_engine_socket
from engine.runtimes.owner import LABEL_OWNER_HOST, LABEL_OWNER_PID, owner_alive
from engine.util import paths

if TYPE_CHECKING:  # Hydra's config store costs ~0.3 s to import: query/show/report never need it
    from engine.config.schema import CrucibleConfig, IntegrityConfig
    from engine.interfaces import ImageBuilder, Runtime
    from engine.store.duckdb import DuckDBStore

log = logging.getLogger("crucible")


@dataclass
class Session:
    store: DuckDBStore
    builder: ImageBuilder
    runtime: Runtime


def open_store(path: str | None = None, *, create: bool = True, housekeeping: bool = False) -> DuckDBStore:
    """The store at ``path`` (None: the default), opened once now: a path that cannot be a
    store is one ConfigError naming it, before the command starts any work (and, with
    ``create=False``, a path where there is no store yet). ``housekeeping``: the caller
    housekeeps next (``DuckDBStore.validate`` reads what is due in the same turn)."""
    from engine.store.duckdb import DuckDBStore

    return DuckDBStore(path).validate(create=create, housekeeping=housekeeping)


def open_housekept_store(path: str | None = None) -> DuckDBStore:
    """The store, after housekeeping: what commands that read results open (query, show,
    report), so that after a ``kill -9`` the next such command already shows no run stuck
    "running" and leaves no orphaned container. A ``path`` given (``--store``) must hold a
    store already: a reader never makes one up; the default store is made on first use."""
    store = open_store(path, create=not path, housekeeping=True)
    housekeeping(store)
    return store


def housekeeping(store: DuckDBStore, *, terminals: bool = True) -> None:
    """Best effort: reap orphaned containers and runs. Never blocks a command on failure.

    Cheap when there is nothing to reap (the usual case, and every query/show/report pays
    it): the Docker SDK and the local runtime are imported only once an orphan may exist.
    """
    try:
        if _docker_orphans_possible():
            from engine.runtimes.docker.reaper import reap_orphans

            reap_orphans()
    except Exception as exc:  # no engine here is reported by the commands that need one
        log.debug("reaper skipped: %s", exc)
    try:
        if _local_orphans_possible():
            from engine.runtimes.local.template import reap_local_orphans

            reap_local_orphans()
    except Exception as exc:
        log.debug("local reaper skipped: %s", exc)
    try:
        from engine.run.bridges import reap_orphan_bridges

        reap_orphan_bridges()
    except Exception as exc:
        log.debug("bridge reaper skipped: %s", exc)
    try:  # one read turn says what is due, not one per chore (a store that cannot say: both are)
        runs_due, terminals_due = store.housekeeping_due() if hasattr(store, "housekeeping_due") else (True, True)
    except Exception as exc:
        log.debug("housekeeping read skipped: %s", exc)
        runs_due = terminals_due = True
    if runs_due:  # then the terminals too: a run it ends (or recovers) may leave one to mark stale
        terminals_due = True
        try:
            store.mark_orphaned_runs()
        except Exception as exc:
            log.debug("orphaned-run sweep skipped: %s", exc)
    if not terminals or not terminals_due:  # gc does it itself, and reports it
        return
    try:  # after the runs: a terminal whose run was just marked dead becomes stale now
        store.housekeep_terminals()
    except Exception as exc:
        log.debug("terminal housekeeping skipped: %s", exc)


def _docker_orphans_possible() -> bool:
    """Whether the Docker engine may hold a container of a dead crucible owner on this host.

    One request on the engine's unix socket, the one ``docker.from_env`` would use, without
    the Docker SDK (whose import alone costs ~0.15 s). True when it cannot tell (a
    DOCKER_HOST that is no unix socket, an unexpected answer): then ``reap_orphans`` decides.
    False when no engine can be reached there: ``reap_orphans`` would find none either.
    """
    where = local_engine_socket()
    if where is None:
        return True
    filters = quote(json.dumps({"label": [LABEL_OWNER_PID]}))
    try:
        status, body = ask_local_engine(where, f"/containers/json?all=1&filters={filters}", timeout=30)
    except EngineNotListening:
        return False
    except OSError:
        return True
    if status != 200:
        return True
    try:
        containers = json.loads(body)
    except ValueError:
        return True
    host = socket.gethostname()
    for container in containers if isinstance(containers, list) else [None]:
        labels = container.get("Labels") if isinstance(container, dict) else None
        if not isinstance(labels, dict):
            return True
        if labels.get(LABEL_OWNER_HOST) == host and not owner_alive(labels):
            return True
    return False


def _local_orphans_possible() -> bool:
    """Whether the local runtime left anything (a run root, a template stage) to look at;
    ``reap_local_orphans`` decides which are orphans."""
    local = paths.home() / "local"
    for name, prefix in (("runs", ""), ("templates", ".stage-")):
        try:
            with os.scandir(local / name) as entries:
                if any(entry.name.startswith(prefix) for entry in entries):
                    return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def session_for(cfg: CrucibleConfig, store: DuckDBStore | None = None) -> Session:

    from engine.config.plugins import instantiate

    store = store or open_store(cfg.store)
    runtime = instantiate(cfg.runtime, where="runtime")
    return Session(store=store, builder=runtime.image_builder(ca_bundle=cfg.build.ca_bundle), runtime=runtime)


def require_integrity(runtime: Runtime, integrity: IntegrityConfig) -> None:
    """Refuse, before anything starts, a mode this runtime cannot give (never weaken it)."""
    runtime.require(integrity)
