"""A Docker workspace's files, through the archive API (``get_archive`` / ``put_archive``),
never through a bind mount: the same calls reach a container on this machine or on a listed
remote host."""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
import time
from typing import Any

from engine.errors import WorkspaceError
from engine.runtimes.docker.exec import run_simple, sdk_call

_MODE_DIR = 1 << 31  # Go's os.ModeDir / os.ModeSymlink, as the archive API reports them
_MODE_SYMLINK = 1 << 27
_MAX_LINK_HOPS = 16


def read_file(api: Any, container_id: str, path: str) -> bytes:
    """The regular file at ``path`` (symlinks followed), through the archive API (blocking)."""
    import docker.errors

    for _ in range(_MAX_LINK_HOPS):
        try:
            chunks, stat = api.get_archive(container_id, path)
        except docker.errors.NotFound as exc:
            raise FileNotFoundError(2, "No such file or directory", path) from exc
        if stat["mode"] & _MODE_DIR:
            chunks.close()
            raise IsADirectoryError(21, "Is a directory", path)
        if stat["mode"] & _MODE_SYMLINK:
            chunks.close()
            # The daemon reports the link's target resolved inside the container.
            path = stat.get("linkTarget") or posixpath.join(posixpath.dirname(path), stat["name"])
            continue
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
            member = tar.next()
            extracted = tar.extractfile(member) if member is not None else None
            if extracted is None:
                raise WorkspaceError(f"archive of {path} held no regular file")
            return extracted.read()
    raise OSError(40, "Too many levels of symbolic links", path)


async def write_file(api: Any, container_id: str, path: str, data: bytes, mode: int, owner: int) -> None:
    """``data`` at ``path``, its parents made as root where missing."""
    import docker.errors
    import requests.exceptions

    parent, name = posixpath.split(absolute(path))
    if not name:
        raise IsADirectoryError(21, "Is a directory", path)
    archive = single_file_tar(name, bytes(data), mode, owner)
    try:
        await asyncio.to_thread(api.put_archive, container_id, parent, archive)
        return
    except docker.errors.NotFound:
        pass  # the parent directory does not exist yet
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise WorkspaceError(f"could not write {path}: {exc}") from exc
    # Parents via mkdir -p as root, not via directory entries in the tar: extracting
    # those over existing directories would reset their owner and mode (think /tmp).
    code, output = await sdk_call("exec (mkdir)", run_simple, api, container_id, ["mkdir", "-p", "--", parent])
    if code != 0:
        raise WorkspaceError(f"could not create {parent}: {output.decode(errors='replace').strip()}")
    await sdk_call("put_archive", api.put_archive, container_id, parent, archive)


def absolute(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError(f"workspace paths must be absolute, got {path!r}")
    return posixpath.normpath(path)


def single_file_tar(name: str, data: bytes, mode: int, owner: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    info.uid = info.gid = owner
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
