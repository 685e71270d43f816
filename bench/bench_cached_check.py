"""``crucible check`` answered entirely from the store, as whole processes, against a bare
interpreter: answered as before (engine/cli/answers.py: nothing the kept answer was computed
from has changed), computed with the evaluation cache (composed and typed configs, keyed by
everything they are a function of) warm, and computed with it emptied too.

    .venv/bin/python bench/bench_cached_check.py [--task 'glob(sample/*)'] [--trials 7]

The verdicts are made once first (in a throwaway CRUCIBLE_HOME; the images are the shared
ones), so every timed check runs nothing. Trials alternate between the four. Peak RSS is
each process's own (``wait4``). Then one more computed check (eval cache warm, no kept answer)
runs in-process under ``bench/stages.py`` for the breakdown (compose, session, plan, ...).

Exits non-zero when the answered check's median over ``python3 -c pass`` is past TARGET_S or
its median peak RSS past TARGET_RSS_MB (issue 38's targets: a cached check).
"""

from __future__ import annotations

import argparse
import json
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
TARGET_S = 0.3
"""The warm check's median over a bare interpreter, at most."""
TARGET_RSS_MB = 80.0
"""The warm check's median peak RSS, at most."""
RSS: dict[str, list[float]] = {}
ANSWERED_ROW = "answered as before"
COMPUTED_ROW = "computed, eval cache warm"


ANSWERED = "check: answered as before"


def timed(argv: list[str], env: dict[str, str], name: str = "", *, answered: bool | None = None) -> float:
    """Wall seconds of one whole process; its own peak RSS (MB, from ``wait4``) kept under ``name``.
    ``answered``: whether the check must have been answered as before (None: either)."""
    with tempfile.TemporaryFile() as out:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        said = out.read().decode(errors="replace")
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {said[-1200:]}")
    if answered is not None and (ANSWERED in said) != answered:
        raise SystemExit(f"{name}: expected {'an answered' if answered else 'a computed'} check: {said[-1200:]}")
    if name:
        RSS.setdefault(name, []).append(usage.ru_maxrss / 1024)
    return seconds


def settle(check: list[str], env: dict[str, str]) -> None:
    """Checks until one is answered as before: a check keeps its answer only if nothing it read
    changed while it ran or in the 2 s before (engine/util/inputs.py: racy), so the ones right
    after a computed check (which wrote its evaluation cache) may not."""
    for _ in range(20):
        with tempfile.TemporaryFile() as out:
            subprocess.run(check, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
            out.seek(0)
            if ANSWERED in out.read().decode(errors="replace"):
                return
    raise SystemExit("no check was answered as before after 20 tries")


def stages(argv: list[str], env: dict[str, str]) -> dict:
    """One warm check in-process under bench/stages.py: seconds and peak RSS per stage."""
    proc = subprocess.run(
        [PYTHON, str(ROOT / "bench" / "stages.py"), *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"stages of {argv} failed: {proc.stderr[-800:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="glob(sample/*)")
    parser.add_argument("--trials", type=int, default=7)
    ns = parser.parse_args()
    # Bytecode as scripts/setup.sh leaves it (an installed crucible has it too), whatever
    # PYTHONDONTWRITEBYTECODE says: the timings are of crucible, not of compiling it.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "engine", "envs", "swe_tasks"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    home = tempfile.mkdtemp(prefix="crucible-cached-check-")
    env = {**os.environ, "CRUCIBLE_HOME": home}
    check = [PYTHON, "-m", "engine.cli.main", "check", f"task={ns.task}"]
    try:
        timed(check, env)  # the verdicts, and a warm evaluation cache
        out = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True).stdout
        if " run " in out or "store" not in out:
            raise SystemExit(f"the second check ran something: {out}")
        settle(check, env)
        results: dict[str, list[float]] = {
            "python3 -c pass": [],
            ANSWERED_ROW: [],
            COMPUTED_ROW: [],
            "computed, eval cache empty": [],
        }
        answers, evaluations = Path(home) / "cache" / "answers", Path(home) / "cache" / "eval"
        for _ in range(ns.trials):
            for name in results:
                if name.startswith("computed"):
                    shutil.rmtree(answers, ignore_errors=True)
                if name == "computed, eval cache empty":
                    shutil.rmtree(evaluations, ignore_errors=True)
                argv = [PYTHON, "-c", "pass"] if name == "python3 -c pass" else check
                results[name].append(timed(argv, env, name, answered=None if argv != check else name == ANSWERED_ROW))
            settle(check, env)  # both caches warm again for the next trial
        shutil.rmtree(answers, ignore_errors=True)
        breakdown = []
        for _ in range(3):
            breakdown.append(stages(check[3:], env))
            shutil.rmtree(answers, ignore_errors=True)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    med = statistics.median
    floor = med(results["python3 -c pass"])
    print(
        f"crucible check task={ns.task}, every verdict from the store, {ns.trials} trials each, "
        f"whole processes, medians (perf_counter; peak RSS from wait4); load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'what':<28}{'median s':>10}{'- python s':>12}   {'min..max s':<14}{'peak RSS MB':>12}")
    for name, values in results.items():
        median = med(values)
        print(
            f"{name:<28}{median:>10.3f}{median - floor:>12.3f}   {min(values):.3f}..{max(values):.3f}  "
            f"{med(RSS[name]):>10.1f}"
        )
    print(
        "\nwhere a computed check's time goes (eval cache warm, no kept answer), in-process "
        "(bench/stages.py, median of 3; RSS: peak when the stage first ended)"
    )
    names = list(dict.fromkeys(k for b in breakdown for k in b["seconds"]))
    for name in names:
        rss_at = [b["rss_mb"][name] for b in breakdown if name in b["rss_mb"]]
        print(
            f"  {name:<36}{med(b['seconds'].get(name, 0.0) for b in breakdown):>8.3f} s"
            + (f"{med(rss_at):>9.1f} MB" if rss_at else "")
        )
    print(f"  {'interpreter start and exit (python3 -c pass)':<36}{floor:>8.3f} s")
    warm, rss = med(results[ANSWERED_ROW]) - floor, med(RSS[ANSWERED_ROW])
    failed = [f"cached check {warm:.3f} s over python (target <= {TARGET_S} s)"] * (warm > TARGET_S) + [
        f"cached check peak RSS {rss:.1f} MB (target <= {TARGET_RSS_MB:.0f} MB)"
    ] * (rss > TARGET_RSS_MB)
    for line in failed:
        print(f"FAIL: {line}")
    if not failed:
        print(
            f"ok: cached check {warm:.3f} s over python (<= {TARGET_S}), peak RSS {rss:.1f} MB (<= {TARGET_RSS_MB:.0f})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
