"""The warm server's reader: one long-lived fork that answers ``query``, ``show`` and ``report``
in its own process, one command after another (engine/cli/warm_server.py starts it).

A fork per command costs a read command what it saves: DuckDB's in-memory instance (~30 ms of
CPU, its threads do not survive a fork) is made again in every fork, and the fork's
copy-on-write faults and exit come on top, ~0.09 s in all against ~0.13 s for the command in a
process of its own. The reader makes the instance once and keeps it (engine/store/lock.py
attaches the store per turn), so a read costs the client's start and the answer itself.

For each command it takes on the client's process as a fork does (engine/cli/warm_fork.py:
standard streams, working directory, environment, umask, ``sys.path``, argv),
runs ``main``, and puts its own back: its streams, directory, environment, signal handlers and
the logging handlers the command added. A client whose resource limits are not the server's
gets a fork instead (a limit lowered here would stay lowered for every later command).

What a read's SQL may change in DuckDB's instance is not kept for the next: user SQL (``query``)
has it made afresh (engine.store.lock.renew_instance), as has another $TZ.

Signals the client forwards: nothing is raised into a command from outside (an exception landing
in the store's clean-up would leave this long-lived process holding the store). Ctrl-C and
SIGTERM interrupt DuckDB's statement, and each one after it, until the command ends, which then
ends as ``interrupted`` (130); SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 the same, and the client ends
by that signal, as their default action would have ended the command's process; Ctrl-Z stops
this process with its client (the server continues it should the client die meanwhile); a
client that dies interrupts its command. A command still going a second after its interrupt
(outside DuckDB's statements) ends the reader (``_watch_client``). SIGWINCH is nothing to a read.
"""

from __future__ import annotations

import contextlib
import locale
import logging
import os
import resource
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

from engine.cli import main as cli_main
from engine.cli.main import WARM_READS
from engine.cli.warm import recv_message, send_message
from engine.cli.warm_fork import take_on_client
from engine.store.lock import duckdb, make_pending_instance
from engine.store.lock import interrupt as interrupt_store
from engine.store.schema import forget_stores_seen

READ_COMMANDS = WARM_READS
"""The commands the reader answers (each only reads the store; none starts a run)."""
INTERRUPTING = frozenset({signal.SIGINT, signal.SIGTERM})
"""Forwarded signals the command itself handles as Ctrl-C (engine.cli.main: 130, "interrupted")."""
ENDING = frozenset({signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2})
"""Forwarded signals whose default action ends a command's process: the client ends by them."""
INTERRUPT_EVERY = 0.02
"""Seconds between interrupts of the store's statement while an interrupted command goes on."""
INTERRUPT_GRACE = 1.0
"""Seconds an interrupted command has to end before the reader ends itself (``_watch_client``)."""


class ReaderSlot:
    """The server's side of its reader: none until the first read, then one read at a time."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        """The server's end: a read handed over; a byte back once the reader is idle again."""
        self.reading = False
        self.reads = 0
        """Reads handed to a reader (every reader this server started)."""

    def takes(self, request: dict[str, Any]) -> bool:
        """A read command, the reader idle (else a fork of its own answers it, as any command),
        and the client's resource limits the server's own."""
        argv = request.get("argv") or []
        if len(argv) < 2 or argv[1] not in READ_COMMANDS or self.reading:
            return False
        return all(
            tuple(limits) == resource.getrlimit(getattr(resource, name))
            for name, limits in (request.get("limits") or {}).items()
        )

    def start(self, in_child: Callable[[], None], *, closing: list[int]) -> socket.socket:
        """Fork the reader (``in_child``: the server's sockets closed there; ``closing``: its raw
        descriptors, closed once the reader's signals are its own); this end."""
        ours, theirs = socket.socketpair()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                in_child()
                serve_reads(theirs, closing=closing)
            finally:
                os._exit(1)
        theirs.close()
        self.pid, self.sock = pid, ours
        return ours

    def hand(self, request: dict[str, Any], conn: socket.socket, fds: list[int]) -> None:
        """Send the reader a read (its client's socket and streams with it)."""
        assert self.sock is not None  # started
        send_message(self.sock, request, fds=[conn.fileno(), *fds])
        self.reading = True
        self.reads += 1

    def said(self) -> bool:
        """The reader's byte: idle again (True), or its socket closed (False)."""
        assert self.sock is not None
        try:
            said = self.sock.recv(64)
        except OSError:
            said = b""
        self.reading = self.reading and not said
        return bool(said)

    def gone(self) -> socket.socket | None:
        """Forget the reader; its socket, for the server to close."""
        sock, self.pid, self.sock, self.reading = self.sock, None, None, False
        return sock


class _Command:
    """The command being answered, as the client's watcher sees it."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.ended = threading.Event()
        self.ending_signal: int | None = None
        self.watcher: threading.Thread | None = None
        self.interrupted = False
        self.client_gone = False


def serve_reads(sock: socket.socket, *, closing: list[int]) -> NoReturn:
    """The reader's loop: a command at a time from ``sock`` (the server's end), a byte back
    after each, until the server closes it. ``closing``: the server's raw descriptors."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # between commands: its end, even inside DuckDB
    # Never an exception raised into the command from outside: one landing in the store's clean-up
    # (between its DETACH and its lock's release, say) would leave this long-lived process holding
    # the store. A client's Ctrl-C interrupts DuckDB's statement instead (``_watch_client``).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cli_main.SIGTERM_INTERRUPTS = False  # a SIGTERM from outside ends the reader, never raises in a read
    for fd in closing:
        os.close(fd)
    own = _OwnProcess()
    try:
        while True:
            request, fds = recv_message(sock, max_fds=4)
            if request is None or len(fds) != 4:
                for fd in fds:
                    os.close(fd)
                break
            conn = socket.socket(fileno=fds[0])
            try:
                _answer(request, conn, fds[1:], own)
            finally:
                with contextlib.suppress(OSError):
                    conn.close()
            make_pending_instance()  # after a query: made now, on no client's time
            sock.sendall(b".")  # idle again: the server's next read may come here
    except (OSError, ValueError):
        pass  # the server went away, or sent what it never sends
    os._exit(0)


class _OwnProcess:
    """What the reader puts back after each command."""

    def __init__(self) -> None:
        self.stdio = [os.dup(fd) for fd in (0, 1, 2)]
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        self.path = list(sys.path)
        self.argv = list(sys.argv)
        self.umask = os.umask(0o022)
        os.umask(self.umask)

    def restore(self, handlers: dict[int, Any], logged: tuple[list[logging.Handler], int]) -> None:
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            if stream not in self.streams:  # the client's: closed (flushed, its descriptor left as it is)
                with contextlib.suppress(OSError, ValueError):  # so what a closed pipe refused is
                    stream.close()  # dropped now, never written later to whatever holds the fd then
        for target, fd in enumerate(self.stdio):
            os.dup2(fd, target)
        for name, stream in zip(("stdin", "stdout", "stderr"), self.streams):
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)
        with contextlib.suppress(OSError):
            os.chdir(self.cwd)
        os.environ.clear()
        os.environ.update(self.environ)
        time.tzset()
        tempfile.tempdir = None
        with contextlib.suppress(locale.Error):
            locale.setlocale(locale.LC_CTYPE, "")
        os.umask(self.umask)
        sys.path[:] = self.path
        sys.argv = list(self.argv)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        root = logging.getLogger()
        root.handlers[:], level = logged
        root.setLevel(level)
        forget_stores_seen()  # a store file made again in place is checked again, as a new process would


def _answer(request: dict[str, Any], conn: socket.socket, fds: list[int], own: _OwnProcess) -> None:
    """One command: "started", the command in this process, then how it ended."""
    try:
        send_message(conn, {"op": "started", "pid": os.getpid()})
    except OSError:
        for fd in fds:
            os.close(fd)
        return  # the client is gone already: nothing to answer
    handlers: dict[int, Any] = {
        signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    root = logging.getLogger()
    logged = (list(root.handlers), root.level)
    command = _Command(conn)
    code = 1
    with warnings.catch_warnings():
        try:
            take_on_client(request, fds)
            command.watcher = threading.Thread(
                target=_watch_client, args=(command,), name="crucible-warm-reader", daemon=True
            )
            command.watcher.start()
            from engine.cli.main import main

            code = main(sys.argv[1:])
        except SystemExit as exc:  # argparse's --help or a usage error, as the interpreter ends
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
        except duckdb.InterruptException:  # a read the store's interrupt stopped (query's: main's own 130)
            code = 130
            if not command.client_gone:
                print(f"crucible {sys.argv[1]}: interrupted", file=sys.stderr)
        except BaseException:  # noqa: BLE001 (as an interpreter would: the traceback, exit 1)
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            command.ended.set()
            if command.interrupted and command.ending_signal is None and code != 130 and not command.client_gone:
                # Ctrl-C came after DuckDB's last statement: the command's own process would have
                # stopped where it was; this one finished, and says it was interrupted all the same.
                with contextlib.suppress(BaseException):
                    print(f"crucible {sys.argv[1]}: interrupted", file=sys.stderr)
                code = 130
            own.restore(handlers, logged)
    ended = (
        {"op": "killed", "signal": command.ending_signal}
        if command.ending_signal is not None
        else {"op": "exit", "code": code}
    )
    with contextlib.suppress(OSError):
        send_message(conn, ended)
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)  # the watcher's read ends
    if command.watcher is not None:
        command.watcher.join()


def _watch_client(command: _Command) -> None:
    """A byte from the client is a signal it got; its end closing (it died) interrupts.

    An interrupt stops the statement DuckDB is running, and every one it starts after (an
    interrupt that comes before DuckDB has a statement is not kept by it). What is not a statement
    (a wait for the store's lock, a big table formatted, a write to a full pipe) cannot be stopped
    from here without raising into the command; a command still going INTERRUPT_GRACE seconds
    after its interrupt ends the reader instead, with its client told what its own process would
    have said, and the server starts another reader at the next read. The command's own process
    sees Ctrl-C only once DuckDB returns; the reader must not go on computing an answer nobody
    waits for, nor hold its client's pipes meanwhile."""
    while not command.ended.is_set():
        try:
            data = command.conn.recv(64)
        except OSError:
            data = b""
        for signum in data or [signal.SIGTERM]:  # gone: nobody reads the answer any more
            if signum == signal.SIGSTOP:
                os.kill(os.getpid(), signal.SIGSTOP)  # Ctrl-Z: the client stops next, fg continues both
            elif signum in INTERRUPTING or signum in ENDING:
                if signum in ENDING and command.ending_signal is None:
                    command.ending_signal = signum
                command.interrupted = True
        command.client_gone = not data
        if command.interrupted:
            give_up = time.monotonic() + INTERRUPT_GRACE
            while not command.ended.is_set():
                if time.monotonic() >= give_up:
                    _end_reader(command)
                interrupt_store()
                command.ended.wait(INTERRUPT_EVERY)
            return
        if not data:
            return


def _end_reader(command: _Command) -> NoReturn:
    """The interrupted command's end, from the watcher: its client told (an interrupt's line and
    130, or the signal to end by), then this process gone, whatever the command was doing."""
    if not command.client_gone:
        if command.ending_signal is None:
            with contextlib.suppress(OSError):
                os.write(2, f"\ncrucible {sys.argv[1] if len(sys.argv) > 1 else 'read'}: interrupted\n".encode())
        ended = (
            {"op": "killed", "signal": command.ending_signal}
            if command.ending_signal is not None
            else {"op": "exit", "code": 130}
        )
        with contextlib.suppress(OSError):
            send_message(command.conn, ended)
    os._exit(130)
