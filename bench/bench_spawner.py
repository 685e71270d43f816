"""What one command in a workspace costs, started by the container's spawner or by ``docker exec``.

Two workspaces of the same image on this machine's engine, one with the spawner
(engine/runtimes/docker/spawner.py, the default) and one without (``runtime.spawner=false``:
every command a ``docker exec``). Each round runs N commands in one and then in the other,
alternating which goes first, and reads per command:

wall      seconds from the ``Workspace.exec`` call to its result
machine   CPU seconds of every process on the machine (/proc/stat: dockerd, containerd, the
          shim, runc and this process included), per command
engine    this process's own CPU seconds, per command

for ``true`` (the fixed cost) and for ``sh -c 'cat; echo done'`` with 64 KB of stdin. Run it on a
quiet machine; the ratio is what it gates (the spawner must cost under half a docker exec's CPU).

    .venv/bin/python bench/bench_spawner.py [--rounds 5] [--commands 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET = 0.5
"""The spawner's machine CPU per command, at most this share of docker exec's."""


def machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


async def measure(ws, argv: list[str], stdin: bytes | None, count: int) -> tuple[float, float, float]:
    machine, own, wall = machine_cpu_seconds(), time.process_time(), time.perf_counter()
    for _ in range(count):
        done = await ws.exec(argv, stdin=stdin)
        if done.exit_code != 0:
            raise SystemExit(f"{argv} failed: {done}")
    wall, own, machine = time.perf_counter() - wall, time.process_time() - own, machine_cpu_seconds() - machine
    return wall / count, machine / count, own / count


async def main_async(ns: argparse.Namespace) -> int:
    from engine.build.baseimage import ensure_base_image
    from engine.runtimes.docker.runtime import DockerRuntime
    from engine.runtimes.docker.spawner import built

    if built() is None:
        raise SystemExit("no spawner could be built here (no C compiler): make setup installs one")
    runtime = DockerRuntime()
    image = ensure_base_image(runtime.client).tag
    workspaces = {
        "spawner": DockerRuntime(spawner=True).provision(
            image, run_id=f"bench-{uuid.uuid4().hex[:6]}", network=False, purpose="spawner"
        ),
        "docker exec": DockerRuntime(spawner=False).provision(
            image, run_id=f"bench-{uuid.uuid4().hex[:6]}", network=False, purpose="exec"
        ),
    }
    cases = {"true": (["true"], None), "cat 64 KB": (["sh", "-c", "cat; echo done"], os.urandom(1 << 16))}
    seen: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for ws in workspaces.values():
        await ws.__aenter__()
    try:
        for ws in workspaces.values():  # warm: the image's pages, the first connection
            await measure(ws, ["true"], None, 3)
        for round_ in range(ns.rounds):
            order = list(workspaces) if round_ % 2 == 0 else list(reversed(workspaces))
            for case, (argv, stdin) in cases.items():
                for name in order:
                    seen.setdefault((case, name), []).append(await measure(workspaces[name], argv, stdin, ns.commands))
    finally:
        for ws in workspaces.values():
            await ws.close()
    load = os.getloadavg()[0]
    print(f"{ns.rounds} rounds of {ns.commands} commands each, medians per command; load {load:.2f}")
    print(f"{'command':<12} {'started by':<12} {'wall s':>8} {'machine CPU s':>14} {'engine CPU s':>13}")
    ratios = {}
    for case in cases:
        for name in workspaces:
            wall, machine, own = (statistics.median(t[i] for t in seen[(case, name)]) for i in range(3))
            print(f"{case:<12} {name:<12} {wall:8.4f} {machine:14.4f} {own:13.4f}")
        ratios[case] = statistics.median(
            s[1] / d[1] for s, d in zip(seen[(case, "spawner")], seen[(case, "docker exec")], strict=True)
        )
        print(f"{case:<12} spawner / docker exec, machine CPU (each round's own): {ratios[case]:.2f}x")
    worst = max(ratios.values())
    if worst > TARGET:
        print(f"FAIL: a spawned command costs {worst:.2f}x a docker exec's machine CPU (target <= {TARGET}x)")
        return 1
    print(f"ok: a spawned command costs at most {worst:.2f}x a docker exec's machine CPU (<= {TARGET}x)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--commands", type=int, default=20)
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
