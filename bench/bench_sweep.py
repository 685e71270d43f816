"""A whole sweep against the floor, as ratios measured in one run.

floor    the sweep's runs as one-`docker run` floors, two at a time, as the sweep runs them: each
         does its run's work and no more: a golden run's applies the golden diff with the hidden
         tests and runs the test command (bench_golden's), a baseline's applies the hidden tests
         alone and runs them on the code as it was, where they fail, as the baseline's verdict
         says they do (its exit 0 only then). The target is against this floor.
golden floor  (printed beside it) the golden diff in every run's floor, the baselines' too: the
         floor before stop 58, whose baselines ran passing tests (~5% less work than failing ones).
sweep    `crucible run -m task='glob(sample/*)' agent=noop,integration_test`: 8 runs, 2 at a
         time, the whole command (start-up, composes, plans, containers, summary).
warm     the same sweep with `crucible warm start`'s server running: the command is forked from
         a server holding crucible imported (engine/cli/warm.py); `sweep` is started cold.
joblib   (``--joblib``) the same sweep through Hydra's joblib launcher (`hydra/launcher=joblib`):
         each worker a fresh interpreter that composes and plans its own jobs.

Each trial uses a new seed, so nothing is answered from the store. Trials alternate, and each
timed pipeline starts on a quiet machine (``settle``): what the one before left the kernel and
the daemons to finish (containers' teardown) is not charged to the next, floors or sweeps.

    .venv/bin/python bench/bench_sweep.py [--trials 3] [--joblib]

A baseline (``noop``) run's capture of its untouched workspace is kept once per image
(engine/run/untouched.py): the warm-up sweeps keep them, so the trials start no baseline
workspace. ``--fresh-captures`` drops them before every sweep: each sweep then captures as the
first sweep over new images does.

Exits non-zero when the warm sweep's median ratio to its floor (each trial's own) is past
TARGET (issue 38). Each default sweep is broken down from its run records: before its first run
started (start-up, composes, plans), from then to its last run's end, and after it (summary, exit).
"""

from __future__ import annotations

import argparse
import os
import shutil
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

TARGET = 1.5
FRESH_CAPTURES = False
"""``--fresh-captures``: no baseline capture kept from one sweep to the next."""
PHASES: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
"""Per default sweep, cold and warm: seconds before its first run started, its runs' span, after the last ended."""
SWEEP = ["run", "-m", "task=glob(sample/*)", "agent=noop,integration_test", "hydra.launcher.n_jobs=2"]


def settle(quiet: float = 0.15, window: float = 0.05, at_most: float = 3.0) -> None:
    """Until the machine's CPU has been busy less than ``quiet`` of a ``window`` (every process's
    user+system, /proc/stat), for at most ``at_most`` seconds: a containers' teardown goes on in
    the kernel and the daemons after their command has returned."""
    from sweep_cpu import machine_cpu_seconds

    cores, deadline = os.cpu_count() or 1, time.monotonic() + at_most
    while time.monotonic() < deadline:
        used = machine_cpu_seconds()
        time.sleep(window)
        if machine_cpu_seconds() - used < quiet * window * cores:
            return


def floors(planned: list, work: list[tuple[bytes, bool]]) -> float:
    """The floors of ``planned``, each with its ``(patch, whether its tests fail)``."""
    from bench_golden import floor_trial

    settle()
    began = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(
            pool.map(
                lambda i: floor_trial(planned[i].image.tag, planned[i].spec.task, work[i][0], fails=work[i][1]),
                range(len(planned)),
            )
        )
    return time.perf_counter() - began


def sweep(seed: int, *extra: str, warm: bool = False) -> float:
    env = {**os.environ, "CRUCIBLE_WARM": "on" if warm else "off"}
    if FRESH_CAPTURES:
        shutil.rmtree(Path(os.environ["CRUCIBLE_HOME"]) / "cache" / "untouched", ignore_errors=True)
    settle()
    began, wall_began = time.perf_counter(), time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", *SWEEP, f"seed={seed}", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    seconds = time.perf_counter() - began
    if proc.returncode != 0 or "8 run(s) stored" not in proc.stdout:
        raise SystemExit(f"sweep failed: {proc.stdout[-1500:]} {proc.stderr[-1500:]}")
    if not extra:
        PHASES[warm].append(_phases(seed, wall_began, seconds))
    return seconds


def _phases(seed: int, wall_began: float, seconds: float) -> tuple[float, float, float]:
    """(before the first run started, the runs' span, after the last run ended), from the records."""
    from engine.store.duckdb import DuckDBStore

    _, rows = DuckDBStore().query(f"SELECT epoch(min(started_at)), epoch(max(ended_at)) FROM runs WHERE seed = {seed}")
    first, last = rows[0]
    return first - wall_began, last - first, wall_began + seconds - last


def planned_sweep() -> tuple[list, list[tuple[bytes, bool]], list[tuple[bytes, bool]]]:
    """The sweep's 8 jobs planned, their images there, and each one's floor: the same work's
    (a baseline's patch the hidden tests alone, its tests failing) and the golden floor's (the
    golden diff with the hidden tests, every run's tests passing)."""
    from bench_golden import golden_patch

    from engine.config.compose import compose_config, to_typed
    from engine.config.tree import group_options
    from engine.plan.repos import resolve_repo
    from engine.plan.spec import plan
    from engine.run.session import session_for

    planned = []
    for task in [o for o in group_options("task") if o.startswith("sample/")]:
        for agent in ("noop", "integration_test"):
            typed = to_typed(compose_config([f"task={task}", f"agent={agent}"]))
            session = session_for(typed)
            planned.append(plan(typed, builder=session.builder))
    for p in planned:  # every image a run starts from, its setup layer too (engine/plan/setup_layer.py)
        for image in (*p.images, *([p.setup_image] if p.setup_image else [])):
            session.builder.ensure(image, session.store)
    baseline = [p.spec.agent_name == "noop" for p in planned]  # its submission is empty
    same = [
        (golden_patch(resolve_repo(p.spec.task.repo), p.spec.task, fix=not b), b) for p, b in zip(planned, baseline)
    ]
    golden = [(golden_patch(resolve_repo(p.spec.task.repo), p.spec.task), False) for p in planned]
    return planned, same, golden


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument(
        "--fresh-captures", action="store_true", help="drop the kept baseline captures before each sweep"
    )
    parser.add_argument("--joblib", action="store_true", help="time the sweep through Hydra's joblib launcher too")
    ns = parser.parse_args()
    global FRESH_CAPTURES
    FRESH_CAPTURES = ns.fresh_captures
    # Bytecode as scripts/setup.sh leaves it (an installed crucible has it too), whatever
    # PYTHONDONTWRITEBYTECODE says: the timings are of crucible, not of compiling it.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "engine", "envs", "swe_tasks"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    os.environ.setdefault("CRUCIBLE_HOME", tempfile.mkdtemp(prefix="crucible-bench-"))
    planned, same, golden = planned_sweep()
    floors(planned, same)  # warm the page cache, not timed
    floors(planned, golden)
    sweep(10_000)  # the same for the sweep's own first start
    warm = [sys.executable, "-m", "engine.cli", "warm"]
    started = subprocess.run([*warm, "start"], cwd=ROOT, capture_output=True, text=True)
    if started.returncode != 0:
        raise SystemExit(f"crucible warm start failed: {started.stdout} {started.stderr}")
    try:
        sweep(10_001, warm=True)  # and the warm server's first fork
        PHASES[False].clear()
        PHASES[True].clear()
        return _trials(ns, planned, same, golden)
    finally:
        subprocess.run([*warm, "stop"], cwd=ROOT, capture_output=True)


def _trials(ns: argparse.Namespace, planned: list, same: list, golden: list) -> int:
    timings: dict[str, list[float]] = {"floor": [], "golden": [], "sweep": [], "warm": []}
    timings.update({"joblib": []} if ns.joblib else {})
    for trial in range(ns.trials):
        timings["floor"].append(floors(planned, same))
        timings["golden"].append(floors(planned, golden))
        timings["sweep"].append(sweep(3 * trial + 1))
        timings["warm"].append(sweep(3 * trial + 2, warm=True))
        if ns.joblib:
            timings["joblib"].append(sweep(3 * trial + 3, "hydra/launcher=joblib"))
    floor = statistics.median(timings["floor"])
    # Each trial's own ratio too: its floor and its sweeps ran within seconds of each other, so
    # a machine whose speed drifts over minutes (a shared host's) moves both alike.
    paired = {
        name: statistics.median(v / f for v, f in zip(timings[name], timings["floor"]))
        for name in timings
        if name not in ("floor", "golden")
    }
    by_golden = statistics.median(w / g for w, g in zip(timings["warm"], timings["golden"]))
    print(
        f"{len(planned)} runs, 2 at a time, {ns.trials} trials each, medians (perf_counter); "
        f"load average {os.getloadavg()[0]:.2f}"
        + ("; no baseline capture kept between sweeps" if FRESH_CAPTURES else "")
    )
    print(f"{'pipeline':44} {'median s':>9} {'x floor':>8}   min..max s")
    for name, label in (
        ("floor", "floor: 8 docker runs, 2 at a time"),
        ("golden", "golden floor: the golden diff in all 8"),
        ("sweep", "crucible run -m (in-process, default), cold"),
        ("warm", "crucible run -m, warm server"),
        ("joblib", "crucible run -m hydra/launcher=joblib"),
    ):
        if name not in timings:
            continue
        values = timings[name]
        print(
            f"{label:44} {statistics.median(values):9.3f} {statistics.median(values) / floor:8.2f}   "
            f"{min(values):.3f}..{max(values):.3f}"
        )
    print(
        "median of each trial's own ratio to its floor: "
        + ", ".join(f"{name} {ratio:.2f}" for name, ratio in paired.items())
        + f"; warm to the golden floor {by_golden:.2f}"
    )
    for name in ("sweep", "warm"):
        print(
            f"per trial (floor s, {name} s, ratio): "
            + "; ".join(f"{f:.2f} {s:.2f} {s / f:.2f}" for f, s in zip(timings["floor"], timings[name]))
        )
    for warm, label in ((False, "cold"), (True, "warm")):
        before, span, after = (statistics.median(p[i] for p in PHASES[warm]) for i in range(3))
        print(
            f"the default sweep, {label} (median s): before its first run started {before:.2f} (start-up, composes, "
            f"plans), first run's start to last run's end {span:.2f}, after it {after:.2f} (summary, exit)"
        )
    if paired["warm"] > TARGET:
        print(f"FAIL: the sweep (warm) is {paired['warm']:.2f}x its floor (target <= {TARGET}x)")
        return 1
    print(f"ok: the sweep (warm) is {paired['warm']:.2f}x its floor (<= {TARGET}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
