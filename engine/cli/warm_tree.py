"""What a warm server imported, and whether it changed since (engine/cli/warm_server.py): the
files of crucible's packages and the image definition, by mtime."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from engine.cli.warm import CHECKOUT

PACKAGES = ("engine", "envs", "swe_tasks")
QUIET = 2.0
"""Seconds a tree must have gone unwritten before code is imported from it (a checkout or pull
writes its files one after another; an mtime has a clock tick's resolution)."""


def tree_snapshot(*, folders: bool = True) -> dict[str, int]:
    """Every file (and folder) of crucible's packages, and the image definition, by mtime
    (what ``engine_version`` hashes, and where a new module would appear)."""
    seen = {str(CHECKOUT / "Dockerfile.hud"): _mtime(CHECKOUT / "Dockerfile.hud")}
    for package in PACKAGES:
        for folder, _, files in os.walk(CHECKOUT / package):
            if folder.endswith("__pycache__"):
                continue
            if folders:
                seen[folder] = _mtime(folder)
            for name in files:
                seen[os.path.join(folder, name)] = _mtime(os.path.join(folder, name))
    return seen


def code_snapshot() -> dict[str, int]:
    """The tree's snapshot and each imported module's file, by mtime."""
    seen = tree_snapshot()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str):
            seen[path] = _mtime(path)
    return seen


def _mtime(path: str | Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def what_changed(snapshot: dict[str, int]) -> str | None:
    """The first file whose mtime differs from ``snapshot``'s: the code may not be what was imported."""
    for path, mtime in snapshot.items():
        if _mtime(path) != mtime:
            return f"{path} changed"
    return None


def drifted(before: dict[str, int], snapshot: dict[str, int], began: float) -> str | None:
    """A file of the tree written while this process imported it (``before`` against the
    ``snapshot`` after), or any file imported that was written in the QUIET seconds before the
    warm-up began (its mtime's clock tick may hide a write after it). A future mtime is no
    sign of either (a skewed clock, an unpacked archive): only a change from it is."""
    for path, mtime in before.items():
        if snapshot.get(path) != mtime:
            return f"{path} changed while warming up"
    now = time.time()
    for path, mtime in snapshot.items():
        if began - QUIET < mtime / 1e9 <= now and not os.path.isdir(path):
            return f"{path} was being written"
    return None


def until_quiet(limit: float = 60.0) -> None:
    """Wait (at most ``limit`` seconds) until no file of the tree was written in QUIET seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        now = time.time()
        newest = max((m / 1e9 for m in tree_snapshot(folders=False).values() if m / 1e9 <= now), default=0.0)
        if now - newest >= QUIET:
            return
        time.sleep(QUIET / 4)
