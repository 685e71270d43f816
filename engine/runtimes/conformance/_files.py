"""Checks of ``write_file`` / ``read_file``: bytes, mode, owner, replacing, errors, symlinks."""

from __future__ import annotations

import uuid

from engine.interfaces import AGENT_UID, Workspace
from engine.runtimes.conformance._core import check, expect, raises


@check()
async def check_files_round_trip_binary_bytes_mode_and_owner(ws: Workspace) -> None:
    """write_file/read_file round-trip bytes, mode and owner; parents come root-owned 755."""
    base = f"/tmp/files-{uuid.uuid4().hex[:8]}"
    path = f"{base}/new/parents/blob.bin"
    data = bytes(range(256)) * 513 + b"\r\n\0no trailing newline"
    await ws.write_file(path, data, mode=0o640, owner=AGENT_UID)
    expect(await ws.read_file(path) == data, "read_file did not return the bytes written")
    stat = (await ws.exec(["stat", "-c", "%a %u %g", path, f"{base}/new/parents", "/tmp"])).stdout.decode().splitlines()
    expected = ["640 1000 1000", "755 0 0", "1777 0 0"]
    expect(stat == expected, f"mode/uid/gid of file, new parent, /tmp are {stat}, expected {expected}")


@check()
async def check_write_file_replaces_an_existing_file(ws: Workspace) -> None:
    """write_file over a longer file replaces content and mode."""
    path = f"/tmp/replace-{uuid.uuid4().hex[:8]}"
    await ws.write_file(path, b"first version, longer")
    await ws.write_file(path, b"second", mode=0o755)
    got = await ws.read_file(path)
    expect(got == b"second", f"read back {got!r}, expected b'second'")
    stat = (await ws.exec(["stat", "-c", "%a %u", path])).stdout
    expect(stat == b"755 0\n", f"mode/uid {stat!r}, expected b'755 0\\n'")


@check()
async def check_read_file_of_a_missing_path_raises_file_not_found(ws: Workspace) -> None:
    """read_file of a missing path raises FileNotFoundError."""
    with raises(FileNotFoundError, "read_file of a missing path"):
        await ws.read_file("/no/such/file")


@check()
async def check_read_file_of_a_directory_raises_is_a_directory(ws: Workspace) -> None:
    """read_file of a directory raises IsADirectoryError."""
    with raises(IsADirectoryError, "read_file of /etc"):
        await ws.read_file("/etc")


@check()
async def check_read_file_follows_a_symlink(ws: Workspace) -> None:
    """read_file of a symlink returns its target's content."""
    target = f"/tmp/target-{uuid.uuid4().hex[:8]}"
    await ws.write_file(target, b"through the link")
    await ws.exec(["ln", "-s", target, f"{target}.link"])
    got = await ws.read_file(f"{target}.link")
    expect(got == b"through the link", f"read through the link gave {got!r}")
