"""DockerProcess's reader, fed a scripted multiplexed stream (no daemon): the wrapper's pid
line is taken from stdout only, whatever the daemon delivers first.

The daemon reads an exec's stdout and stderr separately, so stderr that the command writes
right after the wrapper's ``echo $$`` can reach the stream before that line. The CI run that
found it staged a submission into a workspace without a vault: the stager's "vault ... is
missing" came first, was taken as the pid line, and the pid ("23") came out as the output.
"""

from __future__ import annotations

import asyncio
import struct

import pytest

from engine.runtimes.docker.process import DockerProcess
from engine.runtimes.docker.stream import STDERR, STDOUT


class ScriptedStream:
    """What DockerProcess reads from and writes to: the frames given, then the end."""

    def __init__(self, frames: list[tuple[int, bytes]]) -> None:
        self.chunks = [struct.pack(">BxxxL", stream, len(data)) + data for stream, data in frames]

    def recv(self) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""

    def send_all(self, data: bytes) -> None:
        pass

    def close_write(self) -> None:
        pass

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass


async def _read(frames: list[tuple[int, bytes]]) -> tuple[int | None, bytes]:
    process = DockerProcess(None, "container", "exec", ScriptedStream(frames))
    output = b""
    while chunk := await process.read():
        output += chunk
    pid = await process._pid
    process.abort()
    return pid, output


@pytest.mark.parametrize(
    "frames",
    [
        [(STDOUT, b"23\n"), (STDERR, b"crucible: vault is missing\n")],
        [(STDERR, b"crucible: vault is missing\n"), (STDOUT, b"23\n")],
        [(STDERR, b"crucible: vault "), (STDOUT, b"2"), (STDERR, b"is missing\n"), (STDOUT, b"3\n")],
    ],
    ids=["pid-line-first", "stderr-first", "interleaved"],
)
def test_the_pid_line_comes_from_stdout_and_stderr_stays_output(frames):
    pid, output = asyncio.run(_read(frames))
    assert pid == 23
    assert output == b"crucible: vault is missing\n"


def test_stderr_of_a_stream_that_ends_before_any_pid_line_is_still_output():
    pid, output = asyncio.run(_read([(STDERR, b"oci runtime exec failed\n")]))
    assert pid is None and output == b"oci runtime exec failed\n"
