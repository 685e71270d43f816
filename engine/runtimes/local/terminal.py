"""A terminal for ``open_process(tty=...)`` on ``runtime=local``: a pty of the SANDBOX's own devpts.

bubblewrap's ``--dev`` mounts a fresh devpts instance, so a pty opened on the host (``os.openpty``)
would be a device the sandbox cannot name: ``tty`` says "not a tty" and a program that reopens
its terminal by name fails. The pty is therefore opened from the host through the sandbox's
root (``/proc/<init>/root/dev/pts/ptmx``): the command gets a terminal that exists at
``/dev/pts/N`` inside, owned by its uid as a login's would be. The host keeps the master, read
by the event loop itself (``add_reader``; a pty master ends with EIO, not EOF, once every
holder of the terminal has closed it).
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import struct
import termios
from collections.abc import Callable

from engine.models import TtySize

_TIOCSPTLCK = 0x40045431
_TIOCGPTN = 0x80045430


def open_pty(init_pid: int, size: TtySize, owner: int) -> tuple[int, int]:
    """(master, slave) of a new pty in the sandbox of ``init_pid``, sized, its slave owned by ``owner``."""
    if size.cols < 1 or size.rows < 1:
        raise ValueError(f"a terminal needs at least 1x1 cells, got {size}")
    pts = f"/proc/{init_pid}/root/dev/pts"
    master = os.open(f"{pts}/ptmx", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(master, _TIOCSPTLCK, struct.pack("i", 0))
        number = struct.unpack("I", fcntl.ioctl(master, _TIOCGPTN, b"\0" * 4))[0]
        slave = os.open(f"{pts}/{number}", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except BaseException:
        os.close(master)
        raise
    os.fchown(slave, owner, -1)
    os.fchmod(slave, 0o620)
    set_size(master, size)
    os.set_blocking(master, False)
    return master, slave


def set_size(master: int, size: TtySize) -> None:
    """TIOCSWINSZ: the kernel sends SIGWINCH to the terminal's foreground process group."""
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", size.rows, size.cols, 0, 0))


def take_terminal() -> None:
    """In the child, after ``setsid``: make stdin (the slave) the controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class PtyMaster:
    """The host's end of the terminal: output into ``on_data`` / ``on_eof``, input written in order."""

    def __init__(self, fd: int, on_data: Callable[[bytes], object], on_eof: Callable[[], object]) -> None:
        self.fd = fd
        self._on_data, self._on_eof = on_data, on_eof
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self._closed = False
        self.resume_reading()

    def pause_reading(self) -> None:
        if self._reading and not self._closed:
            self._loop.remove_reader(self.fd)
            self._reading = False

    def resume_reading(self) -> None:
        if not self._reading and not self._closed:
            self._loop.add_reader(self.fd, self._readable)
            self._reading = True

    def is_closing(self) -> bool:
        return self._closed

    def _readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            data = b""  # EIO: the last holder of the slave has closed it
        if data:
            self._on_data(data)
            return
        self.pause_reading()
        self._on_eof()

    async def write(self, data: bytes) -> None:
        """All of ``data``, waiting while the terminal's input queue is full. BrokenPipeError once closed."""
        view = memoryview(data)
        while view:
            if self._closed:
                raise BrokenPipeError("the terminal is closed")
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                ready = self._loop.create_future()
                self._loop.add_writer(self.fd, _settle, ready)
                try:
                    await ready
                finally:
                    self._loop.remove_writer(self.fd)
            except OSError as exc:
                raise BrokenPipeError(f"the terminal is gone: {exc}") from exc

    def close(self) -> None:
        if not self._closed:
            self.pause_reading()
            self._closed = True
            os.close(self.fd)


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
