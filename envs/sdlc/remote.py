"""The run's mock remote: a bare repository on the HOST, served to the workspace over a socket.

Nothing of the remote is inside the workspace: its repository lives in a root-only per-run
host directory, and the agent reaches it only through git's smart protocol relayed over
``git.sock`` in the run's bridge (``relay.py``, run by the agent repo's ``ext::`` origin).
This side spawns ``git upload-pack`` / ``git receive-pack`` on the one repository it
serves, whatever the client asks: so the agent sees exactly the refs the remote holds
(``main``, the starting point, and the branches it pushed) and nothing else, and
``hooks/pre-receive.sh`` refuses any update to ``main``. Works the same on every runtime, with
no network in the workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from engine.errors import SetupError

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
SOCKET_NAME = "git.sock"
RELAY_NAME = "git-relay.py"
SERVICES = {"git-upload-pack": "upload-pack", "git-receive-pack": "receive-pack"}
FRESH_IDENTITY = {
    "GIT_AUTHOR_NAME": "crucible",
    "GIT_AUTHOR_EMAIL": "crucible@crucible.invalid",
    "GIT_COMMITTER_NAME": "crucible",
    "GIT_COMMITTER_EMAIL": "crucible@crucible.invalid",
}
"""The coding flavor's fresh one-commit repo (``sh/setup_fresh.sh``) is made with this
identity and ``FRESH_DATE``: made the same way here, main is the very commit the agent has."""


class _GitEnv(Mapping[str, str]):
    """Host git's environment: fixed, but for ``PATH``, this process's when it is read (a
    warm server's fork takes its command's environment after this module was imported)."""

    FIXED = MappingProxyType(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_TERMINAL_PROMPT": "0",
            "HOME": "/nonexistent",
            "LANG": "C",
        }
    )

    def __getitem__(self, key: str) -> str:
        return os.environ.get("PATH", "/usr/bin:/bin") if key == "PATH" else self.FIXED[key]

    def __iter__(self) -> Iterator[str]:
        return iter([*self.FIXED, "PATH"])

    def __len__(self) -> int:
        return len(self.FIXED) + 1


GIT_ENV = _GitEnv()


def git(repo: Path, *args: str, stdin: bytes | None = None, env: dict | None = None) -> bytes:
    """Host git on the remote's repository; raises ``subprocess.CalledProcessError``."""
    proc = subprocess.run(
        ["git", "--git-dir", str(repo), *args],
        input=stdin,
        capture_output=True,
        env={**GIT_ENV, **(env or {})},
        check=True,
    )
    return proc.stdout


class Remote:
    """One run's bare remote. ``path`` is host-side and never shown to the agent."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "remote.git"
        self.main = ""
        self.pushes: list[dict] = []
        self._server: asyncio.AbstractServer | None = None
        self._active: set[asyncio.Task] = set()

    def seed(self, source: Path, baseline: str, *, fresh: bool, fresh_date: str) -> str:
        """``main`` := what the agent's repo starts from: with the vault, the fresh one-commit
        repo's commit (the baseline's tree only, no history); without, the baseline with its
        ancestry. No other ref is ever copied in, so no answer-key ref is reachable."""
        subprocess.run(
            ["git", "init", "-q", "--bare", "--template=", str(self.path)], env=GIT_ENV, check=True, capture_output=True
        )
        if fresh:
            tree = subprocess.run(
                ["git", "-C", str(source), "rev-parse", f"{baseline}^{{tree}}"],
                env=GIT_ENV,
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            objects = subprocess.run(
                ["git", "-C", str(source), "rev-list", "--objects", tree], env=GIT_ENV, check=True, capture_output=True
            ).stdout
            pack = subprocess.run(
                ["git", "-C", str(source), "pack-objects", "-q", "--stdout"],
                input=objects,
                env=GIT_ENV,
                check=True,
                capture_output=True,
            ).stdout
            git(self.path, "index-pack", "--stdin", stdin=pack)
            dated = {**FRESH_IDENTITY, "GIT_AUTHOR_DATE": fresh_date, "GIT_COMMITTER_DATE": fresh_date}
            commit = git(self.path, "commit-tree", tree, "-m", "baseline", env=dated).decode().strip()
        else:
            subprocess.run(
                ["git", "-C", str(source), "push", "-q", str(self.path), f"{baseline}:refs/heads/main"],
                env=GIT_ENV,
                check=True,
                capture_output=True,
            )
            commit = baseline
        git(self.path, "update-ref", "refs/heads/main", commit)
        git(self.path, "symbolic-ref", "HEAD", "refs/heads/main")
        hooks = self.path / "hooks"
        hooks.mkdir(exist_ok=True)
        shutil.copyfile(HERE / "hooks" / "pre-receive.sh", hooks / "pre-receive")
        os.chmod(hooks / "pre-receive", 0o755)
        self.main = commit
        return commit

    def branches(self) -> dict[str, str]:
        """branch name -> commit SHA, as the remote holds them now."""
        out = git(self.path, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/").decode()
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def head_of(self, branch: str) -> str | None:
        return self.branches().get(branch)

    def read_file(self, ref: str, path: str) -> bytes | None:
        """``path`` at ``ref`` (a branch or SHA the remote has), or None."""
        if ref.startswith("-") or "\0" in ref + path:  # the agent's text never becomes a git option
            return None
        try:
            return git(self.path, "cat-file", "blob", f"{ref}:{path}")
        except subprocess.CalledProcessError:
            return None

    def diff(self, base: str, head: str) -> bytes:
        """The change from ``base`` to ``head`` in the form the coding flavor captures and
        applies (binary, full index, no drivers of any kind)."""
        return git(
            self.path,
            "-c",
            "core.attributesFile=/dev/null",
            "diff",
            "--binary",
            "--full-index",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-renames",
            base,
            head,
            "--",
        )

    def merge_base(self, a: str, b: str) -> str | None:
        try:
            return git(self.path, "merge-base", a, b).decode().strip() or None
        except subprocess.CalledProcessError:
            return None

    # ------------------------------------------------------------ the relay's host side
    async def serve(self, bridge_dir: str) -> asyncio.AbstractServer:
        """Listen on ``bridge_dir/git.sock`` and put the relay beside it."""
        relay = Path(bridge_dir) / RELAY_NAME
        shutil.copyfile(HERE / "relay.py", relay)
        os.chmod(relay, 0o755)
        sock = str(Path(bridge_dir) / SOCKET_NAME)
        server = await asyncio.start_unix_server(self._connection, path=sock)
        # Uids differ between host and workspace: the socket is open to all, and what it
        # offers is only what the agent may do anyway (fetch, and push to its branches).
        os.chmod(sock, 0o666)
        self._server = server
        return server

    async def freeze(self, grace: float = 10.0) -> None:
        """Stop serving: from now on nothing in the workspace (a process the agent left
        running, say) can change what the remote holds. A fetch or push in flight gets
        ``grace`` seconds to finish, then is cut off (its git process killed)."""
        if self._server is not None:
            self._server.close()
        if self._active:
            _, late = await asyncio.wait(set(self._active), timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None  # a connection is served in a task of its own
        self._active.add(task)
        proc: asyncio.subprocess.Process | None = None
        try:
            service = (await reader.readline()).decode("utf-8", "replace").strip()
            protocol = (await reader.readline()).decode("utf-8", "replace").strip()
            if service not in SERVICES:
                writer.write(f"ERR unknown service {service!r}\n".encode())
                return
            env = dict(GIT_ENV)
            if re.fullmatch(r"version=[0-9]", protocol):  # git's own protocol negotiation, nothing else
                env["GIT_PROTOCOL"] = protocol
            proc = await asyncio.create_subprocess_exec(
                "git",
                SERVICES[service],
                str(self.path),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            await asyncio.gather(_pump(reader, proc.stdin), _pump_out(proc.stdout, writer), proc.stderr.read())
            code = await proc.wait()
            if service == "git-receive-pack":
                self.pushes.append(
                    {
                        "at": datetime.now(UTC).isoformat(),
                        "exit_code": code,
                        "branches": await asyncio.to_thread(self.branches),
                    }
                )
        except (ConnectionError, OSError) as exc:
            log.debug("git relay connection ended: %s", exc)
        finally:
            self._active.discard(task)
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await proc.wait()
            with contextlib.suppress(Exception):
                writer.close()
                await writer.wait_closed()


async def _pump(reader: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            sink.close()


async def _pump_out(source: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await source.read(65536):
        writer.write(data)
        await writer.drain()


@contextlib.asynccontextmanager
async def serving(bridge_dir: str) -> AsyncIterator[Remote]:
    """A fresh remote for one run, served on the bridge until the block ends, then removed."""
    root = Path(tempfile.mkdtemp(prefix="crucible-remote-"))
    os.chmod(root, 0o700)
    remote = Remote(root)
    try:
        await remote.serve(bridge_dir)
    except OSError as exc:
        shutil.rmtree(root, True)
        raise SetupError(f"the mock remote could not be served: {exc}") from exc
    try:
        yield remote
    finally:
        await remote.freeze()
        await asyncio.to_thread(shutil.rmtree, root, True)
