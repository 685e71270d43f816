"""Opening the DuckDB file briefly, taking turns with every other process.

DuckDB refuses a second process outright ("Could not set lock on file") and a refused
open still costs ~12 ms of CPU, so many sweep workers retrying it would burn the cores
they share. crucible processes therefore queue on a cheap advisory ``flock`` beside the
store first (shared for readers, exclusive for writers, as DuckDB's own lock), and only
then open the database, still retrying in case a process outside crucible (a DuckDB
shell) holds it. Both waits use exponential backoff with full jitter under one deadline.

A connection is never cached: each operation opens and closes its own, so a forked
child can never reuse its parent's.
"""
from __future__ import annotations

import fcntl
import os
import random
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from engine.errors import StoreError

# One DuckDB instance per file per process: read-only and read-write connections to one
# file cannot coexist in a process, so threads take turns. Replaced in a forked child,
# where a lock held by a parent thread would never be released.
_process_lock = threading.RLock()


def _reset_after_fork() -> None:
    global _process_lock
    _process_lock = threading.RLock()


os.register_at_fork(after_in_child=_reset_after_fork)


class _Backoff:
    """Sleeps of growing, jittered length until a deadline; ``expired`` says when to give up."""

    def __init__(self, timeout: float, first: float = 0.002, cap: float = 0.1):
        self.deadline = time.monotonic() + timeout
        self.delay, self.cap = first, cap

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def sleep(self) -> None:
        # Full jitter: competing processes spread out instead of retrying in step.
        time.sleep(min(random.uniform(0, self.delay), max(0.0, self.deadline - time.monotonic())))
        self.delay = min(self.delay * 2, self.cap)


def is_lock_conflict(exc: BaseException) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "different configuration" in text


class Turn:
    """This process's turn at the store file; the DuckDB connection is opened on first use."""

    def __init__(self, path: Path, read_only: bool, backoff: _Backoff, timeout: float):
        self._args = (path, read_only, backoff, timeout)
        self._con: duckdb.DuckDBPyConnection | None = None

    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = _connect(*self._args)
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


@contextmanager
def store_turn(path: Path, *, read_only: bool, timeout: float) -> Iterator[Turn]:
    """Wait for a turn at ``path`` (shared for readers, exclusive for writers).

    Lets a writer look at the spool inside its turn and skip opening the database when
    another process has already ingested everything. Raises StoreError at ``timeout``.
    """
    backoff = _Backoff(timeout)
    with _process_lock, _turn(path, exclusive=not read_only, backoff=backoff):
        turn = Turn(path, read_only, backoff, timeout)
        try:
            yield turn
        finally:
            turn.close()


@contextmanager
def open_store(path: Path, *, read_only: bool, timeout: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh connection to ``path``, closed on exit. Raises StoreError if still locked at ``timeout``."""
    with store_turn(path, read_only=read_only, timeout=timeout) as turn:
        yield turn.connection()


@contextmanager
def _turn(path: Path, *, exclusive: bool, backoff: _Backoff) -> Iterator[None]:
    lock_path = path.with_name(path.name + ".crucible-lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        yield  # a read-only directory: fall back to DuckDB's own lock and retries
        return
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if backoff.expired:
                    break  # let the DuckDB open report the conflict (it names the holder)
                backoff.sleep()
        yield
    finally:
        os.close(fd)  # releases the flock


def _connect(path: Path, read_only: bool, backoff: _Backoff, timeout: float) -> duckdb.DuckDBPyConnection:
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            if not is_lock_conflict(exc):
                raise StoreError(f"cannot open store {path}: {first}") from exc
            if backoff.expired:
                raise StoreError(f"store {path} stayed locked for {timeout:.0f} s ({first})") from exc
        backoff.sleep()
