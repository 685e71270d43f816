"""Bridge directories: where a run's unix sockets live on the host, named by their owner.

A run makes one under ``BRIDGE_ROOT`` (short: unix socket paths are limited to 108 bytes) and
removes it when it ends; a run killed with -9 cannot, so its name carries its owner (pid and
start time, ``engine.runtimes.owner``) and housekeeping removes those whose owner is gone.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from engine.runtimes.owner import LABEL_OWNER_PID, LABEL_OWNER_STARTED, owner_alive, process_start_time

log = logging.getLogger(__name__)

BRIDGE_PREFIX = "crucible-bridge-"
BRIDGE_ROOT = Path("/tmp")
"""Where runs make their bridge directories (short: unix socket paths are limited to 108 bytes)."""


def bridge_prefix() -> str:
    """A bridge directory's name prefix naming its owner (this pid and its start time), so a
    bridge left by a killed run can be told from a live one's."""
    return f"{BRIDGE_PREFIX}{os.getpid()}.{process_start_time(os.getpid()) or 0}-"


def reap_orphan_bridges(root: Path = BRIDGE_ROOT) -> list[str]:
    """Remove the bridge directories of dead owners (a run killed with -9 leaves its bridge);
    return their paths. A name without an owner (made by an older crucible) is left alone."""
    reaped = []
    for path in root.glob(f"{BRIDGE_PREFIX}*"):
        owner, _, _ = path.name[len(BRIDGE_PREFIX) :].partition("-")
        pid, _, started = owner.partition(".")
        if not pid.isdigit() or not started.isdigit():
            continue
        labels = {LABEL_OWNER_PID: pid, LABEL_OWNER_STARTED: "" if started == "0" else started}
        if owner_alive(labels):
            continue
        import shutil  # here: every command housekeeps, and an orphan is rare (~2 ms, with bz2 and lzma)

        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            log.info("removed orphaned bridge %s (owner pid %s gone)", path, pid)
            reaped.append(str(path))
    return reaped
