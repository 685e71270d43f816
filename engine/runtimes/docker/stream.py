"""The bytes under ``docker exec``: the hijacked connection, its frame format, bounded buffers.

Pure plumbing with no asyncio in it; ``docker_exec`` and ``docker_process`` drive these
from reader/writer threads.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

STDOUT, STDERR = 1, 2
_HEADER = struct.Struct(">BxxxL")  # stream id, 3 zero bytes, big-endian payload length
KEEPALIVE = (15, 5, 4)
"""TCP keepalive of an exec stream over ``tcp://`` (seconds idle before the first probe, seconds
between probes, unanswered probes): a host lost without a word (a power cut, a partition)
ends the stream in about 35 s instead of the kernel's two hours. A quiet command's stream
stays up: the probes are the kernels', not bytes of the stream."""


def keep_alive(sock: socket.socket) -> None:
    """Probe an idle TCP connection (``KEEPALIVE``); a unix socket needs none (a host that
    dies closes it)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return
    idle, interval, count = KEEPALIVE
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
        if hasattr(socket, option):  # Linux names; elsewhere the system's defaults apply
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


class HijackedStream:
    """The duplex connection ``exec_start(socket=True)`` returns, made safe to use.

    The SDK hands back the raw socket under an HTTP response whose *buffered* reader
    may already hold the first output bytes (it read ahead while parsing the headers);
    reading the raw socket would silently lose them, so reads go through that buffered
    reader. Writes go to the socket itself.
    """

    def __init__(self, sdk_socket: object) -> None:
        response = getattr(sdk_socket, "_response", None)
        buffered = getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)
        self._reader: Any = buffered if hasattr(buffered, "read1") else sdk_socket  # the SDK's internals: duck-typed
        self._sock: socket.socket = getattr(sdk_socket, "_sock", None) or sdk_socket  # type: ignore[assignment]
        self._response = response
        # ssh:// (``use_ssh_client``): the SDK's "socket" is an ssh process's pipes, no socket.
        self._ssh: Any = getattr(self._sock, "proc", None)
        # The SDK leaves its per-request read timeout on the socket; a quiet command must
        # not look like a dead connection, and abort() is how a blocked read is released.
        # A dead one (a remote host gone without a reset) is found by keepalive instead.
        self._sock.settimeout(None)
        if self._ssh is None:
            keep_alive(self._sock)

    @classmethod
    def over(cls, sock: socket.socket, reader: Any, response: object) -> HijackedStream:
        """A connection taken over by hand (``wire.ExecWire.start``): ``reader`` is the buffered
        reader that parsed the upgrade (it may already hold output), ``response`` closes it."""
        stream = cls.__new__(cls)
        stream._reader, stream._sock, stream._response, stream._ssh = reader, sock, response, None
        sock.settimeout(None)  # as above: a quiet command is no dead connection
        return stream

    def recv(self, n: int = 65536) -> bytes:
        reader = self._reader
        data: bytes = reader.read1(n) if hasattr(reader, "read1") else reader.recv(n)
        return data

    def send_all(self, data: bytes) -> None:
        if self._ssh is not None:
            try:
                self._ssh.stdin.write(data)
                self._ssh.stdin.flush()
            except ValueError as exc:  # written after close_write
                raise BrokenPipeError(32, "stdin already closed") from exc
            return
        self._sock.sendall(data)

    def close_write(self) -> None:
        """Half-close: the daemon then closes the process's stdin."""
        if self._ssh is not None:
            self._ssh.stdin.close()
            return
        # socket.socket's, not the TLS socket's own shutdown(), which drops its TLS layer (the
        # output could not be read any more): a TCP half-close is what Docker reads as the end.
        socket.socket.shutdown(self._sock, socket.SHUT_WR)

    def abort(self) -> None:
        """Unblock a reader in another thread (it sees EOF); safe to call repeatedly."""
        if self._ssh is not None:
            self._ssh.kill()  # its stdout then ends: the reader sees EOF
            return
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def close(self) -> None:
        if self._ssh is not None:
            self._ssh.kill()  # the SDK's own close leaves it running once stdin is closed
            self._ssh.wait()
        for closable in (self._response, self._sock):
            try:
                closable.close()  # type: ignore[union-attr]
            except Exception:  # already closed, or closing a half-dead TLS socket
                pass


class Demuxer:
    """Splits Docker's multiplexed (non-TTY) stream into (stream id, payload) frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        while len(buf) >= _HEADER.size:
            stream_id, length = _HEADER.unpack_from(buf)
            end = _HEADER.size + length
            if len(buf) < end:
                return
            payload = bytes(buf[_HEADER.size : end])
            del buf[:end]
            yield stream_id, payload


class PidLine:
    """Takes the wrapper's ``echo $$`` line off the front of stdout.

    When the daemon could not start the wrapper at all (missing cwd, no /bin/sh) the
    first line is its error message instead; that is kept as ``start_error``.
    """

    def __init__(self) -> None:
        self.pid: int | None = None
        self.start_error: str | None = None
        self.done = False
        self._buf = b""

    def feed(self, data: bytes) -> bytes:
        """Consume ``data``; return what follows the first line (program output)."""
        if self.done:
            return data
        self._buf += data
        line, sep, rest = self._buf.partition(b"\n")
        if not sep:
            return b""
        self.done, self._buf = True, b""
        text = line.decode("utf-8", "replace").strip()
        if text.isdigit():
            self.pid = int(text)
        else:
            self.start_error = text
        return rest

    def finish(self) -> None:
        """End of stream: an unterminated first line is an error message, not a pid."""
        if not self.done and self._buf:
            self.start_error = self._buf.decode("utf-8", "replace").strip()
        self.done = True


class BoundedBuffer:
    """Keeps the first ``limit // 2`` and the last ``limit - limit // 2`` bytes; counts all."""

    def __init__(self, limit: int) -> None:
        self._head_limit = max(limit, 0) // 2
        self._tail_limit = max(limit, 0) - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or not self._tail_limit:
            return
        self._tail += data
        # Trim lazily (at twice the bound) so a flood costs amortised O(1) per byte.
        if len(self._tail) > 2 * self._tail_limit:
            del self._tail[: -self._tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + min(len(self._tail), self._tail_limit)

    def value(self) -> bytes:
        tail = self._tail[-self._tail_limit :] if self._tail_limit else b""
        return bytes(self._head) + bytes(tail)
