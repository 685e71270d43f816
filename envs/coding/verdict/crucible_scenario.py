"""Runs one scenario of an isolated verdict: the code under test's side. Stdlib only.

Started by crucible_probe directly (outside crucible) in the repo, with the request on
stdin: the scenario function's source, its name and its arguments (``repr`` text). Prints
one JSON line: ``{"returned": repr}`` or ``{"raised": [type, message]}``. Whatever the code
under test prints goes to stderr, so that line is the only thing on stdout unless the code
itself writes there — which can only garble its own answer.

``--zygote FD [--preload NAMES]`` (launch.py, as the scenario uid): an interpreter that has
started and imported the common standard library (of it, what the repo imports), and never
imports anything of the repo's itself, forks one child per scenario: each gets its stdin,
stdout and stderr as descriptors over the socket on fd FD, becomes its own session, and runs
as above. A fresh interpreter per scenario costs ~80 ms in an image (start-up and stdlib
imports), a fork a few; every scenario still starts with nothing of another's, since the
zygote never runs the repo's code. Forked from the launcher instead (launch.py's
``fork_zygote``), the zygote first zeroes the launcher's environment block
(``forget_environment``) and becomes the scenario uid as setpriv would (``become``).
"""
import _socket  # not socket: its enums cost the zygote ~2.4 ms to import
import ast
import json
import os
import signal
import struct
import sys
import traceback

PRELOAD = ("abc", "argparse", "collections", "collections.abc", "contextlib", "copy", "csv", "dataclasses",
           "datetime", "decimal", "enum", "fractions", "functools", "heapq", "inspect", "io", "itertools",
           "logging", "math", "operator", "pathlib", "random", "re", "shlex", "statistics", "string",
           "textwrap", "typing", "uuid")
"""Standard library modules a scenario's code commonly imports, loaded once in the zygote."""


def main():
    request = json.loads(sys.stdin.buffer.read())
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.path.insert(0, os.getcwd())  # the repo's own packages, as pytest's rootdir would give
    namespace = {"__name__": "crucible_scenario"}  # type: dict  # what the scenario's code defines (no typing: ~2 ms)
    try:
        exec(compile(request["source"], request["filename"], "exec"), namespace)
        value = namespace[request["name"]](*ast.literal_eval(request["args"]), **ast.literal_eval(request["kwargs"]))
        reply = {"returned": plain_repr(value)}
    except BaseException as exc:  # the scenario's own failure is its answer
        traceback.print_exc()
        kind = type(exc)
        reply = {"raised": [f"{kind.__module__}.{kind.__qualname__}", str(exc)[:4000]]}
    sys.stderr.flush()
    answer.write(json.dumps(reply) + "\n")
    answer.flush()


def plain_repr(value):
    """``repr(value)`` when it reads back as an equal value: only plain data crosses."""
    text = repr(value)
    try:
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        same = False
    if not same:
        raise TypeError(f"a scenario must return plain data (literals, lists, tuples, dicts, sets); "
                        f"got {type(value).__name__}: {text[:200]}")
    return text


def zygote(control_fd, wanted=None):
    """Fork a child per request on ``control_fd``: the request's 3 descriptors become the
    child's stdin, stdout and stderr; ``pid N`` is sent when it started, ``exit N`` when done.
    ``wanted``: the top-level modules the repo's code imports (launch.py's ``--preload``, read
    from the baseline by the engine); only those of PRELOAD are loaded ahead, since a module
    no scenario imports is a cost with nothing saved (~9 ms of the preload, for the samples'
    repo). None: all of PRELOAD."""
    import ctypes
    import gc
    import importlib

    try:  # not traceable by its children (the same uid): its socket and pids stay its own
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass
    for name in PRELOAD if wanted is None else [n for n in PRELOAD if n.split(".")[0] in wanted]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # Out of the collector's sight from here (Python 3.7+): a child's collections never walk
    # the zygote's own objects, and so never copy the pages they lie on (~1.8 ms a scenario,
    # a quarter of one, in an image). The scenario's own objects are collected as ever.
    freeze = getattr(gc, "freeze", None)
    if freeze is not None:
        freeze()
    control = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, control_fd)
    while True:
        try:
            message, ancillary, _, _ = control.recvmsg(64, _socket.CMSG_SPACE(3 * 4))
        except OSError:
            return
        fds = [fd for level, kind, data in ancillary if (level, kind) == (_socket.SOL_SOCKET, _socket.SCM_RIGHTS)
               for fd in struct.unpack("%di" % (len(data) // 4), data[:len(data) - len(data) % 4])]
        if not message or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                control.close()
                os.closerange(3, 1 << 16)
                main()
                sys.stderr.flush()
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        control.sendall(f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        try:  # whatever it left running in its session goes with it, before the next scenario
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        control.sendall(f"exit {code}\n".encode())


def forget_environment():
    """Zero this process's initial environment block (what /proc/self/environ shows, on the
    stack whatever ``os.environ`` becomes): the launcher's, root's, for no scenario to read."""
    import ctypes
    with open("/proc/self/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51
    if 0 < start < end:
        ctypes.memset(start, 0, end - start)


def become(uid):
    """setpriv's --reuid --regid --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs
    here, then /proc/self/status read back: OSError unless all of it holds."""
    if uid == 0:
        return
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    with open("/proc/sys/kernel/cap_last_cap") as last:
        dropped = [libc.prctl(24, cap, 0, 0, 0) for cap in range(int(last.read()) + 1)]  # PR_CAPBSET_DROP
    if any(dropped) or libc.prctl(38, 1, 0, 0, 0):  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl")
    os.setresuid(uid, uid, uid)  # the permitted, effective and ambient sets go with root's uid
    if libc.capset((ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()):  # the inheritable set
        raise OSError(ctypes.get_errno(), "capset")
    with open("/proc/self/status") as status:
        got = {key: value.split() for key, _, value in (line.partition(":") for line in status)}
    want = {"Uid": [str(uid)] * 4, "Gid": [str(uid)] * 4, "Groups": [], "NoNewPrivs": ["1"]}
    want.update((name, ["0000000000000000"]) for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"))
    if any(got.get(name) != value for name, value in want.items()):
        raise OSError("not the credentials setpriv gives")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:  # --zygote FD [--preload NAME,NAME...]
        zygote(int(sys.argv[2]), sys.argv[4].split(",") if sys.argv[3:4] == ["--preload"] else None)
    else:
        main()
