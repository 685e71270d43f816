"""SFTP (and so ``scp``, both protocols) for a run's SSH endpoint, acting INSIDE the workspace.

asyncssh's ``SFTPServer`` works on the host's file system; a run's files are in its workspace
(a container, or a bubblewrap sandbox), and an image need not ship OpenSSH's ``sftp-server``
(crucible's bootstrapped base image has none, nor ``scp``). So every method is overridden to
act through ``Workspace.exec`` as the session's uid, in its cwd, with coreutils/findutils
commands: ``stat``, ``find``, ``cat``, ``mkdir``, ``mv``, ... Permissions are the workspace's
own (a file only root can read is refused), paths resolve in the workspace's view (relative
ones against the session's cwd), and a symlink planted there resolves there, never on the host.

A file is held in the engine's memory while open: read whole at open (``cat``), written back
whole at close (``cat >``, keeping its inode and mode); ``MAX_FILE`` bounds both. asyncssh's
SCP server (``scp -O``, the legacy protocol) uses the same methods (``SFTPServerFS``), so no
``scp`` binary is needed in the workspace either. What an image needs: ``sh``, GNU coreutils
and findutils (every Debian/Ubuntu image has them).
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import stat
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncssh
from asyncssh import FXF_APPEND, FXF_CREAT, FXF_EXCL, FXF_READ, FXF_TRUNC, FXF_WRITE, SFTPAttrs, SFTPName

from engine.errors import WorkspaceError
from engine.interfaces import Workspace
from engine.util import shell

MAX_FILE = 256 << 20
"""Bytes of one file an SFTP/SCP transfer may hold (it is kept in memory while open)."""
OP_TIMEOUT = 120.0
_STAT = "%f %s %u %g %X %Y %h %i %d %n\\0"
"""``stat --printf``: raw mode (hex), size, uid, gid, atime, mtime, nlink, inode, device, name."""


@dataclass
class _File:
    path: str
    data: bytearray
    writable: bool
    append: bool
    dirty: bool = False


@dataclass
class Transfer:
    """What one SFTP/SCP session did, for the run's steps: one line per change or read."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False
    started: float = field(default_factory=time.time)


class WorkspaceSFTP(asyncssh.SFTPServer):
    """An ``SFTPServer`` whose file system is ``ws`` as uid ``user`` (see the module doc)."""

    def __init__(
        self,
        chan: asyncssh.SSHServerChannel[bytes],
        ws: Workspace,
        *,
        user: int,
        cwd: str,
        ready: asyncio.Future[Any] | None = None,
        on_exit: Callable[[WorkspaceSFTP], None] | None = None,
    ) -> None:
        super().__init__(chan)
        self.ws, self.user, self.cwd, self._ready, self._on_exit = ws, user, cwd, ready, on_exit
        self.transfer = Transfer()

    # -- plumbing --------------------------------------------------------------------------

    async def _sh(self, op: str, *args: str, stdin: bytes | None = None) -> bytes:
        """Run sh/sftp.sh's ``op`` as the session's uid in its cwd; its stdout, or the SFTP error its stderr says."""
        if self._ready is not None:  # the task is still being set up: wait, as a shell session does
            try:
                await asyncio.shield(self._ready)
            except Exception:
                raise asyncssh.SFTPFailure("the task's setup failed") from None
        try:
            result = await self.ws.exec(
                ["/bin/sh", "-c", shell.script(__file__, "sftp.sh"), "crucible-sftp", op, *args],
                user=self.user,
                cwd=self.cwd,
                timeout=OP_TIMEOUT,
                stdin=stdin,
                max_output=MAX_FILE + 1,
            )
        except WorkspaceError as exc:
            raise asyncssh.SFTPFailure(f"the workspace failed: {exc}") from exc
        if result.exit_code != 0:
            message = result.stderr.decode("utf-8", "replace").strip().splitlines()
            raise _error(message[-1] if message else f"{op} failed (exit code {result.exit_code})")
        if result.truncated:
            raise asyncssh.SFTPFailure(f"larger than this server's limit of {MAX_FILE} bytes")
        return result.stdout

    def _path(self, path: bytes) -> str:
        try:
            text = path.decode("utf-8")
        except UnicodeDecodeError:
            raise asyncssh.SFTPNoSuchFile("only UTF-8 paths can be reached in a workspace") from None
        return posixpath.normpath(posixpath.join(self.cwd, text or "."))

    def _log(self, line: str) -> None:
        self.transfer.lines.append(line)

    async def _change(self, line: str, op: str, *args: str) -> None:
        try:
            await self._sh(op, *args)
        except asyncssh.SFTPError as exc:
            self.transfer.failed = True
            self._log(f"{line}: failed: {exc.reason}")
            raise
        self._log(line)

    async def _stats(self, op: str, path: str) -> list[tuple[str, SFTPAttrs]]:
        out = await self._sh(op, path, _STAT)
        return [_parse_stat(entry) for entry in out.split(b"\0") if entry]

    # -- names -----------------------------------------------------------------------------

    def format_user(self, uid: int | None) -> str:
        return "" if uid is None else str(uid)  # the host's passwd says nothing of the workspace's users

    def format_group(self, gid: int | None) -> str:
        return "" if gid is None else str(gid)

    async def realpath(self, path: bytes) -> bytes:
        return (await self._sh("realpath", self._path(path))).rstrip(b"\n")

    async def stat(self, path: bytes) -> SFTPAttrs:
        return (await self._stats("stat", self._path(path)))[0][1]

    async def lstat(self, path: bytes) -> SFTPAttrs:
        return (await self._stats("lstat", self._path(path)))[0][1]

    async def scandir(self, path: bytes) -> AsyncIterator[SFTPName]:
        entries = await self._stats("list", self._path(path))
        for index, (name, result) in enumerate(entries):
            filename = (b".", b"..")[index] if index < 2 else posixpath.basename(name).encode()
            yield SFTPName(filename, attrs=result)

    async def readlink(self, path: bytes) -> bytes:
        return (await self._sh("readlink", self._path(path))).rstrip(b"\n")

    # -- changes ---------------------------------------------------------------------------

    async def setstat(self, path: bytes, attrs: SFTPAttrs) -> None:
        target = self._path(path)
        owner = (
            None
            if attrs.uid is None and attrs.gid is None
            else f"{'' if attrs.uid is None else int(attrs.uid)}:{'' if attrs.gid is None else int(attrs.gid)}"
        )
        values = [
            None if attrs.size is None else int(attrs.size),
            _mode(attrs),
            owner,
            None if attrs.mtime is None else int(attrs.mtime),
            None if attrs.atime is None else int(attrs.atime),
        ]
        if any(value is not None for value in values):
            await self._change(f"setstat {target}", "setstat", target, *("-" if v is None else str(v) for v in values))

    async def lsetstat(self, path: bytes, attrs: SFTPAttrs) -> None:
        raise asyncssh.SFTPOpUnsupported("lsetstat is not offered")

    async def remove(self, path: bytes) -> None:
        target = self._path(path)
        await self._change(f"remove {target}", "remove", target)

    async def mkdir(self, path: bytes, attrs: SFTPAttrs) -> None:
        target = self._path(path)
        await self._change(f"mkdir {target}", "mkdir", target, _mode(attrs) or "-")

    async def rmdir(self, path: bytes) -> None:
        target = self._path(path)
        await self._change(f"rmdir {target}", "rmdir", target)

    async def rename(self, oldpath: bytes, newpath: bytes) -> None:
        old, new = self._path(oldpath), self._path(newpath)
        await self._change(f"rename {old} {new}", "rename", old, new)

    async def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        old, new = self._path(oldpath), self._path(newpath)
        await self._change(f"rename {old} {new}", "posix-rename", old, new)

    async def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        target, link = oldpath.decode("utf-8", "replace"), self._path(newpath)
        await self._change(f"symlink {link} -> {target}", "symlink", target, link)

    async def link(self, oldpath: bytes, newpath: bytes) -> None:
        old, new = self._path(oldpath), self._path(newpath)
        await self._change(f"link {new} -> {old}", "link", old, new)

    def statvfs(self, path: bytes) -> os.statvfs_result:
        raise asyncssh.SFTPOpUnsupported("statvfs is not offered")

    def fstatvfs(self, file_obj: object) -> os.statvfs_result:
        raise asyncssh.SFTPOpUnsupported("statvfs is not offered")

    def lock(self, file_obj: object, offset: int, length: int, flags: int) -> None:
        raise asyncssh.SFTPOpUnsupported("byte-range locks are not offered")

    def unlock(self, file_obj: object, offset: int, length: int) -> None:
        raise asyncssh.SFTPOpUnsupported("byte-range locks are not offered")

    # -- files -----------------------------------------------------------------------------

    async def open(self, path: bytes, pflags: int, attrs: SFTPAttrs) -> _File:
        target = self._path(path)
        writable = bool(pflags & (FXF_WRITE | FXF_APPEND))
        flags = "".join(
            letter
            for flag, letter in ((FXF_CREAT, "c"), (FXF_TRUNC, "t"), (FXF_EXCL, "x"))
            if writable and pflags & flag
        )
        flags += "w" if writable else ""
        load = bool(pflags & FXF_READ) or (writable and not pflags & FXF_TRUNC)
        flags += "r" if load else ""
        try:
            data = await self._sh("open", target, flags or "-", _mode(attrs) or "-")
        except asyncssh.SFTPError as exc:
            self.transfer.failed = self.transfer.failed or writable
            self._log(f"open {target}: failed: {exc.reason}")
            raise
        if not writable:
            self._log(f"read {target} ({len(data)} bytes)")
        return _File(target, bytearray(data), writable, bool(pflags & FXF_APPEND))

    def open56(self, path: bytes, desired_access: int, flags: int, attrs: SFTPAttrs) -> None:
        raise asyncssh.SFTPOpUnsupported("SFTP versions 5 and 6 are not offered")

    def read(self, file_obj: object, offset: int, size: int) -> bytes:
        handle = _handle(file_obj)
        return bytes(handle.data[offset : offset + size])

    def write(self, file_obj: object, offset: int, data: bytes) -> int:
        handle = _handle(file_obj)
        if not handle.writable:
            raise asyncssh.SFTPPermissionDenied("the file was opened for reading")
        if handle.append:
            offset = len(handle.data)
        end = offset + len(data)
        if end > MAX_FILE:
            raise asyncssh.SFTPFailure(f"larger than this server's limit of {MAX_FILE} bytes")
        if offset > len(handle.data):
            handle.data.extend(b"\0" * (offset - len(handle.data)))
        handle.data[offset:end] = data
        handle.dirty = True
        return len(data)

    async def fsync(self, file_obj: object) -> None:
        await self._flush(_handle(file_obj))

    async def close(self, file_obj: object) -> None:
        await self._flush(_handle(file_obj))

    async def _flush(self, handle: _File) -> None:
        if not handle.dirty:
            return
        try:
            await self._sh("save", handle.path, stdin=bytes(handle.data))
        except asyncssh.SFTPError as exc:
            self.transfer.failed = True
            self._log(f"write {handle.path}: failed: {exc.reason}")
            raise
        handle.dirty = False
        self._log(f"write {handle.path} ({len(handle.data)} bytes)")

    async def fstat(self, file_obj: object) -> SFTPAttrs:
        handle = _handle(file_obj)
        attrs = await self.stat(handle.path.encode())
        attrs.size = len(handle.data)  # what the client has written, even before it is flushed
        return attrs

    async def fsetstat(self, file_obj: object, attrs: SFTPAttrs) -> None:
        handle = _handle(file_obj)
        await self._flush(handle)
        if attrs.size is not None:
            del handle.data[attrs.size :]
        await self.setstat(handle.path.encode(), attrs)

    def exit(self) -> None:
        chan = self.channel
        if chan.get_subsystem() == "sftp" and not chan.is_closing():
            # As sshd does when its sftp-server exits: OpenSSH's scp and sftp fail (exit 1) on a
            # session that closes without an exit status, which asyncssh would leave out.
            chan.exit(0)
        if self._on_exit is not None:
            self._on_exit(self)


def _mode(attrs: SFTPAttrs) -> str | None:
    return None if attrs.permissions is None else f"{attrs.permissions & 0o7777:o}"


def _handle(file_obj: object) -> _File:
    if not isinstance(file_obj, _File):
        raise asyncssh.SFTPInvalidHandle("not a file of this session")
    return file_obj


_TYPES = (
    (stat.S_ISREG, asyncssh.FILEXFER_TYPE_REGULAR),
    (stat.S_ISDIR, asyncssh.FILEXFER_TYPE_DIRECTORY),
    (stat.S_ISLNK, asyncssh.FILEXFER_TYPE_SYMLINK),
    (stat.S_ISSOCK, asyncssh.FILEXFER_TYPE_SOCKET),
    (stat.S_ISCHR, asyncssh.FILEXFER_TYPE_CHAR_DEVICE),
    (stat.S_ISBLK, asyncssh.FILEXFER_TYPE_BLOCK_DEVICE),
    (stat.S_ISFIFO, asyncssh.FILEXFER_TYPE_FIFO),
)


def _parse_stat(entry: bytes) -> tuple[str, SFTPAttrs]:
    """One ``_STAT`` record: the name as printed, and its attributes (numeric owner: the host's
    passwd names nobody of the workspace)."""
    fields = entry.split(b" ", 9)
    mode, size, uid, gid, atime, mtime, nlink = (int(fields[0], 16), *map(int, fields[1:7]))
    kind = next((code for test, code in _TYPES if test(mode)), asyncssh.FILEXFER_TYPE_SPECIAL)
    attrs = SFTPAttrs(type=kind, size=size, uid=uid, gid=gid, permissions=mode, atime=atime, mtime=mtime, nlink=nlink)
    return fields[9].decode("utf-8", "surrogateescape"), attrs


def _error(message: str) -> asyncssh.SFTPError:
    """The SFTP status a workspace command's last stderr line stands for."""
    lowered = message.lower()
    if any(word in lowered for word in ("no such file", "nonexistent", "not a directory")):
        return asyncssh.SFTPNoSuchFile(message)
    if any(word in lowered for word in ("permission denied", "operation not permitted", "read-only file system")):
        return asyncssh.SFTPPermissionDenied(message)
    if "file exists" in lowered or "cannot overwrite" in lowered:
        return asyncssh.SFTPFileAlreadyExists(message)
    return asyncssh.SFTPFailure(message)


def summary(lines: Sequence[str]) -> str:
    return "\n".join(lines)
