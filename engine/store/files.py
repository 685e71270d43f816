"""Durable record files: atomic JSON writes, the spool's naming, and owner liveness.

A record reaches the store in two hops. First it is written, atomically and fsynced,
beside the run's outputs (``record.json``) and into the spool (a "running" record into the
spool first, a final one beside the run first: ``DuckDBStore.write_run_record``); only then
is it ingested into DuckDB. A crash between the hops loses nothing: the spool file stays
until a later ingest commits it. Spool files are the record's dict plus two keys,
``record_kind`` ("run" | "build") and ``record_seq`` (a per-record sequence that
orders two versions of one record; ``RunRecord.from_dict`` ignores both).
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

TMP_PREFIX = ".tmp-"
"""Files being written carry this prefix; ingesters never read them."""

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
_seq_lock = threading.Lock()
_last_seq = 0


def next_seq() -> int:
    """A strictly increasing number in this process, close to wall-clock nanoseconds.

    Wall-clock based so that a record written later by another process (an orphan
    sweep marking a dead run) also orders after the dead owner's records.
    """
    global _last_seq
    with _seq_lock:
        _last_seq = max(time.time_ns(), _last_seq + 1)
        return _last_seq


def safe_name(text: str) -> str:
    """A filename-safe rendering of an id (the real id is inside the file)."""
    return _SAFE_NAME.sub("_", text)[:120] or "_"


def spool_name(kind: str, key: str, seq: int, status: str = "") -> str:
    tail = f".{safe_name(status)}" if status else ""
    return f"{kind}.{safe_name(key)}.{seq:020d}{tail}.json"


def atomic_write_json(path: Path, document: Any) -> Path:
    """Write ``document`` to ``path`` so that readers see the old file or the whole new one.

    tmp file in the same directory, fsync, rename over, fsync the directory (the rename
    itself must survive a power cut, not only the bytes).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False, default=str).encode()
    tmp = path.parent / f"{TMP_PREFIX}{os.getpid()}-{threading.get_ident()}-{path.name}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
    return path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pending_files(spool: Path) -> list[Path]:
    """Spool files ready to ingest, oldest sequence first (names sort by kind, key, seq)."""
    if not spool.is_dir():
        return []
    return sorted(
        p for p in spool.iterdir() if p.suffix == ".json" and not p.name.startswith(TMP_PREFIX) and p.is_file()
    )


def sweep_stale_tmp(spool: Path, older_than_s: float = 3600.0) -> None:
    """Remove tmp files a killed writer left behind (never a complete record: those are renamed)."""
    cutoff = time.time() - older_than_s
    for p in spool.glob(f"{TMP_PREFIX}*"):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
        except FileNotFoundError:
            pass


def quarantine(path: Path, reason: str) -> Path | None:
    """Move an unreadable spool file aside (with the reason beside it) so it cannot block ingestion."""
    rejected = path.parent / "rejected"
    rejected.mkdir(exist_ok=True)
    target = rejected / path.name
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return None
    (rejected / f"{path.name}.reason.txt").write_text(reason + "\n")
    return target


def this_host() -> str:
    return socket.gethostname()


def process_alive(pid: int, not_started_after: float | None = None) -> bool:
    """Whether ``pid`` is a live process on this host (zombies count as dead).

    ``not_started_after`` (epoch seconds): a process with this pid that started later is a
    reuse of the number, not the owner, so the owner is dead.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc (not Linux): trust kill(0)
    state, start_ticks = stat
    if state in ("Z", "X"):
        return False
    if not_started_after is not None:
        started = _boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")
        # btime has one-second resolution; allow for it before calling the pid reused.
        if started > not_started_after + 2.0:
            return False
    return True


def _proc_stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; split after its last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0
