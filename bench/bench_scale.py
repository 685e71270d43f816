"""Issue 37: 40 noop runs on one Docker host, on two, and on a 2-worker Ray cluster, as throughput
ratios measured in one run (trials alternate), with where the time goes.

default     `crucible run -m task=glob(sample/*) agent=noop attempt=range(0,10)`, 2 at a time, on
            this machine's engine as crucible always ran (bind-mounted bridge, no placement)
one host    the same with `runtime.hosts=[this engine, 2 slots]`: the placement, the relayed
            bridge (a sidecar per run) and the image check of a listed host, on one engine
two hosts   `runtime.hosts=[this engine, 2 slots; a second dockerd, 2 slots]`, 4 at a time
ray         `hydra/launcher=ray` on a local cluster started here (a head with no CPUs and two
            worker nodes of one CPU each: two jobs at once); the cluster's start is not timed

All of it on this 2-core machine: a second dockerd or a Ray worker adds no CPU, so the figures
show what each layer costs, not what more machines would give. Each sweep uses a seed of its
own, so nothing is answered from the store. Per configuration: the whole command, runs per
second and the ratio to `default`, and from the run records: before the first run started
(start-up, composes, plans, connecting to hosts, dispatch), the runs' span, after the last
ended (ingest, summary, exit), and a run's median wall seconds and provision seconds.

    .venv/bin/python bench/bench_scale.py [--trials 1]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "runtimes" / "docker"))

RUNS = 40
SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=noop", "attempt=range(0,10)"]
LOCAL = "unix:///var/run/docker.sock"
RAY = Path(sys.executable).parent / "ray"


def hosts(*entries: tuple[str, int]) -> str:
    return "runtime.hosts=[" + ",".join(f"{{url:'{url}',slots:{slots}}}" for url, slots in entries) + "]"


def sweep(env: dict[str, str], seed: int, *extra: str) -> dict[str, float]:
    began, wall_began = time.perf_counter(), time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", *SWEEP, f"seed={seed}", *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - began
    if proc.returncode != 0 or f"{RUNS} run(s) stored" not in proc.stdout:
        raise SystemExit(f"sweep {extra} failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    return {"seconds": seconds, **_phases(env, seed, wall_began, seconds)}


def _phases(env: dict[str, str], seed: int, wall_began: float, seconds: float) -> dict[str, float]:
    from engine.store.duckdb import DuckDBStore

    store = DuckDBStore(Path(env["CRUCIBLE_HOME"]) / "store.duckdb")
    _, rows = store.query(
        "SELECT epoch(min(started_at)), epoch(max(ended_at)), median(wall_seconds), "
        "median(CAST(json_extract(timings, '$.provision') AS DOUBLE)), count(*) FILTER (WHERE status <> 'completed') "
        f"FROM runs WHERE seed = {seed}"
    )
    first, last, run_wall, provision, failed = rows[0]
    if failed:
        raise SystemExit(f"seed {seed}: {failed} run(s) did not complete")
    return {
        "before": first - wall_began,
        "span": last - first,
        "after": wall_began + seconds - last,
        "run": run_wall,
        "provision": provision or 0.0,
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_ray(env: dict[str, str], root: Path) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A head with no CPUs and two one-CPU worker nodes on loopback; (address, their processes)."""
    address = f"127.0.0.1:{_free_port()}"
    common = ["--node-ip-address=127.0.0.1", "--object-store-memory=100000000", "--block"]
    nodes = [
        subprocess.Popen(
            [str(RAY), "start", "--head", f"--port={address.split(':')[1]}", "--num-cpus=0"]
            + ["--include-dashboard=false", *common],
            env=env,
            cwd=root,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    _wait_for_cpus(address, env, 0.0)
    for n in (1, 2):  # one at a time: two nodes registering at once on one host can time out
        nodes.append(
            subprocess.Popen(
                [str(RAY), "start", f"--address={address}", "--num-cpus=1", *common],
                env=env,
                cwd=root,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        _wait_for_cpus(address, env, float(n))
    return address, nodes


def _wait_for_cpus(address: str, env: dict[str, str], cpus: float) -> None:
    import re

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = subprocess.run([str(RAY), "status", f"--address={address}"], capture_output=True, text=True, env=env)
        found = re.search(r"([\d.]+)/([\d.]+) CPU", out.stdout)
        if "Active" in out.stdout and float(found.group(2) if found else 0.0) >= cpus:
            return
        time.sleep(0.5)
    raise SystemExit(f"the Ray cluster at {address} did not reach {cpus} CPUs")


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    """Our own nodes only (never `ray stop`, which ends every Ray process on the machine)."""
    for proc in processes:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=1)
    ns = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a killed bench still stops its nodes and dockerd
    from two_hosts import second_dockerd

    home = tempfile.mkdtemp(prefix="crucible-bench-scale-")
    env = {**os.environ, "CRUCIBLE_HOME": home, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    env.pop("CRUCIBLE_STORE", None)
    results: dict[str, list[dict[str, float]]] = {"default": [], "one host": [], "two hosts": [], "ray": []}
    with second_dockerd() as d2:
        started = time.perf_counter()
        address, nodes = start_ray(env, Path(home))
        ray_start = time.perf_counter() - started
        try:
            configs = {
                "default": ["hydra.launcher.n_jobs=2"],
                "one host": ["hydra.launcher.n_jobs=2", hosts((LOCAL, 2))],
                "two hosts": ["hydra.launcher.n_jobs=4", hosts((LOCAL, 2), (d2.url, 2))],
                "ray": ["hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}"],
            }
            # Not timed: the task images built, moved to d2, the first start of every path.
            for name, extra in configs.items():
                sweep(env, 90_000 + len(name), *extra)
            for trial in range(ns.trials):
                for name, extra in configs.items():
                    results[name].append(sweep(env, 1000 * trial + len(results[name]) + 17 * len(name), *extra))
        finally:
            stop(nodes)
    print(
        f"{RUNS} noop runs per sweep, {ns.trials} trial(s) each, alternating, medians; "
        f"load average {os.getloadavg()[0]:.2f}; Ray cluster start {ray_start:.1f} s (not in the figures)"
    )
    base = statistics.median(r["seconds"] for r in results["default"])
    print(
        f"{'configuration':12} {'seconds':>8} {'runs/s':>7} {'x default':>10} {'before s':>9} {'span s':>7} "
        f"{'after s':>8} {'run s':>6} {'provision s':>12}   seconds min..max"
    )
    for name, trials in results.items():

        def med(key: str, trials: list[dict[str, float]] = trials) -> float:
            return statistics.median(t[key] for t in trials)

        seconds = med("seconds")
        print(
            f"{name:12} {seconds:8.2f} {RUNS / seconds:7.2f} {base / seconds:10.2f} {med('before'):9.2f} "
            f"{med('span'):7.2f} {med('after'):8.2f} {med('run'):6.2f} {med('provision'):12.2f}   "
            f"{min(t['seconds'] for t in trials):.2f}..{max(t['seconds'] for t in trials):.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
