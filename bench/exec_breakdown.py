"""Where one ``docker exec`` of ``true`` spends its time: phase by phase, three ways.

sdk    the Docker SDK's exec_create / exec_start(socket=True) / exec_inspect (what crucible used)
wire   engine.runtimes.docker.wire.ExecWire (what it uses on a unix socket now)
raw    hand-written HTTP on a fresh unix connection per request: the engine's own floor

each with crucible's wrapper (``sh -c 'echo $$; exec timeout ...'``) and bare, so the wrapper's
share shows; ``runc exec`` straight (no dockerd, no containerd) shows runc's. Used by
``bench_exec.py --breakdown``; runs alone too: ``python bench/exec_breakdown.py IMAGE``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SOCKET = "/var/run/docker.sock"
PHASES = ("created", "started", "first byte", "EOF", "exit code")


def _sdk(api, cid: str, argv: list[str]) -> list[float]:
    from engine.runtimes.docker.stream import HijackedStream

    marks = [time.perf_counter()]
    exec_id = api.exec_create(cid, argv, stdout=True, stderr=True)["Id"]
    marks.append(time.perf_counter())
    stream = HijackedStream(api.exec_start(exec_id, socket=True))
    return _drain(marks, stream.recv, stream.close, lambda: api.exec_inspect(exec_id))


def _wire(api, cid: str, argv: list[str]) -> list[float]:
    from engine.runtimes.docker.wire import wire_for

    wire = wire_for(api)
    assert wire is not None, "the wire needs the engine on a unix socket"
    marks = [time.perf_counter()]
    exec_id = wire.create(cid, {"AttachStdout": True, "AttachStderr": True, "Cmd": argv})
    marks.append(time.perf_counter())
    stream = wire.start(exec_id, tty=False)
    return _drain(marks, stream.recv, stream.close, lambda: wire.inspect(exec_id))


def _raw_request(method: str, path: str, body: dict | None, upgrade: bool = False) -> tuple[socket.socket, bytes]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(SOCKET)
    data = json.dumps(body).encode() if body is not None else b""
    extra = "Connection: Upgrade\r\nUpgrade: tcp\r\n" if upgrade else ""
    head = f"{method} {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n{extra}"
    sock.sendall(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += sock.recv(65536)
    return sock, buf


def _raw_json(method: str, path: str, body: dict | None) -> dict:
    sock, buf = _raw_request(method, path, body)
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(rest) < length:
        rest += sock.recv(65536)
    sock.close()
    return json.loads(rest)


def _raw(api, cid: str, argv: list[str]) -> list[float]:
    v = f"/v{api._version}"
    marks = [time.perf_counter()]
    exec_id = _raw_json(
        "POST", f"{v}/containers/{cid}/exec", {"AttachStdout": True, "AttachStderr": True, "Cmd": argv}
    )["Id"]
    marks.append(time.perf_counter())
    sock, buf = _raw_request("POST", f"{v}/exec/{exec_id}/start", {"Detach": False, "Tty": False}, upgrade=True)
    early = [buf.partition(b"\r\n\r\n")[2]]
    return _drain(
        marks,
        lambda: early.pop() if early and early[0] else sock.recv(65536),
        sock.close,
        lambda: _raw_json("GET", f"{v}/exec/{exec_id}/json", None),
    )


def _drain(
    marks: list[float], recv: Callable[[], bytes], close: Callable[[], None], inspect: Callable[[], dict]
) -> list[float]:
    marks.append(time.perf_counter())  # started: the stream is ours
    first = None
    while recv():
        first = first or time.perf_counter()
    eof = time.perf_counter()
    marks += [first or eof, eof]
    close()
    while (info := inspect()).get("Running") or info.get("ExitCode") is None:
        pass
    marks.append(time.perf_counter())
    return [(m - marks[0]) * 1000 for m in marks[1:]]


def breakdown(image: str, trials: int = 25) -> None:
    import docker

    from engine.runtimes.docker.exec import TIMEOUT_WRAPPER

    client = docker.from_env(timeout=600)
    container = client.containers.run(image, ["sleep", "600"], detach=True, network_disabled=True, remove=True)
    try:
        cid, api = container.id, client.api
        wrapped = [*TIMEOUT_WRAPPER, "60.000", "true"]
        ways = {
            f"{name} {label}": (fn, argv)
            for name, fn in (("sdk", _sdk), ("wire", _wire), ("raw", _raw))
            for label, argv in (("wrapped", wrapped), ("bare", ["true"]))
        }
        got: dict[str, list[list[float]]] = {name: [] for name in ways}
        shuffle = random.Random(38).shuffle
        for trial in range(trials + 2):
            order = list(ways.items())
            shuffle(order)  # each way's place in a trial moves: the exec before one leaves work behind
            for name, (fn, argv) in order:
                marks = fn(api, cid, argv)
                if trial >= 2:
                    got[name].append(marks)
        runc = _runc(cid, trials)
    finally:
        container.remove(force=True)
    print(f"\n(c) one exec of `true`, ms since the request began (medians of {trials}; load {os.getloadavg()[0]:.2f}):")
    print(f"  {'way':14}" + "".join(f"{p:>12}" for p in PHASES))
    for name, rows in got.items():
        medians = [statistics.median(r[i] for r in rows) for i in range(len(PHASES))]
        print(f"  {name:14}" + "".join(f"{m:12.1f}" for m in medians))
    if runc:
        print(
            f"  runc exec alone (its own process, no dockerd/containerd): median {statistics.median(runc):.1f} ms, "
            f"min {min(runc):.1f}, max {max(runc):.1f}"
        )


def _runc(cid: str, trials: int) -> list[float]:
    """``runc exec`` on the container itself, bypassing dockerd and containerd (root only)."""
    if not shutil.which("runc"):
        return []
    out = []
    for _ in range(trials):
        began = time.perf_counter()
        done = subprocess.run(
            ["runc", "--root", "/var/run/docker/runtime-runc/moby", "exec", cid, "true"], capture_output=True
        )
        if done.returncode != 0:
            return []
        out.append((time.perf_counter() - began) * 1000)
    return out


if __name__ == "__main__":
    breakdown(sys.argv[1])
