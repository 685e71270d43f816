"""What does the store cost a run? record_run / query latency, alone and under a sweep.

In a throwaway CRUCIBLE_HOME: times N record_run calls (a finished run with 7 steps) and
N queries from one process, then runs WRITERS processes of tests/store_writer.py (each N
runs: a "running" record, then the finished one) and reports their throughput. Exits
non-zero when the median record_run takes 0.25 s or more.

Then, as the store grows (SIZES runs already in it): record_run and get_run with DuckDB's
log folded into the file at every write turn (``WAL_CHECKPOINT_BYTES = 0``: as every
detach did before) against the log kept until it outgrows ``WAL_CHECKPOINT_BYTES``; wall
and this process's CPU, means of N (a checkpoint every few writes is part of each write's
cost), every mode on a copy of one filled file; records of a real run's size (~16 KB).

    .venv/bin/python bench/bench_store.py [N] [WRITERS] [SIZES, e.g. 0,500,2000]

BENCH_WAL_KB=32,64 adds rows for other log sizes, to compare with WAL_CHECKPOINT_BYTES.
"""

from __future__ import annotations

import os
import random
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
WORDS = [
    "the",
    "test",
    "run",
    "failed",
    "passed",
    "assert",
    "expected",
    "got",
    "parse",
    "duration",
    "value",
    "error",
    "in",
    "line",
    "file",
    "module",
    "function",
    "return",
    "none",
    "true",
    "false",
    "self",
    "data",
    "page",
    "query",
    "alias",
    "snapshot",
    "money",
    "negative",
]


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
    procs = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "store_writer.py"), str(w), str(n)], stdout=subprocess.DEVNULL
        )
        for w in range(writers)
    ]
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a writer failed")
    return time.perf_counter() - started


def cpu_timed(call) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def sized(writer: int, i: int):
    """A record of a real run's size (~16 KB: its spec ~7 KB, its raw grade ~10 KB)."""
    from store_writer import make_record

    record = make_record(writer, i, "completed", os.getpid(), "bench", None)
    words = random.Random(writer * 100_000 + i).choices(WORDS, k=1500)
    record.raw_grade = {
        "test": {"exit_code": 1, "output_tail": " ".join(words[:1100])},
        "reason": "tests failed",
        "scan": {"findings": []},
    }
    record.spec = {**record.spec, "task": {"notes": " ".join(words[1100:])}}
    return record


def fill_store(path: Path, size: int) -> None:
    """The store file at ``path`` with ``size`` runs of a real run's size in it, folded into
    the file: as a store a user has run ``size`` runs into would be."""
    import engine.store.lock as lock
    from engine.store.duckdb import DuckDBStore

    store = DuckDBStore(str(path))
    for i in range(size):
        store.write_run_record(sized(20, i), None)
    store.ingest_pending()
    with lock.open_store(path, read_only=False, timeout=60) as con:
        con.execute("CHECKPOINT")


def by_store_size(n: int, sizes: list[int]) -> list[tuple]:
    """record_run and get_run at each store size, checkpointing at every write or not."""
    import shutil

    import engine.store.lock as lock
    from engine.store.duckdb import DuckDBStore

    kept = lock.WAL_CHECKPOINT_BYTES
    tried = {int(kb) * 1024 for kb in os.environ.get("BENCH_WAL_KB", "").split(",") if kb}  # sizes to compare
    thresholds = [("checkpoint every write", 0)] + [(f"log kept to {t // 1024} KB", t) for t in sorted(tried | {kept})]
    rows = []
    for size in sizes:
        filled = Path(os.environ["CRUCIBLE_HOME"]) / f"filled-{size}.duckdb"
        fill_store(filled, size)
        for label, threshold in thresholds:
            copy = filled.with_name(f"{filled.stem}-{threshold}.duckdb")
            shutil.copyfile(filled, copy)
            lock.WAL_CHECKPOINT_BYTES = threshold
            try:
                store = DuckDBStore(str(copy))
                records = [sized(21, i) for i in range(n)]
                writes = [cpu_timed(lambda r=r, s=store: s.record_run(r)) for r in records]
                reads = [cpu_timed(lambda r=r, s=store: s.get_run(r.run_id)) for r in records]
            finally:
                lock.WAL_CHECKPOINT_BYTES = kept
            # Means, not medians: a checkpoint every few writes is part of what each write costs.
            rows.append(
                (
                    size,
                    label,
                    *(statistics.mean(x[k] for x in writes) * 1000 for k in (0, 1)),
                    *(statistics.mean(x[k] for x in reads) * 1000 for k in (0, 1)),
                )
            )
    return rows


def main(n: int = 30, writers: int = 4, sizes: str = "0,500,2000") -> int:
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
        grown = by_store_size(n, [int(x) for x in sizes.split(",") if x])
    rows = [row("record_run (7 steps)", writes), row("query (group by)", queries), row("get_run", gets)]
    print(format_table(["operation", "n", "median ms", "p95 ms"], rows))
    print(f"sweep: {writers} processes x {n} runs in {wall:.1f} s = {writers * n / wall:.1f} runs/s")
    print(format_table(["runs stored", "mode", "record_run mean ms", "cpu ms", "get_run mean ms", "cpu ms"], grown))
    median = statistics.median(writes)
    print(
        f"{'ok' if median < LIMIT_S else 'TOO SLOW'}: median record_run {median * 1000:.1f} ms "
        f"(limit {LIMIT_S * 1000:.0f} ms)"
    )
    return 0 if median < LIMIT_S else 1


if __name__ == "__main__":
    sys.exit(main(*(int(a) for a in sys.argv[1:3]), *sys.argv[3:4]))
