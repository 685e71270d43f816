"""The machine's CPU for bench_sweep's floors and for its warm sweep, trial by trial.

On two cores a sweep of two runs at a time is CPU-bound, so its ratio to the floors follows the
ratio of the CPU both cost; this reads that CPU (every process's user+system from /proc/stat:
the daemons' and the kernel's included) around the 8 floors (``bench_sweep.floors``) and around
a warm sweep (``bench_sweep.sweep``, the warm server started first), alternating. The same work
costs more CPU on a slower host, so compare within one run only.

    .venv/bin/python bench/sweep_cpu.py [--trials 3] [--override KEY=VALUE]...
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def machine_cpu_seconds() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(f) for f in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--override", action="append", default=[], help="a config override for the sweep")
    ns = parser.parse_args()
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))
    import bench_sweep

    planned, patches, _golden = bench_sweep.planned_sweep()
    warm = [sys.executable, "-m", "engine.cli", "warm"]
    bench_sweep.floors(planned, patches)  # the page cache, not counted
    subprocess.run([*warm, "start"], cwd=ROOT, capture_output=True, check=True)
    rows: list[tuple[float, float, float, float]] = []
    try:
        bench_sweep.sweep(30_000, *ns.override, warm=True)  # the server's first fork, not counted
        for trial in range(ns.trials):
            cpu = machine_cpu_seconds()
            floor_wall = bench_sweep.floors(planned, patches)
            floor_cpu = machine_cpu_seconds() - cpu
            cpu = machine_cpu_seconds()
            sweep_wall = bench_sweep.sweep(31_000 + trial, *ns.override, warm=True)
            rows.append((floor_wall, floor_cpu, sweep_wall, machine_cpu_seconds() - cpu))
    finally:
        subprocess.run([*warm, "stop"], cwd=ROOT, capture_output=True)
    print(f"{len(planned)} runs, 2 at a time, {ns.trials} trials; load {os.getloadavg()[0]:.2f}")
    print(
        f"{'trial':<6} {'floor wall s':>12} {'floor CPU s':>12} {'sweep wall s':>13} {'sweep CPU s':>12} {'CPU ratio':>10}"
    )
    for index, (fw, fc, sw, sc) in enumerate(rows):
        print(f"{index:<6} {fw:12.2f} {fc:12.2f} {sw:13.2f} {sc:12.2f} {sc / fc:10.2f}")
    ratio = statistics.median(sc / fc for _, fc, _, sc in rows)
    print(
        f"median machine CPU, warm sweep / floors: {ratio:.2f}x; per run {statistics.median(r[3] for r in rows) / len(planned):.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
