"""What does the store cost a run? record_run / query latency, alone and under a sweep.

In a throwaway CRUCIBLE_HOME: times N record_run calls (a finished run with 7 steps) and
N queries from one process, then runs WRITERS processes of tests/store_writer.py (each N
runs: a "running" record, then the finished one) and reports their throughput. Exits
non-zero when the median record_run takes 0.25 s or more.

    .venv/bin/python bench/bench_store.py [N] [WRITERS]
"""
from __future__ import annotations

import os
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

LIMIT_S = 0.25


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def row(name: str, seconds: list[float]) -> tuple:
    ordered = sorted(seconds)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return name, len(ordered), statistics.median(ordered) * 1000, p95 * 1000


def sweep(n: int, writers: int) -> float:
    """Seconds for ``writers`` processes to record ``n`` runs each into one store."""
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, str(ROOT / "tests" / "store_writer.py"), str(w), str(n)],
                              stdout=subprocess.DEVNULL) for w in range(writers)]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a writer failed")
    return time.perf_counter() - started


def main(n: int = 30, writers: int = 4) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-store-") as home:
        os.environ["CRUCIBLE_HOME"] = home
        from store_writer import make_record

        from engine.store.duckdb import DuckDBStore

        store = DuckDBStore()
        store.ingest_pending()  # schema, once
        records = [make_record(9, i, "completed", os.getpid(), "bench", None) for i in range(n)]
        writes = [timed(lambda r=r: store.record_run(r)) for r in records]
        queries = [timed(lambda: store.query("SELECT agent, avg(reward) FROM runs GROUP BY agent")) for _ in range(n)]
        gets = [timed(lambda r=r: store.get_run(r.run_id)) for r in records]
        wall = sweep(n, writers)
    rows = [row("record_run (7 steps)", writes), row("query (group by)", queries), row("get_run", gets)]
    print(format_table(["operation", "n", "median ms", "p95 ms"], rows))
    print(f"sweep: {writers} processes x {n} runs in {wall:.1f} s = {writers * n / wall:.1f} runs/s")
    median = statistics.median(writes)
    print(f"{'ok' if median < LIMIT_S else 'TOO SLOW'}: median record_run {median * 1000:.1f} ms "
          f"(limit {LIMIT_S * 1000:.0f} ms)")
    return 0 if median < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3])))
