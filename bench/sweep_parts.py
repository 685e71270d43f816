"""Where a sweep's CPU goes, beside its floors': the parts behind bench_sweep's ratio.

bench_sweep's 8 runs (``noop`` and ``integration_test`` on the 4 samples), 2 at a time, run by
``crucible run -m``'s in-process sweep (engine/cli/sweep.py, the code a warm server's fork runs)
in this process, and its 8 floors (``bench_sweep.floors``: the same work, one ``docker run``
each, 2 at a time), alternating. On two cores both are CPU-bound, so the wall-time ratio
follows the CPU each costs; per trial, the CPU seconds of:

machine      every process's user+system (/proc/stat), the daemons' and the kernel's included
crucible     this process: the engine (composes, plans, the agents, the MCP servers, the store)
agent ws     the agents' containers (each cgroup's cpuacct, read as the engine takes it down)
grading ws   the grading containers, the same way (the stager, the verdict's launcher and
             zygote, pytest, the scenarios); a floor's container prints its own at its end
the rest     machine minus those: dockerd, containerd, the shims and runc making, starting and
             removing the containers (a floor's network sandbox among it), the kernel's work

    .venv/bin/python bench/sweep_parts.py [--trials 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

PARTS = ("wall", "machine", "crucible", "agent ws", "grading ws", "the rest")


def floors(planned: list, work: list[tuple[bytes, bool]]) -> dict[str, float]:
    """The 8 floors, 2 at a time, each container's own CPU printed by its last command."""
    from bench_golden import floor_argv
    from bench_sweep import settle
    from golden_cpu import machine_cpu_seconds

    def one(index: int) -> float:
        plan, (patch, fails) = planned[index], work[index]
        own = "echo CPU $(cat /sys/fs/cgroup/cpuacct/cpuacct.usage)"  # its own cgroup, seen from inside
        done = subprocess.run(
            floor_argv(plan.image.tag, plan.spec.task, then=own, fails=fails), input=patch, capture_output=True
        )
        found = re.search(rb"CPU (\d+)", done.stdout)
        if found is None:
            raise SystemExit(f"floor failed: {done.stdout.decode()[-500:]} {done.stderr.decode()[-500:]}")
        return int(found.group(1)) / 1e9

    settle()
    machine, wall = machine_cpu_seconds(), time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        containers = sum(pool.map(one, range(len(planned))))
    wall, machine = time.perf_counter() - wall, machine_cpu_seconds() - machine
    return {"wall": wall, "machine": machine, "grading ws": containers, "the rest": machine - containers}


def sweep(seen: dict[str, tuple[str, float]], trial: int) -> dict[str, float]:
    """bench_sweep's sweep by the in-process ``Sweep``, every run completed; ``seen`` the
    containers' CPU by purpose (golden_cpu.read_before_removal)."""
    from bench_sweep import settle
    from golden_cpu import machine_cpu_seconds

    from engine.cli.sweep import Sweep
    from engine.config.compose import compose_config
    from engine.config.tree import group_options

    seed = random.randrange(10**9)
    tasks = [option for option in group_options("task") if option.startswith("sample/")]
    combos = [
        [f"task={task}", f"agent={agent}", f"seed={seed}"] for task in tasks for agent in ("noop", "integration_test")
    ]
    runs = Path(os.environ["CRUCIBLE_HOME"]) / "runs" / f"parts-{trial}"
    settle()
    seen.clear()
    machine, own, wall = machine_cpu_seconds(), time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        done = Sweep(
            [(combo, compose_config(combo)) for combo in combos], sweep_id=f"parts-{seed}", sweep_dir=runs, parallel=2
        )
        done.plan_first()
        code = done.run()
    wall, own, machine = time.perf_counter() - wall, time.process_time() - own, machine_cpu_seconds() - machine
    parts = [purpose for purpose, _ in seen.values()]
    if code != 0 or parts.count("grade") != len(combos):
        raise SystemExit(f"the sweep failed or was not measured: exit {code}, containers read {parts}")
    agent = sum(cpu for purpose, cpu in seen.values() if purpose == "agent")
    grading = sum(cpu for purpose, cpu in seen.values() if purpose == "grade")
    rest = machine - own - agent - grading
    return {
        "wall": wall,
        "machine": machine,
        "crucible": own,
        "agent ws": agent,
        "grading ws": grading,
        "the rest": rest,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-parts-"))
    import bench_sweep

    planned, same, _golden = bench_sweep.planned_sweep()
    from golden_cpu import read_before_removal

    seen = read_before_removal()
    floors(planned, same)  # the page cache, not counted
    sweep(seen, -1)  # the engine's first sweep in this process (its imports, its first store open), not counted
    rows: list[tuple[dict[str, float], dict[str, float]]] = []
    for trial in range(ns.trials):
        rows.append((floors(planned, same), sweep(seen, trial)))
    print(
        f"{len(planned)} runs, 2 at a time, {ns.trials} trials each, alternating; medians; load {os.getloadavg()[0]:.2f}"
    )
    print(f"{'seconds':<11} {'sweep':>7} {'8 floors':>9} {'sweep / floors':>15}")
    for part in PARTS:
        ours = statistics.median(sweep_row.get(part, 0.0) for _, sweep_row in rows)
        theirs = statistics.median(floor_row.get(part, 0.0) for floor_row, _ in rows)
        ratio = f"{ours / theirs:15.2f}" if theirs > 0 else f"{'-':>15}"
        print(f"{part:<11} {ours:7.3f} {theirs:9.3f} {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
