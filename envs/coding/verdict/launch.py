"""Grading's test process for a task with an isolated verdict: pytest in one process, the
code under test in others. Runs as root in the grading workspace, stdlib only.

    launch.py (root) ── pytest (the tester uid): the hidden tests, crucible_probe
        │  one socket ──┘ each scenario the tests ask for
        └─ the zygote (crucible_scenario.py's, forked from this one as the scenario uid), in the
           repo: forks a child per scenario (or, should it fail, a fresh interpreter per scenario)

Nothing of the agent's is ever imported into the pytest process, so no code under test can rewrite
its verdict; the code runs in its own process per scenario and hands back plain data (``repr`` that
``ast.literal_eval`` reads), which pytest's assertions then judge. With two uids (``strict``) the
scenario cannot signal, trace or read the pytest process, nor read the hidden tests (mode 700).

Exits with pytest's exit code (128 + N for a signal), as the test command would. Options, before pytest's ``--``:
``--verdict`` (lib/, hidden/, home/), ``--workdir`` (the repo), ``--tester-uid``, ``--scenario-uid`` (needed);
``--preload a,b,c`` (the repo's imports: the zygote's ahead; default all); ``--zygote-source-bytes`` / ``--files-bytes
N`` (the zygote's text / lay_out's files: the next N bytes of stdin); ``--wait-for-go`` (pytest collected, the zygote
up: wait for "go", else exit 97); ``--no-zygote``.
"""
# ruff: noqa: E402 -- pytest's process starts before this script imports the rest (Tester)
import _socket
import os
import sys

SETPRIV = "/usr/bin/setpriv"
ENV_FD = "CRUCIBLE_PROBE_FD"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_REQUEST = 16 << 20
KEEP_RESULT = 8 << 20
KEEP_STDERR = 64 << 10
PIPE_ROOM = 4096
"""What a fresh pipe takes without its reader (PIPE_BUF: the least any Linux pipe holds)."""
# pytest's process: all of its run up to the first test (pytest imported, configured, the hidden tests collected)
# happens before "go", while the agent still works, and nothing of the repo's is in it: the tests import only
# crucible_probe (a scenario called while collecting waits until "go"). Started with -S: the site dirs join sys.path
# without their .pth files, which could name the repo (an editable install) and let its files in where the code under
# test must never be (a plugin by entry point, a sitecustomize).
BOOT = ("import os, site, sys; lib, hidden = sys.argv.pop(1), sys.argv.pop(1)\n"
        "sys.path += [d for d in site.getsitepackages() if os.path.isdir(d) and d not in sys.path]\n"
        "import pytest\n"
        "go = os.fdopen(os.dup(0), 'rb')  # pytest's capture puts /dev/null on fd 0\n"
        "if go.readline().strip() != b'ready': os._exit(97)  # the verdict dir is written\n"
        "class Gate:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        if go.readline().strip() != b'go': os._exit(97)\n"
        "        go.close()\n"
        "        try:  # the summary's 'in N s' counts from here, not from the wait's start\n"
        "            reporter = session.config.pluginmanager.get_plugin('terminalreporter')\n"
        "            if hasattr(reporter, '_session_start'):\n"
        "                from _pytest import timing; reporter._session_start = timing.Instant()\n"
        "            elif hasattr(reporter, '_sessionstarttime'):  # pytest < 8; before 6.1 time.time\n"
        "                import time; reporter._sessionstarttime = time.time()\n"
        "        except Exception: pass\n"
        "os.chdir(hidden); sys.path.insert(0, lib)\n"
        "code = pytest.main(plugins=[Gate()]); sys.stdout.flush(); sys.stderr.flush(); os._exit(int(code))")


def as_user(uid):
    """The argv prefix that runs a command as ``uid`` with nothing of root's (none for root)."""
    if uid == 0:
        return []
    return [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


class Tester:
    """pytest's process, started first of all (pytest's import is grading's longest) with only ``os`` and
    ``_socket`` imported: this script's own imports and the verdict dir's writing come after it. It waits for "ready"
    (the dir is written), then "go" once it has collected. Needs ``--verdict DIR``, ``--tester-uid N``, ``--``."""

    def __init__(self, argv):
        try:
            verdict, uid = argv[argv.index("--verdict") + 1], int(argv[argv.index("--tester-uid") + 1])
            pytest_args = argv[argv.index("--") + 1:]
        except (ValueError, IndexError):
            raise SystemExit("crucible: launch.py needs --verdict DIR, --tester-uid N and -- PYTEST_ARGS") from None
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        self.probe_fd, probe_theirs = ours.detach(), theirs.detach()
        (stdin, self.stdin), self.stdin_closed = os.pipe(), False
        home = os.path.join(verdict, "home")
        argv = [*as_user(uid), sys.executable, "-I", "-S", "-c", BOOT, os.path.join(verdict, "lib"),
                os.path.join(verdict, "hidden"), *pytest_args]
        env = {"PATH": PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", ENV_FD: str(probe_theirs)}
        self.pid = os.fork()
        if self.pid == 0:  # every other descriptor of ours is close-on-exec (PEP 446)
            try:
                os.dup2(stdin, 0)
                os.set_inheritable(probe_theirs, True)
                os.chdir("/")
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        os.close(stdin)
        os.close(probe_theirs)

    def send(self, data):
        """Write to its stdin (nothing if it has ended); ``None`` closes it, once."""
        if self.stdin_closed:
            return
        self.stdin_closed = data is None
        try:
            if data is None:
                os.close(self.stdin)
            else:
                os.write(self.stdin, data)  # a line: the pipe holds it whole
        except OSError:
            pass  # BrokenPipeError: it has ended, and its exit says how

    def wait(self):
        """Its exit code, or minus the signal that ended it."""
        _, status = os.waitpid(self.pid, 0)
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)


TESTER = Tester(sys.argv[1:]) if __name__ == "__main__" else None

import json
import select
import signal
import struct
import time

# subprocess, shutil, threading: imported where a rarer path needs them; _socket, not socket (its enums: ~2.4 ms)


def read_frame(sock):
    head = _read_exactly(sock.recv, 8)
    if head is None:
        return None
    (size,) = struct.unpack(">Q", head)
    if size > MAX_REQUEST:
        raise ValueError(f"a request of {size} bytes")
    body = _read_exactly(sock.recv, size)
    if body is None:
        raise ValueError("the request ended early")
    return body


def _read_exactly(read, size):
    """``size`` bytes from ``read`` (a socket's recv, or ``os.read`` of a descriptor: not one byte more, where a
    buffered read would take what follows too), or None where they end early."""
    chunks, left = [], size
    while left:
        chunk = read(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_frame(sock, body):
    sock.sendall(struct.pack(">Q", len(body)) + body)


class Kept:
    """What a scenario writes on its pipes, read as it comes by whoever waits (``Zygote._line``,
    ``run_fresh``), the first ``keep`` bytes of each kept (a flood costs no memory): no thread a pipe."""

    def __init__(self, pipes):  # {fd: how many of its bytes to keep}
        self.keep, self.data, self.open = dict(pipes), {fd: bytearray() for fd in pipes}, set(pipes)

    def wait(self, seconds, fd=None):
        """Read the pipes as they fill, for at most ``seconds``: until ``fd`` can be read (True), or
        else every pipe has ended (True) or the time is up (False)."""
        poll, deadline = select.poll(), time.monotonic() + seconds
        for each in [*self.open, *([] if fd is None else [fd])]:
            poll.register(each, select.POLLIN)
        while self.open or fd is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for ready, _ in poll.poll(min(left, 3600.0) * 1000):  # poll takes an int of ms: a month overflows it
                if ready == fd:
                    return True
                chunk, kept = os.read(ready, 1 << 16), self.data[ready]
                kept += chunk[:max(0, self.keep[ready] - len(kept))]  # nothing past ``keep``
                if not chunk:  # its end: every writer has gone
                    poll.unregister(ready)
                    self.open.discard(ready)
                    os.close(ready)
        return True

    def answer(self, code, timed_out, timeout, out, err):
        self.wait(2.0)  # what a process left in the scenario's session holds open is not waited for
        for fd in self.open:
            os.close(fd)
        text = {fd: bytes(data).decode("utf-8", "replace") for fd, data in self.data.items()}
        return {"exit_code": code, "timed_out": timed_out, "timeout": timeout, "result": text[out], "stderr": text[err]}


class Zygote:
    """crucible_scenario.py's zygote as the scenario uid: a child per scenario (a few ms where a fresh
    interpreter costs ~80). Forked from this process given its code (``fork_zygote``), else started
    with setpriv from the verdict dir's copy. Any trouble with it and ``run`` returns None: the
    caller starts a fresh interpreter instead, for this scenario and every later one."""

    def __init__(self, args, source=None):
        self.sock, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
        forked = fork_zygote(args, source, theirs) if source is not None else None
        self.process = None if forked is not None else _start_zygote(args, source, theirs)
        if self.process is not None and source is not None:
            _feed(self.process.stdin, source)  # a few KiB: the pipe holds it whole
        self.pid = forked or (self.process.pid if self.process else 0)
        theirs.close()
        self.pending, self.alive, self.uid = b"", True, args.scenario_uid

    def run(self, request, timeout):
        if not self.alive:
            return None
        pipes = [os.pipe() for _ in range(3)]
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        try:
            self.sock.sendmsg([b"run"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("3i", *theirs))])
            pid = int(self._line("pid", 30.0))
        except (OSError, ValueError):
            self.alive = False
            for fd in (pipes[0][1], pipes[1][0], pipes[2][0]):
                os.close(fd)
            return None
        finally:
            for fd in theirs:
                os.close(fd)
        _feed(os.fdopen(pipes[0][1], "wb"), request, apart=len(request) > PIPE_ROOM)  # a fresh pipe holds PIPE_ROOM
        kept = Kept({pipes[1][0]: KEEP_RESULT, pipes[2][0]: KEEP_STDERR})
        timed_out, code = False, None
        try:
            code = int(self._line("exit", timeout, kept))
        except TimeoutError:
            timed_out = True
        except (OSError, ValueError):
            self.alive = False
        if code is None:  # a timeout, or the zygote in trouble: what runs in the scenario's session goes
            _kill_group(pid, self.uid)  # (after an "exit", the zygote has killed it: crucible_scenario.zygote)
        if timed_out:
            try:
                code = int(self._line("exit", 30.0, kept))
            except (OSError, ValueError):
                self.alive = False
        return kept.answer(code if code is not None else -9, timed_out, timeout, pipes[1][0], pipes[2][0])

    def _line(self, word, timeout, kept=None):
        """The value of the next ``word N`` line from the zygote, within ``timeout`` seconds (else
        TimeoutError); the scenario's pipes in ``kept`` read meanwhile, as they fill."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            if not (kept or Kept({})).wait(deadline - time.monotonic(), self.sock.fileno()):
                raise TimeoutError(f"no {word} from the zygote within {timeout:g} s")
            chunk = self.sock.recv(4096)
            if not chunk:
                raise OSError("the zygote went away")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        said, _, value = line.decode().partition(" ")
        if said != word:
            raise ValueError(f"the zygote said {line!r}")
        return value

    def close(self):
        self.sock.close()
        try:  # its own group (its own session): a pid of our own child, not one it reported
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _ = os.waitpid(self.pid, 0) if self.process is None else self.process.wait()


def _start_zygote(args, source, control):
    """The zygote started afresh with setpriv (its code on stdin, if given, else the verdict dir's copy)."""
    import subprocess

    runner = ["-"] if source is not None else [os.path.join(args.verdict, "lib", "crucible_scenario.py")]
    preload = ["--preload", args.preload] if args.preload is not None else []
    return subprocess.Popen(
        [*as_user(args.scenario_uid), sys.executable, "-I", *runner, "--zygote", str(control.fileno()), *preload],
        cwd=args.workdir, env=scenario_env(), pass_fds=(control.fileno(),),
        stdin=subprocess.DEVNULL if source is None else subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def scenario_env():
    return {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8"}


def fork_zygote(args, source, control):
    """The zygote forked from this process, not started afresh (~30 ms of CPU a grading); its pid, or
    None. Forked before anything of the verdict dir is read (stdin is read by the byte), its memory holds
    nothing a scenario may not know: this script, the zygote's code, the command line. The child zeroes
    its environment block and becomes what setpriv makes of a fresh one (``become``, checked) before it
    runs the zygote; where it cannot, it exits, and the first scenario finds the zygote gone."""
    try:
        pid = os.fork()
    except OSError:
        return None
    if pid:
        return pid
    try:
        zygote = {"__name__": "crucible_scenario"}  # type: dict
        exec(compile(source, "crucible_scenario.py", "exec"), zygote)  # its definitions, stdlib imports
        zygote["forget_environment"]()
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, control.fileno())
        os.closerange(control.fileno() + 1, 1 << 16)
        os.chdir(args.workdir)  # as root, as Popen's cwd is entered before setpriv runs
        zygote["become"](args.scenario_uid)
        os.environ.clear()
        os.environ.update(scenario_env())
        sys.argv[:] = ["crucible_scenario.py", "--zygote", str(control.fileno())]
        import site
        site.main()  # the site dirs and their .pth files, as a fresh `python3 -I` has them, as this uid
        zygote["zygote"](control.fileno(), None if args.preload is None else args.preload.split(","))
    finally:
        os._exit(0)


def _feed(pipe, data, apart=False):
    """Write ``data`` to ``pipe``, then close it; ``apart``: in a thread of its own (it may never be read)."""
    if apart:
        import threading

        return threading.Thread(target=_feed, args=(pipe, data), daemon=True).start()
    for write in (lambda: pipe.write(data), pipe.close):
        try:
            write()
        except OSError:
            pass  # BrokenPipeError: it ended without reading, and its exit says how


def _kill_group(pid, uid):
    """SIGKILL process group ``pid`` with the rights of ``uid`` only: a pid the zygote (the
    scenario uid's own process) reports can name no process of root's or pytest's."""
    if not isinstance(pid, int) or pid <= 1:
        return
    child = os.fork() if uid != 0 else 0
    if child == 0:
        try:
            if uid != 0:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        finally:
            if uid != 0:
                os._exit(0)
        return
    os.waitpid(child, 0)


def run_fresh(args, request, timeout):
    """One scenario in a fresh interpreter as the scenario uid: what it printed and returned."""
    import subprocess

    runner = os.path.join(args.verdict, "lib", "crucible_scenario.py")
    out, err, child = os.pipe(), os.pipe(), None
    try:
        child = subprocess.Popen(
            [*as_user(args.scenario_uid), sys.executable, "-I", runner], cwd=args.workdir, env=scenario_env(),
            stdin=subprocess.PIPE, stdout=out[1], stderr=err[1], start_new_session=True)
    finally:  # its ends, whether it started or not; ours too where it did not
        for fd in (out[1], err[1], *((out[0], err[0]) if child is None else ())):
            os.close(fd)
    kept = Kept({out[0]: KEEP_RESULT, err[0]: KEEP_STDERR})
    _feed(child.stdin, request, apart=True)
    deadline, timed_out = time.monotonic() + timeout, False
    try:
        while kept.open and child.poll() is None and time.monotonic() < deadline:
            kept.wait(min(0.1, deadline - time.monotonic()))  # at its end, its pipes end with it
        child.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_group(child.pid, args.scenario_uid)  # whatever it left running goes with it
    child.wait()
    return kept.answer(child.returncode, timed_out, timeout, out[0], err[0])


def run_scenario(args, zygote, request):
    timeout = float(json.loads(request).get("timeout") or args.scenario_timeout)
    reply = zygote.run(request, timeout) if zygote is not None else None
    return reply if reply is not None else run_fresh(args, request, timeout)


def serve(sock, args, zygote):
    while True:
        try:
            request = read_frame(sock)
        except (ValueError, OSError) as exc:
            print(f"crucible: bad probe request: {exc}", file=sys.stderr, flush=True)
            return
        if request is None:
            return  # pytest closed its end: it has exited
        try:
            reply = run_scenario(args, zygote, request)
        except (OSError, ValueError) as exc:
            reply = {"error": f"cannot run the scenario: {exc}"}
        try:
            write_frame(sock, json.dumps(reply).encode())
        except OSError:
            return


def lay_out(verdict, tester_uid, payload):
    """Write the verdict dir from ``payload`` (a JSON line ``[[kind, mode, path, size], ...]``,
    then the files back to back): kind ``grader`` is root's 644 under the dir itself (the lib,
    pytest.ini), kind ``hidden`` a hidden test entry under hidden/ (mode 644, 755, link: the
    text is its target, or del: nothing to write in a fresh dir), the tester uid's like home/."""
    head, _, body = payload.partition(b"\n")
    entries = json.loads(head)
    if sum(size for _, _, _, size in entries) != len(body):
        raise SystemExit("crucible: the verdict files ended early")
    if os.path.lexists(verdict):  # a fresh grading container has none
        import shutil

        shutil.rmtree(verdict, ignore_errors=True)
    hidden, home, lib = (os.path.join(verdict, name) for name in ("hidden", "home", "lib"))
    for path, mode in ((verdict, 0o755), (lib, 0o755), (hidden, 0o700), (home, 0o700)):
        os.mkdir(path)
        os.chmod(path, mode)
    offset = 0
    for kind, mode, rel, size in entries:
        data, offset = body[offset:offset + size], offset + size
        parts = rel.split("/")
        if rel.startswith("/") or ".." in parts or not rel.strip("/") or kind not in ("grader", "hidden"):
            raise SystemExit(f"crucible: bad verdict file {rel!r}")
        path = os.path.join(verdict if kind == "grader" else hidden, rel)
        if mode == "del":
            continue  # a fresh dir: nothing there to delete
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if mode == "link":
            os.symlink(data.decode("utf-8", "surrogateescape"), path)
            continue
        with open(path, "wb") as out:
            out.write(data)
        os.chmod(path, 0o644 if kind == "grader" else int(mode, 8))
    for top in (hidden, home):
        for where, dirs, files in os.walk(top):
            for name in [where, *(os.path.join(where, n) for n in dirs + files)]:
                os.lchown(name, tester_uid, tester_uid)


class Options:
    """The options before ``--`` (the module's docstring), read without argparse (~5 ms of CPU to import)."""
    TYPES = {"verdict": str, "workdir": str, "tester_uid": int, "scenario_uid": int, "scenario_timeout": float,
             "preload": str, "zygote_source_bytes": int, "files_bytes": int, "no_zygote": bool, "wait_for_go": bool}
    verdict, workdir, tester_uid, scenario_uid = "", "", -1, -1  # needed: each checked below

    def __init__(self, argv):
        self.scenario_timeout, self.preload, self.zygote_source_bytes, self.files_bytes = 120.0, None, 0, 0
        self.no_zygote = self.wait_for_go = False  # the flags; the rest each take a value
        words = iter(argv[:argv.index("--")] if "--" in argv else argv)
        for word in words:
            name = word[2:].replace("-", "_")
            kind = self.TYPES.get(name) if word.startswith("--") else None
            try:
                if kind is None:
                    raise ValueError(word)
                setattr(self, name, True if kind is bool else kind(next(words)))
            except (ValueError, StopIteration):
                raise SystemExit(f"crucible: launch.py: bad option {word!r}") from None
        if "" in (self.verdict, self.workdir) or -1 in (self.tester_uid, self.scenario_uid):
            raise SystemExit("crucible: launch.py needs --verdict, --workdir, --tester-uid and --scenario-uid")


def main():
    args = Options(sys.argv[1:])
    # By the byte, the zygote forked before the verdict files are read; else started from their copy once written
    source = _read_exactly(lambda n: os.read(0, n), args.zygote_source_bytes) if args.zygote_source_bytes else None
    zygote = Zygote(args, source) if not args.no_zygote and source is not None else None
    if args.files_bytes:
        lay_out(args.verdict, args.tester_uid, sys.stdin.buffer.read(args.files_bytes))
    if zygote is None and not args.no_zygote:
        zygote = Zygote(args)
    tester = TESTER
    assert tester is not None  # run as a script
    tester.send(b"ready\n")
    go = sys.stdin.readline().strip() if args.wait_for_go else "go"
    if go == "go":
        tester.send(b"go\n")
    tester.send(None)  # its stdin's end: without a "go" before it, pytest exits 97 having run no test
    ours = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, tester.probe_fd)
    try:
        if go == "go":
            serve(ours, args, zygote)
    finally:
        ours.close()  # a probe still waiting gets an end, not a hang
        if zygote is not None:
            zygote.close()
    code = tester.wait()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(97 if go != "go" else 128 - code if code < 0 else code)  # no interpreter teardown to wait for


if __name__ == "__main__":
    main()
