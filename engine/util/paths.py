"""Where crucible keeps its state. One root, ``$CRUCIBLE_HOME`` (default ``~/.crucible``).

$CRUCIBLE_HOME/store.duckdb   the results store (override: store.path / $CRUCIBLE_STORE)
$CRUCIBLE_HOME/runs/          one directory per run: record.json, logs, config
$CRUCIBLE_HOME/spool/         records written but not yet ingested into the store
$CRUCIBLE_HOME/cache/         generated repos, git bundles, base-image rootfs
$CRUCIBLE_HOME/builds/        build logs and build records
$CRUCIBLE_HOME/locks/         inter-process locks (image builds, ingestion)
$CRUCIBLE_HOME/task-repos/    task repos `crucible task new` made from upstream fixes
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent


def home() -> Path:
    """``$CRUCIBLE_HOME``; unset or empty, ``~/.crucible`` (an empty one is no order to keep
    state in whatever directory a command runs from)."""
    named = Path(os.environ.get("CRUCIBLE_HOME") or "~/.crucible").expanduser()
    return _resolved(named) if named.is_absolute() else named.resolve()


@functools.lru_cache(maxsize=16)
def _resolved(named: Path) -> Path:
    """An absolute home, resolved once a process: a run asks for its directories dozens of
    times, and each ``resolve`` is a walk of system calls."""
    return named.resolve()


def store_path() -> Path:
    explicit = os.environ.get("CRUCIBLE_STORE")
    return Path(explicit).expanduser().resolve() if explicit else home() / "store.duckdb"


def sub(name: str) -> Path:
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    return sub("runs")


def spool_dir() -> Path:
    return sub("spool")


def cache_dir() -> Path:
    return sub("cache")


def builds_dir() -> Path:
    return sub("builds")


def locks_dir() -> Path:
    return sub("locks")
