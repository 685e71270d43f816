"""Opening the DuckDB file briefly, taking turns with every other process.

DuckDB refuses a second process outright ("Could not set lock on file"), so nothing
holds the file open between operations. Two costs shape how it is opened:

- A new DuckDB instance costs ~40 ms of CPU; ATTACHing a file to an existing in-memory
  instance costs ~1 ms. So each process keeps one in-memory connection (for its own pid
  only: a forked child makes its own and never touches its parent's) and ATTACHes the
  store per operation, DETACHing (which releases the file lock) at the end.
- A refused open still costs CPU, and many sweep workers polling DuckDB would burn the
  cores they share. crucible processes therefore queue on a cheap advisory ``flock``
  beside the store first (shared for readers, exclusive for writers, like DuckDB's own
  lock), then ATTACH, still retrying in case a process outside crucible (a DuckDB shell)
  holds the file. Both waits back off exponentially with full jitter under one deadline.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    # The C extension that the ``duckdb`` package re-exports (the very same objects): the
    # package's Python layer around it (relational API, typing, version metadata) costs
    # ~0.15 s at import, most of a `crucible query`, and the store uses none of it.
    import _duckdb as duckdb
except ImportError:  # a DuckDB laid out otherwise
    import duckdb  # type: ignore[no-redef]  # the same objects, by their public name

from engine.errors import StoreError

__all__ = ["ALIAS", "WAL_CHECKPOINT_BYTES", "Turn", "duckdb", "is_lock_conflict", "open_store", "store_turn"]
"""``duckdb`` among them: the store's modules take it from here (whichever of the two it is)."""

log = logging.getLogger(__name__)

ALIAS = "store"
"""The attached store's catalog name; ``USE``d, so SQL names its tables unqualified."""

# Held from ATTACH to DETACH: threads of one process share its one in-memory instance,
# and a fork waits for it, so a child never inherits a half-used instance or a file that
# DuckDB's process-wide registry still counts as attached.
_process_lock = threading.RLock()
_instance: tuple[int, duckdb.DuckDBPyConnection] | None = None
_inherited: list[duckdb.DuckDBPyConnection] = []
_held_flocks: set[int] = set()
_flocks_lock = threading.Lock()
"""Makes opening+registering and unregistering+closing a flock fd atomic with respect to fork."""
_attached = False
_forked_mid_turn = False
_instance_tz: str | None = None
"""``$TZ`` when the instance was made: DuckDB takes its time zone from it then, once."""
_renew = False
"""Set by ``renew_instance``: the next turn makes the instance afresh."""


def _before_fork() -> None:
    _process_lock.acquire()
    _flocks_lock.acquire()


def _after_fork_in_parent() -> None:
    _flocks_lock.release()
    _process_lock.release()


def _after_fork_in_child() -> None:
    global _process_lock, _flocks_lock, _instance, _attached, _forked_mid_turn
    _process_lock, _flocks_lock = threading.RLock(), threading.Lock()
    # A flock belongs to the open file, which a fork shares: the child's copy of a turn
    # the parent holds would keep it held (against the child itself) after the parent's
    # turn ends. Dropping the copy leaves the parent's turn intact.
    for fd in _held_flocks:
        os.close(fd)
    _held_flocks.clear()
    if _instance is not None:
        # Never used nor closed here: its worker threads did not survive the fork, and
        # closing it could wait on them forever. Kept referenced so no destructor runs.
        _inherited.append(_instance[1])
        _instance = None
    # Only possible when the forking thread itself was inside a turn.
    _forked_mid_turn, _attached = _forked_mid_turn or _attached, False


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


WAL_CHECKPOINT_BYTES = 128 * 1024
"""The write-ahead log's size past which a write turn folds it into the file (a checkpoint).

By default DuckDB checkpoints whenever a file is detached, i.e. at the end of every turn
here. A checkpoint rewrites the tables' last row groups, so its cost grows with the store:
bench/bench_store.py measured a record_run (a real run's size, ~16 KB) at 61 ms in an empty
store and 234 ms at 2000 runs. Left in the log, a write costs each later ATTACH a replay
(~1 ms per transaction in the log). At 128 KB (~8 runs' records) the write stays at 40-55 ms
at any size and a read pays ~10 ms. The log is fsynced at each commit: nothing committed
waits on a checkpoint. DuckDB's own size trigger is not used: it estimates a commit's log
generously (256 KB checkpointed at every commit), so the turn looks at the file itself."""


SLOW_STRING_COMPRESSION = "dict_fsst,zstd"
"""String compressions the store does not write. A checkpoint rewrites the row group a turn
appended to, and DuckDB 2's dictionary+FSST analysis of it is most of a checkpoint's cost: in
copies of stores of 1,100-1,300 real runs a checkpoint after a sweep's 8 runs took 0.15-0.19 s of
CPU, 0.04-0.045 s without it (bench/bench_checkpoint.py; the fold of the log that ends most
warm sweeps). ZSTD, which DuckDB chooses for the long strings (specs, raw grades) once
dict_fsst is out, makes a file 4x smaller but a run read by id decompress its block: get_run at
2,000 runs 11-17 ms became 29-36. Left plain, those strings make the file ~2x larger (31 MB
against 14 for that copy); record_run at 2,000 runs, a checkpoint at every write, 137 ms -> 64
(bench/bench_store.py)."""


def _process_instance(*, fresh_if_changed: bool = True) -> duckdb.DuckDBPyConnection:
    """This process's instance, made if need be. ``fresh_if_changed`` (a turn's start): made
    afresh if user SQL may have changed it (``renew_instance``) or ``$TZ`` is not what it was."""
    global _instance, _renew, _instance_tz
    if fresh_if_changed and _wants_fresh():
        _discard_instance()  # what user SQL may have left, or a time zone not the process's now
    if _instance is None or _instance[0] != os.getpid():
        _instance_tz = os.environ.get("TZ")
        con = duckdb.connect(":memory:")
        con.execute("SET checkpoint_on_detach = 'DISABLED'")
        con.execute("SET checkpoint_threshold = '1TB'")  # never on its own: see WAL_CHECKPOINT_BYTES
        con.execute(f"SET disabled_compression_methods = '{SLOW_STRING_COMPRESSION}'")
        _instance = (os.getpid(), con)
    if fresh_if_changed:
        _renew = False
    return _instance[1]


def make_pending_instance() -> None:
    """Between a long-lived process's commands (a warm reader's): the instance a
    ``renew_instance`` asked for, made now rather than at the next command's first turn."""
    if _wants_fresh():
        with _process_lock:
            _process_instance()


def _wants_fresh() -> bool:
    """Whether this process's instance is to be made afresh (``renew_instance``, or ``$TZ``)."""
    held = _instance is not None and _instance[0] == os.getpid()
    return held and (_renew or _instance_tz != os.environ.get("TZ"))


def renew_instance() -> None:
    """Make the instance afresh before this process's next turn: a statement ran that may have
    changed it for good (a setting, an attached file, a loaded extension, an object in its own
    catalog). Nothing for a process about to exit; everything for a long-lived one (a warm
    reader), whose next command must find the instance as a new process would."""
    global _renew
    _renew = True


def interrupt() -> None:
    """Stop the statement this process's instance is running, if any (it raises
    ``duckdb.InterruptException``); an instance at rest is left as it is. For a thread other than
    the one running it: a warm reader whose client was interrupted or went away."""
    found = _instance
    if found is not None and found[0] == os.getpid():
        try:
            found[1].interrupt()
        except duckdb.Error:
            pass  # closed meanwhile (an interrupted turn's instance is made again): nothing runs on it


def _discard_instance() -> None:
    global _instance
    if _instance is not None and _instance[0] == os.getpid():
        _instance[1].close()
    _instance = None


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
        import random  # here: only a contended turn waits, and every command opens the store (~1 ms)

        time.sleep(min(random.uniform(0, self.delay), max(0.0, self.deadline - time.monotonic())))
        self.delay = min(self.delay * 2, self.cap)


def is_lock_conflict(exc: BaseException) -> bool:
    return "Could not set lock" in str(exc)


class Turn:
    """This process's turn at the store file; the file is attached on first use."""

    def __init__(self, path: Path, read_only: bool, backoff: _Backoff, timeout: float):
        self.path, self.read_only, self.backoff, self.timeout = path, read_only, backoff, timeout
        self._con: duckdb.DuckDBPyConnection | None = None

    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = _attach(self.path, self.read_only, self.backoff, self.timeout)
        return self._con

    def close(self) -> None:
        if self._con is not None:
            con, self._con = self._con, None
            try:
                if not self.read_only and _wal_bytes(self.path) > WAL_CHECKPOINT_BYTES:
                    con.execute("CHECKPOINT")
            except duckdb.Error as exc:  # the log stays; the next write turn tries again
                log.warning("store: checkpoint of %s failed: %s", self.path, _first_line(exc))
            finally:
                _release()


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _wal_bytes(path: Path) -> int:
    try:
        return os.stat(f"{path}.wal").st_size
    except FileNotFoundError:
        return 0


@contextmanager
def store_turn(path: Path, *, read_only: bool, timeout: float) -> Iterator[Turn]:
    """Wait for a turn at ``path`` (shared for readers, exclusive for writers).

    Lets a writer look at the spool inside its turn and skip opening the database when
    another process has already ingested everything. Raises StoreError at ``timeout``.
    """
    backoff = _Backoff(timeout)
    with _flock(path, exclusive=not read_only, backoff=backoff):
        turn = Turn(path, read_only, backoff, timeout)
        try:
            yield turn
        finally:
            turn.close()


@contextmanager
def open_store(path: Path, *, read_only: bool, timeout: float) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection with ``path`` attached and in use, detached on exit. StoreError if locked past ``timeout``."""
    with store_turn(path, read_only=read_only, timeout=timeout) as turn:
        yield turn.connection()


@contextmanager
def _flock(path: Path, *, exclusive: bool, backoff: _Backoff) -> Iterator[None]:
    try:
        with _flocks_lock:
            fd = os.open(path.with_name(path.name + ".crucible-lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            _held_flocks.add(fd)
    except OSError:
        yield  # a read-only directory: DuckDB's own lock and the retries still protect the file
        return
    try:
        mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except BlockingIOError:
                if backoff.expired:
                    break  # let the ATTACH report the conflict: its message names the holder
                backoff.sleep()
        yield
    finally:
        with _flocks_lock:
            if fd in _held_flocks:  # else this is a forked child, which closed its copy already
                _held_flocks.discard(fd)
                os.close(fd)  # releases the flock


def _attach(path: Path, read_only: bool, backoff: _Backoff, timeout: float) -> duckdb.DuckDBPyConnection:
    """The process instance with ``path`` attached and in use; returns holding ``_process_lock``."""
    global _attached
    if _forked_mid_turn:
        raise StoreError(
            "this process was forked while its parent had the store open, so DuckDB counts the file "
            "as in use here; fork outside store operations (or spawn)"
        )
    quoted = "'" + str(path).replace("'", "''") + "'"
    statement = f"ATTACH {quoted} AS {ALIAS}" + (" (READ_ONLY)" if read_only else "")
    while True:
        _process_lock.acquire()
        try:
            con = _process_instance()
            _attached = True
            con.execute(statement)
            con.execute(f"USE {ALIAS}")
            return con
        except BaseException as exc:
            _release()
            if isinstance(exc, duckdb.InterruptException):  # ``interrupt``: the command's Ctrl-C, not the file's fault
                raise KeyboardInterrupt from exc
            if not isinstance(exc, duckdb.Error):
                raise
            first = _first_line(exc)
            if not is_lock_conflict(exc):
                raise StoreError(f"cannot open store {path}: {first}") from exc
            if backoff.expired:
                raise StoreError(f"store {path} stayed locked for {timeout:.0f} s ({first})") from exc
        backoff.sleep()


def _release() -> None:
    global _attached
    try:
        _detach_all()
    finally:
        _attached = False
        _process_lock.release()


def _detach_all() -> None:
    """Leave the instance as found: no transaction, nothing attached (user SQL may ATTACH too)."""
    con = _process_instance(fresh_if_changed=False)
    try:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass  # no transaction open: the usual case
        con.execute("USE memory")
        names = con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'"
        ).fetchall()
        for (name,) in names:
            con.execute(f'DETACH DATABASE IF EXISTS "{name}"')
    except duckdb.Error:
        _discard_instance()  # closing the instance releases every file it held
