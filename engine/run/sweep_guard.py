"""Sweep workers end when the process that launched the sweep dies.

joblib's loky workers are children of the ``crucible run -m`` process, in its process
group, so a ``kill -9`` of the group ends them together. When the launcher alone dies
(killed by pid, OOM-killed), measured with joblib 1.6 / loky: its workers are
re-parented to init, finish the jobs in hand and then idle until loky's 300 s timeout.
Those runs go on with nobody watching: no progress, no summary, no Ctrl-C.

So the launcher names itself (host, pid, pid start time) in an environment variable its
workers inherit, and each worker runs a daemon thread that checks, once a second, that
the launcher still lives. When it is gone the worker exits at once (``os._exit``): it
takes the same path as a ``kill -9`` of the whole group, which crucible must survive
anyway. Its containers carry its pid as their owner and its run is stored as
"running" with its pid, so the next crucible command's housekeeping removes the
containers (``engine.runtimes.docker.reaper``) and records the run as an error, "owner process died"
(``DuckDBStore.mark_orphaned_runs``); ``resume=true`` runs it again.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time

from engine.runtimes.owner import LABEL_OWNER_PID, LABEL_OWNER_STARTED, owner_alive, process_start_time

log = logging.getLogger("crucible.sweep")

OWNER_ENV = "CRUCIBLE_SWEEP_OWNER"
"""``host:pid:start_ticks`` of the process that launched the sweep."""
EXIT_CODE = 75
_guarded_pid: int | None = None
_lock = threading.Lock()


def claim_sweep() -> None:
    """In the launching process, before the launcher starts workers: name this process as the owner."""
    os.environ[OWNER_ENV] = f"{socket.gethostname()}:{os.getpid()}:{process_start_time(os.getpid()) or ''}"


def sweep_owner() -> dict[str, str] | None:
    """The owner's liveness labels, when this process is a worker of a sweep launched on this host."""
    host, _, rest = os.environ.get(OWNER_ENV, "").partition(":")
    pid, _, started = rest.partition(":")
    # Another host's owner (a remote launcher) cannot be checked from here; the owner itself needs no guard.
    if host != socket.gethostname() or not pid.isdigit() or int(pid) == os.getpid():
        return None
    return {LABEL_OWNER_PID: pid, LABEL_OWNER_STARTED: started}


def guard_worker(poll_s: float = 1.0) -> bool:
    """Start the watch (once per process) if this is a sweep worker; return whether it runs."""
    global _guarded_pid
    owner = sweep_owner()
    if owner is None:
        return False
    with _lock:
        if _guarded_pid != os.getpid():  # a forked child does not inherit its parent's thread
            threading.Thread(target=_watch, args=(owner, poll_s), name="crucible-sweep-guard", daemon=True).start()
            _guarded_pid = os.getpid()
    return True


def _watch(owner: dict[str, str], poll_s: float) -> None:
    while owner_alive(owner):
        time.sleep(poll_s)
    try:
        print(
            f"crucible: sweep worker {os.getpid()} exits: the sweep's process (pid {owner[LABEL_OWNER_PID]}) is gone",
            file=sys.stderr,
            flush=True,
        )
    finally:
        os._exit(EXIT_CODE)
