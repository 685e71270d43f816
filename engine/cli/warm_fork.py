"""A warm server's fork becoming its client's command (engine/cli/warm_server.py).

It takes the client's standard streams (descriptors passed over the socket), working
directory, environment and what Python derived from it at start (TZ, TMPDIR, the locale, -u),
umask, resource limits, ignored signals, ``sys.path`` and argv; a thread relays the signals
the client forwards, and the client's end closing is SIGTERM. Then ``main``, and the end a
command's own process has (engine.cli.main.leave), whatever is raised.
"""

from __future__ import annotations

import contextlib
import io
import locale
import os
import resource
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, NoReturn


def become(request: dict[str, Any], conn: socket.socket, fds: list[int], *, closing: list[int]) -> NoReturn:
    """The client's process, as far as the command can tell, then its main, then its end
    (``closing``: the server's descriptors, none of the command's)."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in request.get("ignored") or ():
            signal.signal(signum, signal.SIG_IGN)  # nohup's SIGHUP, a background job's SIGINT
        for fd in closing:
            os.close(fd)
        take_on_client(request, fds)
        for name, limits in (request.get("limits") or {}).items():
            resource.setrlimit(getattr(resource, name), tuple(limits))
        threading.Thread(target=_watch_client, args=(conn,), name="crucible-warm-client", daemon=True).start()
        from engine.cli.main import main

        code = main(sys.argv[1:])
    except SystemExit as exc:  # argparse's --help, a plug-in's sys.exit: as the interpreter ends
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 (as an interpreter would: the traceback, exit 1)
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        try:
            from engine.cli.main import leave

            leave(code, ended=lambda status: tell_client(conn, status))
        finally:
            os._exit(code)


def tell_client(conn: socket.socket, code: int) -> None:
    """The command's exit status, to its client, from the fork itself: the server tells it only
    once it has reaped the fork, after the kernel took down the fork's memory (~20-80 ms of a
    sweep's). Said once all is flushed; every signal held from here, so none the client forwards
    (its end closing is SIGTERM) can run a handler between this and the exit. The status as the
    server would have read it (``os._exit`` keeps its low byte); the server's own word, later,
    finds the client gone or done."""
    from engine.cli.warm import send_message

    signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    send_message(conn, {"op": "exit", "code": code & 0xFF})


def take_on_client(request: dict[str, Any], fds: list[int]) -> None:
    """This process as the client's, but for its resource limits: its standard streams (``fds``,
    each closed once in place), working directory, environment and what Python derived from it
    at start, umask, ``sys.path`` and argv."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    fds.clear()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(int(request["umask"]))
    time.tzset()  # TZ
    tempfile.tempdir = None  # TMPDIR (asyncssh's import asked for it in the server)
    with contextlib.suppress(locale.Error):
        locale.setlocale(locale.LC_CTYPE, "")  # LANG / LC_*, as Python sets it at start
    sys.path[:] = request["path"]
    sys.argv = list(request["argv"])
    _standard_streams(request["stdio"], unbuffered=bool(request.get("unbuffered")))


def _standard_streams(encodings: list[list[str | None]], *, unbuffered: bool) -> None:
    """sys.stdin/stdout/stderr over the client's descriptors, buffered as Python would have
    buffered them in the client (a terminal line by line, stderr always, -u not at all)."""
    streams = []
    for fd, (encoding, errors) in enumerate(encodings):
        buffer: Any
        if fd == 0:
            buffer = io.BufferedReader(io.FileIO(0, "r", closefd=False))
        else:
            buffer = io.BufferedWriter(io.FileIO(fd, "w", closefd=False))
        streams.append(
            io.TextIOWrapper(
                buffer,
                encoding=encoding or "utf-8",
                errors=errors or "strict",
                line_buffering=fd == 2 or (fd == 1 and os.isatty(1)),
                write_through=unbuffered and fd > 0,
            )
        )
    for name, stream in zip(("stdin", "stdout", "stderr"), streams):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _watch_client(conn: socket.socket) -> None:
    """A byte from the client is a signal it got; its end closing (it died) is SIGTERM: the
    run ends canceled and recorded, as it would have in the client's own process.

    A signal with a handler goes to the main thread itself: sent to the process from here, it
    may be taken by this thread (the main one just continued from a stop, say), and Python's
    handler then waits for the main thread's next wake-up, which an idle event loop may never
    have. Stopping is the whole process's."""
    main = threading.main_thread().ident
    assert main is not None  # a started thread's
    while True:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        for signum in data or [signal.SIGTERM]:
            if signum in (signal.SIGSTOP, signal.SIGKILL):
                os.kill(os.getpid(), signum)
            else:
                signal.pthread_kill(main, signum)
        if not data:
            return
