"""Two more Docker hosts on this machine, for the ``runtime.hosts`` tests: a second dockerd on
its own socket, data root and bridge, and an ``ssh://`` host (an asyncssh server on loopback
whose sessions run their command here, so ``docker system dial-stdio`` reaches this machine's
engine) reached through the real OpenSSH client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _bridge_of(root: Path) -> tuple[str, str]:
    """A bridge of this dockerd's own (name and address), from its root: two test workers may
    each run one, and neither may take the other's network away when it stops."""
    number = int.from_bytes(root.name.encode()[-4:], "big") % 200 + 20
    return f"crucible-hb{number}", f"10.213.{number}.1/24"


def _answers(url: str) -> bool:
    import docker

    try:
        docker.DockerClient(base_url=url, timeout=5).ping()
        return True
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def make_certificates(where: Path) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate (openssl);
    returns the client's side as ``runtime.hosts`` keys."""
    where.mkdir(parents=True)
    newkey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=where, check=True, capture_output=True)

    openssl("req", "-x509", *newkey, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    for name, subject, ext in [
        ("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"),
        ("client", "/CN=crucible", "extendedKeyUsage=clientAuth\n"),
    ]:
        (where / f"{name}.ext").write_text(ext)
        openssl("req", *newkey, "-keyout", f"{name}-key.pem", "-out", f"{name}.csr", "-subj", subject)
        sign = ["-CA", "ca.pem", "-CAkey", "ca-key.pem", "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext"]
        openssl("x509", "-req", "-in", f"{name}.csr", "-out", f"{name}-cert.pem", *sign)
    return {"tls_ca": f"{where}/ca.pem", "tls_cert": f"{where}/client-cert.pem", "tls_key": f"{where}/client-key.pem"}


def _with_descendants(roots: set[int]) -> set[int]:
    """``roots`` and every process below them (from /proc's parent pids)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rfind(")") + 2 :].split()[1])
    found, grew = set(roots), True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


class SecondDockerd:
    """A dockerd of its own (socket, data root, exec root, pid file, bridge), started and
    stopped at will: ``stop`` is what a host going away looks like to its clients."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bridge, self.bridge_cidr = _bridge_of(root)
        self.url = f"unix://{root}/docker.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.tls = make_certificates(root / "tls")
        self.tcp_url = f"tcp://127.0.0.1:{_free_port()}"
        """The same engine over TCP with mutual TLS (its client's files in ``tls``)."""

    def start(self, timeout: float = 120) -> None:
        subprocess.run(["ip", "link", "add", self.bridge, "type", "bridge"], check=False, capture_output=True)
        subprocess.run(["ip", "addr", "replace", self.bridge_cidr, "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        r = self.root
        with open(r / "dockerd.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["dockerd", f"--host={self.url}", f"--data-root={r}/data", f"--exec-root={r}/exec"]
                + [f"--pidfile={r}/docker.pid", f"--bridge={self.bridge}", "--iptables=false", "--ip-masq=false"]
                + [f"--host={self.tcp_url}", "--tlsverify", f"--tlscacert={self.tls['tls_ca']}"]
                + [f"--tlscert={r}/tls/server-cert.pem", f"--tlskey={r}/tls/server-key.pem"],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not _answers(self.url):  # its socket answering a ping, not a guess at how long it takes
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"second dockerd did not come up: {(r / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def lose(self) -> None:
        """The host is lost, as a machine is: dockerd frozen (whatever it holds stays held), then
        killed with its containerd, then its containers' shims and processes, and the pid files
        under its exec root gone, as a reboot empties ``/run``. (Killed, containerd is a zombie
        until this machine's init reaps it, a moment or many seconds later; a dockerd started
        meanwhile reads its pid file, takes it for a containerd still running, and gives up
        waiting on its socket after 15 s.)"""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGSTOP)
        os.killpg(self.proc.pid, signal.SIGKILL)  # dockerd and its containerd; the shims live on
        self.proc.wait()
        self.kill_shims()
        for pid_file in (self.root / "docker.pid", self.root / "exec" / "containerd" / "containerd.pid"):
            pid_file.unlink(missing_ok=True)

    def kill_shims(self) -> None:
        """A dockerd killed (a host lost, test_hosts_sweep.py) leaves its containers' shims
        behind, holding their mounts; a machine that is lost loses them too. (Left alive, a
        dockerd started again on the same root can time out waiting for its containerd, which
        first takes them back.)"""
        shims = subprocess.run(["pgrep", "-f", "--", f"-address {self.root}/exec/"], capture_output=True, text=True)
        for pid in _with_descendants({int(p) for p in shims.stdout.split()}):  # their containers' processes too
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def remove(self) -> None:
        self.stop()
        self.kill_shims()
        subprocess.run(["ip", "link", "del", self.bridge], check=False, capture_output=True)
        # Its overlay mounts die with it; what is left is plain files.
        for mounted in ("exec", "data"):  # dockerd mounts its data root over itself too
            subprocess.run(["umount", "-R", "-l", str(self.root / mounted)], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def second_dockerd() -> Iterator[SecondDockerd]:
    daemon = SecondDockerd(Path(tempfile.mkdtemp(prefix="crucible-d2-", dir="/tmp")))
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.remove()


async def _end_sessions() -> None:
    """Cancel every other task of this loop (the open sessions) and wait until each has ended."""
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def _run_command(process) -> None:  # asyncssh.SSHServerProcess
    """One ssh session: its command, run here, with the session's bytes as its stdin/stdout.
    As sshd does, the command's pipes end with the session: a client that goes away (an
    aborted exec kills its ssh) must not leave ``dial-stdio`` blocked on a full pipe."""
    proc = await asyncio.create_subprocess_shell(
        process.command or "true",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own group: the shell's children end with it
    )

    async def upstream() -> None:
        try:
            while data := await process.stdin.read(65536):
                proc.stdin.write(data)
                await proc.stdin.drain()
        except Exception:
            pass
        finally:
            proc.stdin.close()

    feeding = asyncio.ensure_future(upstream())
    try:
        while data := await proc.stdout.read(65536):
            process.stdout.write(data)
            await process.stdout.drain()
        process.exit(await proc.wait())
    except Exception:
        process.close()
    finally:
        feeding.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # a dial-stdio left blocked on its pipe would wedge the engine
        await proc.wait()


class SshHost:
    """An asyncssh server on 127.0.0.1 (its own thread and loop) and an OpenSSH client set up to
    trust it: ``ssh`` on PATH becomes ``/usr/bin/ssh -F <config>`` (OpenSSH reads ~ from the
    passwd entry, not $HOME, so a config file is the way in)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server = None
        self.port = 0
        self.saved_path = os.environ.get("PATH", "")

    @property
    def url(self) -> str:
        return f"ssh://root@127.0.0.1:{self.port}"

    def start(self) -> None:
        import asyncssh

        host_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(self.root / "id_ed25519"))
        os.chmod(self.root / "id_ed25519", 0o600)
        self.thread.start()

        async def listen() -> asyncssh.SSHAcceptor:
            return await asyncssh.create_server(
                asyncssh.SSHServer,
                "127.0.0.1",
                0,
                server_host_keys=[host_key],
                authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()),
                process_factory=_run_command,
                encoding=None,
            )

        self.server = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(30)
        self.port = self.server.sockets[0].getsockname()[1]
        known = f"[127.0.0.1]:{self.port} {host_key.export_public_key().decode().strip()}\n"
        (self.root / "known_hosts").write_text(known)
        (self.root / "ssh_config").write_text(
            f"Host 127.0.0.1\n  IdentityFile {self.root}/id_ed25519\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.root}/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
        )
        bin_dir = self.root / "bin"
        bin_dir.mkdir()
        (bin_dir / "ssh").write_text(f'#!/bin/sh\nexec /usr/bin/ssh -F {self.root}/ssh_config "$@"\n')
        os.chmod(bin_dir / "ssh", 0o755)
        os.environ["PATH"] = f"{bin_dir}:{self.saved_path}"

    def stop(self) -> None:
        os.environ["PATH"] = self.saved_path
        if self.server is not None:
            self.server.close()
            asyncio.run_coroutine_threadsafe(self.server.wait_closed(), self.loop).result(30)
        # Sessions still open (a client's last dial-stdio) end here, each killing its command,
        # before the loop stops: none is left to be destroyed with it.
        asyncio.run_coroutine_threadsafe(_end_sessions(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def ssh_host() -> Iterator[SshHost]:
    host = SshHost(Path(tempfile.mkdtemp(prefix="crucible-ssh-", dir="/tmp")))
    try:
        host.start()
        yield host
    finally:
        host.stop()
