"""What does starting a read-only command cost? `query`, `show`, `report` vs `python3 -c pass`.

Both ways a user runs them: **cold**, the command in its own process (``CRUCIBLE_WARM=off``), and
**warm**, answered by a warm server's reader (``crucible warm start``; engine/cli/warm_reader.py),
where the CPU counted is the client's and, from /proc, what the server and its reader spent
meanwhile. The gate is the warm figure, as bench_golden.py's is; the cold one is printed beside.

In a throwaway CRUCIBLE_HOME holding 20 finished runs (tests/store_writer.py's records),
times N runs of each command as a whole process (interpreter start, imports, housekeeping,
the store, the answer, exit), alternating, and prints medians and the overhead over a bare
interpreter measured in the same run, in wall seconds and in CPU seconds (user + system; on
a shared machine the wall clock also counts other processes' load). Exits non-zero when a
command's median CPU overhead (warm) is over LIMIT_S (issue 38's target). ``show`` is timed twice: of a
run whose spec names no flavor, and of a coding run, whose flavor ``show`` loads to explain its
grade. Then each command runs in-process under ``bench/stages.py``: where its time goes.

    .venv/bin/python bench/bench_cli_startup.py [N]

Each command runs once first with bytecode writing allowed, so that a checkout whose
``.pyc`` files are stale (or a PYTHONDONTWRITEBYTECODE environment) does not time the
compiler.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from engine.util.tables import format_table  # noqa: E402

LIMIT_S = 0.1
RUNS = 20


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu(pid: int | None) -> float:
    """CPU seconds of ``pid`` (a warm server), its live descendants and the children it reaped."""
    if pid is None:
        return 0.0
    total, pending = 0.0, [pid]
    while pending:
        each = pending.pop()
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
            for task in Path(f"/proc/{each}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue  # it ended meanwhile: its parent's reaped share counts it
    return total


def _reader_idle() -> None:
    """Until the warm server's reader is idle: what it does for a command after answering it (a
    query's DuckDB instance made afresh) is that command's cost."""
    from engine.cli.warm_commands import _ask

    while (answer := _ask("ping")) is not None and answer.get("reading"):
        time.sleep(0.005)


def timed(argv: list[str], env: dict, server: int | None = None) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one whole process, with what ``server``
    (a warm server's pid) spent meanwhile and until its reader was idle again."""
    cpu, served, started = _children_cpu(), _tree_cpu(server), time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
    if server is not None:
        _reader_idle()
    return seconds, _children_cpu() - cpu + _tree_cpu(server) - served


def _stages(argv: list[str], env: dict) -> dict:
    """One in-process run of a crucible command under bench/stages.py: seconds per stage."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "stages.py"), *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"stages of {argv} failed: {proc.stderr[-800:]}")
    return json.loads(proc.stderr.strip().splitlines()[-1])


def main(n: int = 10) -> int:
    # Bytecode as scripts/setup.sh leaves it (an installed crucible has it too), whatever
    # PYTHONDONTWRITEBYTECODE says: the timings are of crucible, not of compiling it.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "engine", "envs", "swe_tasks"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as home:
        env = {k: v for k, v in os.environ.items() if k not in ("CRUCIBLE_STORE", "PYTHONDONTWRITEBYTECODE")}
        env["CRUCIBLE_WARM"] = "off"
        env["CRUCIBLE_HOME"] = os.environ["CRUCIBLE_HOME"] = home
        from store_writer import make_record

        from engine.store.duckdb import DuckDBStore

        store = DuckDBStore()
        for i in range(RUNS):
            store.write_run_record(make_record(0, i, "completed", os.getpid(), "bench", None), None)
        last = make_record(0, RUNS - 1, "completed", 0, "bench", None)
        coding = dataclasses.replace(
            last,
            run_id="coding-run",
            spec={**last.spec, "flavor": {"_target_": "envs.coding.flavor.CodingFlavor", "name": "coding"}},
            raw_grade={"reason": "tests failed", "test": {"exit_code": 1}, "apply": {"ok": True}},
        )
        store.write_run_record(coding, None)
        store.ingest_pending()
        run_id = last.run_id

        crucible = [sys.executable, "-m", "engine.cli"]
        commands = {
            "python3 -c pass": [sys.executable, "-c", "pass"],
            'query "select count(*) from runs"': [*crucible, "query", "select count(*) from runs"],
            f"show {run_id}": [*crucible, "show", run_id],
            "show coding-run (loads its flavor)": [*crucible, "show", "coding-run"],
            "report": [*crucible, "report"],
        }
        for argv in commands.values():  # warm-up: page cache, and .pyc files written
            timed(argv, env)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # as the test environment runs; every .pyc is fresh now
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(n):  # alternating, so drift in the machine's load hits every command alike
            for name, argv in commands.items():
                seconds, cpu = timed(argv, env)
                times[name].append(seconds)
                cpus[name].append(cpu)
        breakdown = {
            name: [_stages(argv[3:], env) for _ in range(3)]
            for name, argv in commands.items()
            if name != "python3 -c pass"
        }
        warm_env = {**env, "CRUCIBLE_WARM": "on"}
        started = subprocess.run([*crucible, "warm", "start"], cwd=ROOT, env=warm_env, capture_output=True, text=True)
        if started.returncode != 0:
            raise SystemExit(f"crucible warm start failed: {started.stdout} {started.stderr}")
        server = int(started.stdout.split("pid ", 1)[1].split(":", 1)[0])
        try:
            warm_cpus: dict[str, list[float]] = {name: [] for name in commands}
            for argv in commands.values():  # the reader started, its first turn at the store taken
                timed(argv, warm_env, server)
            for _ in range(n):
                for name, argv in commands.items():
                    warm_cpus[name].append(timed(argv, warm_env, server)[1])
        finally:
            subprocess.run([*crucible, "warm", "stop"], cwd=ROOT, env=warm_env, capture_output=True)

    floor = statistics.median(times["python3 -c pass"])
    cpu_floor = statistics.median(cpus["python3 -c pass"])
    warm_floor = statistics.median(warm_cpus["python3 -c pass"])
    rows, failed = [], []
    for name, seconds in times.items():
        median, cpu, warm = (
            statistics.median(seconds),
            statistics.median(cpus[name]),
            statistics.median(warm_cpus[name]),
        )
        rows.append(
            (
                name,
                n,
                round(median, 3),
                round(median - floor, 3),
                round(median / floor, 2),
                f"{min(seconds):.3f}..{max(seconds):.3f}",
                round(cpu, 3),
                round(cpu - cpu_floor, 3),
                round(warm - warm_floor, 3),
            )
        )
        if name != "python3 -c pass" and warm - warm_floor > LIMIT_S:
            failed.append(name)
    print(
        f"{n} runs each, alternating; a store of {RUNS} runs; medians (wall, cpu: cold, in the command's own process; "
        "warm: the client's cpu and the warm server's and its reader's meanwhile; cpu: user + system); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        format_table(
            [
                "command",
                "n",
                "median s",
                "over pass s",
                "x pass",
                "min..max s",
                "cpu s",
                "cpu over pass s",
                "warm: cpu over pass s",
            ],
            rows,
        )
    )
    stage_names = list(dict.fromkeys(k for runs in breakdown.values() for b in runs for k in b["seconds"]))
    print("\nin-process stages (bench/stages.py, median s of 3; interpreter start and exit are `python3 -c pass`)")
    print(
        format_table(
            ["command", *stage_names, "peak RSS MB"],
            [
                (
                    name,
                    *(round(statistics.median(b["seconds"].get(k, 0.0) for b in runs), 3) for k in stage_names),
                    round(statistics.median(b["peak_rss_mb"] for b in runs), 1),
                )
                for name, runs in breakdown.items()
            ],
        )
    )
    if failed:
        print(f"FAIL: over {LIMIT_S} s of CPU beyond `python3 -c pass`, warm: {', '.join(failed)}")
        return 1
    print(f"ok: every command within {LIMIT_S} s of CPU of `python3 -c pass`, warm (the cold column beside it)")
    return 0


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:2])))
