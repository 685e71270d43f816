"""Where a golden run's CPU goes, beside the floor's: why the wall-time ratios stop where they do.

On two cores a run cannot take less wall time than half the CPU time it costs the machine, so
this counts the CPU, per trial, for the in-process golden run and bench_golden's floor:

machine     user+system of every process (/proc/stat), the daemons' and the kernel's included
crucible    this process (the engine: plan to stored verdict, the agent, the MCP server)
agent ws    the agent's container: its cgroup's cpuacct (every process in it, execs included)
grading ws  the grading container's, the same way (the stager, the verdict's launcher, the tests)
the rest    machine minus those: dockerd, containerd, the shims and runc creating, starting,
            exec-ing into and removing the containers

A container's cgroup goes with it, so each is read as the engine begins to take it down (before its
spawner quits); the floor's container prints its own at its end. Run on a quiet machine.

    .venv/bin/python bench/golden_cpu.py [--task sample/last_page] [--trials 6] [--override KEY=VALUE]...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CPUACCT = "/sys/fs/cgroup/cpuacct/docker/{}/cpuacct.usage"
"""A container's CPU nanoseconds under Docker's cgroupfs driver on cgroup v1 (this machine's)."""


def machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def read_before_removal() -> dict[str, tuple[str, float]]:
    """Container id -> (its purpose: ``agent`` or ``grade``, its CPU seconds), read as the engine
    begins to take it down (before its spawner is told to quit: a stopped container has no cgroup
    left to read)."""
    from engine.runtimes.docker.workspace import DockerWorkspace

    seen: dict[str, tuple[str, float]] = {}
    remove = DockerWorkspace._remove

    def reading(self) -> None:
        if self.container_id is not None:
            try:
                seen[self.container_id] = (self.purpose, int(Path(CPUACCT.format(self.container_id)).read_text()) / 1e9)
            except OSError:
                pass  # gone already: that trial's container shares are left out of it
        remove(self)

    DockerWorkspace._remove = reading  # type: ignore[method-assign]
    return seen


def floor_cpu(image: str, task, patch: bytes) -> tuple[float, float]:
    """bench_golden's floor, its container's own CPU printed by its last command; with the machine's."""
    import bench_golden

    own_cpu = "echo CPU $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)"  # its own cgroup, seen from inside
    argv = bench_golden.floor_argv(image, task, then=own_cpu)  # the host's git work is not the floor's
    machine = machine_cpu_seconds()
    done = subprocess.run(
        argv,
        input=patch,
        capture_output=True,
    )
    machine = machine_cpu_seconds() - machine
    found = re.search(rb"CPU (\d+)", done.stdout)
    if found is None:
        raise SystemExit(f"floor trial failed: {done.stdout.decode()[-500:]} {done.stderr.decode()[-500:]}")
    return machine, int(found.group(1)) / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="sample/last_page")
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--override", action="append", default=[], help="a config override (integrity=none)")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-cpu-"))
    seen = read_before_removal()

    import bench_golden

    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.session import session_for

    typed = to_typed(compose_config([f"task={ns.task}", "agent=integration_test", *ns.override]))
    session = session_for(typed)
    planned = plan(typed, builder=session.builder)
    for image in (*planned.images, *([planned.setup_image] if planned.setup_image else [])):
        session.builder.ensure(image, session.store)
    task = planned.spec.task
    patch = bench_golden.golden_patch(bench_golden._repo(task), task)
    run_root = Path(os.environ["CRUCIBLE_HOME"]) / "runs"

    runs: list[dict[str, float]] = []
    floors: list[dict[str, float]] = []
    asyncio.run(run_one(planned, session, root=run_root))  # warm, not counted
    for _ in range(ns.trials):
        seen.clear()
        machine, own, wall = machine_cpu_seconds(), time.process_time(), time.perf_counter()
        record = asyncio.run(run_one(planned, session, root=run_root))
        wall, own, machine = time.perf_counter() - wall, time.process_time() - own, machine_cpu_seconds() - machine
        by_purpose = dict(seen.values())
        if record.status != "completed" or record.reward != 1.0 or sorted(by_purpose) != ["agent", "grade"]:
            raise SystemExit(f"golden run failed or not measured: {record.status} {record.error} {sorted(by_purpose)}")
        agent_ws, grading_ws = by_purpose["agent"], by_purpose["grade"]
        runs.append(
            {
                "wall": wall,
                "machine": machine,
                "crucible": own,
                "agent ws": agent_ws,
                "grading ws": grading_ws,
                "the rest": machine - own - agent_ws - grading_ws,
            }
        )
        began = time.perf_counter()
        floor_machine, floor_ws = floor_cpu(planned.image.tag, task, patch)
        floors.append(
            {
                "wall": time.perf_counter() - began,
                "machine": floor_machine,
                "grading ws": floor_ws,
                "the rest": floor_machine - floor_ws,
            }
        )

    med = statistics.median
    print(f"task {ns.task}, {ns.trials} trials each, medians of CPU seconds per run; load {os.getloadavg()[0]:.2f}")
    print(f"{'':12} {'golden run':>11} {'floor':>8}")
    for key in ("wall", "machine", "crucible", "agent ws", "grading ws", "the rest"):
        ours = med(r[key] for r in runs)
        theirs = f"{med(f[key] for f in floors):8.3f}" if key in floors[0] else f"{'-':>8}"
        print(f"{key:12} {ours:11.3f} {theirs}")
    ratio = med(r["machine"] for r in runs) / med(f["machine"] for f in floors)
    print(
        f"machine CPU, golden run / floor: {ratio:.2f}x (wall: {med(r['wall'] for r in runs) / med(f['wall'] for f in floors):.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
