"""What every command needs once: the store, the builder, the runtime, and housekeeping.

Housekeeping runs at the start of every command: containers whose owner process is gone
are removed (a ``kill -9`` must not leak containers) and runs it left "running" are
recorded as errors, so no run stays stuck.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.config.schema import CrucibleConfig

log = logging.getLogger("crucible")


@dataclass
class Session:
    store: object
    builder: object
    runtime: object


def open_store(path: str | None = None):
    from engine.store.duckdb import DuckDBStore

    return DuckDBStore(path)


def open_housekept_store(path: str | None = None):
    """The store, after housekeeping: what commands that read results open (query, show,
    report), so that after a ``kill -9`` the next such command already shows no run stuck
    "running" and leaves no orphaned container."""
    store = open_store(path)
    housekeeping(store)
    return store


def housekeeping(store) -> None:
    """Best effort: reap orphaned containers and runs. Never blocks a command on failure."""
    try:
        from engine.run.reaper import reap_orphans

        reap_orphans()
    except Exception as exc:  # no engine here is reported by the commands that need one
        log.debug("reaper skipped: %s", exc)
    try:
        from engine.runtimes.local.template import reap_local_orphans

        reap_local_orphans()
    except Exception as exc:
        log.debug("local reaper skipped: %s", exc)
    try:
        store.mark_orphaned_runs()
    except Exception as exc:
        log.debug("orphaned-run sweep skipped: %s", exc)


def session_for(cfg: CrucibleConfig, store=None) -> Session:
    from engine.build.images import ContentAddressedBuilder
    from engine.run.trial import instantiate

    import dataclasses

    store = store or open_store(cfg.store)
    runtime = instantiate(dataclasses.asdict(cfg.runtime), where="runtime")
    # A runtime that does not run images (runtime=local) brings its own builder of
    # workspace templates; every other runtime gets content-addressed Docker images.
    if hasattr(runtime, "image_builder"):
        builder = runtime.image_builder()
    elif cfg.build.ca_bundle:
        builder = ContentAddressedBuilder(ca_bundle=cfg.build.ca_bundle)
    else:
        builder = ContentAddressedBuilder()
    return Session(store=store, builder=builder, runtime=runtime)


def require_integrity(runtime, integrity: dict) -> None:
    """Refuse, before anything starts, a mode this runtime cannot give (never weaken it)."""
    require = getattr(runtime, "require", None)
    if require is not None:
        require(integrity)
