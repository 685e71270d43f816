"""``crucible check`` answered entirely from the store, as whole processes, against a bare
interpreter: with the evaluation cache (composed and typed configs, keyed by everything they
are a function of) warm, and with it emptied before each run.

    .venv/bin/python bench/bench_cached_check.py [--task 'glob(sample/*)'] [--trials 7]

The verdicts are made once first (in a throwaway CRUCIBLE_HOME; the images are the shared
ones), so every timed check runs nothing. Trials alternate between the three.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")


def timed(argv: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stdout[-600:]} {proc.stderr[-600:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="glob(sample/*)")
    parser.add_argument("--trials", type=int, default=7)
    ns = parser.parse_args()
    # Bytecode as scripts/setup.sh leaves it (an installed crucible has it too), whatever
    # PYTHONDONTWRITEBYTECODE says: the timings are of crucible, not of compiling it.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "engine", "envs", "swe_tasks"], cwd=ROOT,
                   check=True, capture_output=True)
    home = tempfile.mkdtemp(prefix="crucible-cached-check-")
    env = {**os.environ, "CRUCIBLE_HOME": home}
    check = [PYTHON, "-m", "engine.cli.main", "check", f"task={ns.task}"]
    try:
        timed(check, env)  # the verdicts, and a warm evaluation cache
        out = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True).stdout
        if " run " in out or "store" not in out:
            raise SystemExit(f"the second check ran something: {out}")
        results: dict[str, list[float]] = {"python3 -c pass": [], "check, eval cache warm": [],
                                           "check, eval cache empty": []}
        for _ in range(ns.trials):
            results["python3 -c pass"].append(timed([PYTHON, "-c", "pass"], env))
            results["check, eval cache warm"].append(timed(check, env))
            shutil.rmtree(Path(home) / "cache" / "eval", ignore_errors=True)
            results["check, eval cache empty"].append(timed(check, env))
            timed(check, env)  # warm it again for the next trial's warm run
    finally:
        shutil.rmtree(home, ignore_errors=True)
    floor = statistics.median(results["python3 -c pass"])
    print(f"crucible check task={ns.task}, every verdict from the store, {ns.trials} trials each, "
          "whole processes, medians (perf_counter)")
    print(f"{'what':<28}{'median s':>10}{'- python s':>12}   min..max s")
    for name, values in results.items():
        median = statistics.median(values)
        print(f"{name:<28}{median:>10.3f}{median - floor:>12.3f}   {min(values):.3f}..{max(values):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
