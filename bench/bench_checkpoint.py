"""What folding a sweep's writes into a real store costs: DuckDB's default string compression
against the store's (``SLOW_STRING_COMPRESSION`` left out, engine/store/lock.py).

On a copy of the store file at PATH (default: this machine's, ``$CRUCIBLE_HOME/store.duckdb``)
and its log, taken once, appends a copy of its latest 8 runs (new run ids; their stage timings
and steps too), as a sweep's ingest does, then times the CHECKPOINT that folds the log into the
file, and a read of one run by id after it. A fresh copy of that snapshot for every trial and
each mode, alternating; the live store is never opened. A checkpoint
rewrites the row group its appends went to, so its cost depends on the store's own contents:
synthetic records (bench_store.py's) do not show it as a user's store does.

    .venv/bin/python bench/bench_checkpoint.py [PATH] [--trials 5]

Exits non-zero when crucible's checkpoint is not cheaper than the default's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from engine.store.lock import SLOW_STRING_COMPRESSION  # noqa: E402
from engine.util import paths  # noqa: E402

CHILDREN = ("stage_timings", "steps", "subscores", "test_results")


def one_trial(source: Path, scratch: Path, disabled: str | None) -> tuple[float, float, float]:
    """(checkpoint CPU s, checkpoint wall s, a read by id's CPU s) on a fresh copy of ``source``."""
    copy = scratch / "copy.duckdb"
    shutil.copyfile(source, copy)
    con = duckdb.connect(":memory:")
    con.execute("SET checkpoint_on_detach = 'DISABLED'")
    con.execute("SET checkpoint_threshold = '1TB'")
    if disabled:
        con.execute(f"SET disabled_compression_methods = '{disabled}'")
    con.execute(f"ATTACH '{copy}' AS s")
    latest = [row[0] for row in con.execute("SELECT run_id FROM s.runs ORDER BY record_seq DESC LIMIT 8").fetchall()]
    for n, run_id in enumerate(latest):
        new_id = f"{run_id}-copy{n}"
        con.execute("INSERT INTO s.runs SELECT * REPLACE (? AS run_id) FROM s.runs WHERE run_id = ?", [new_id, run_id])
        for table in CHILDREN:
            con.execute(
                f"INSERT INTO s.{table} SELECT * REPLACE (? AS run_id) FROM s.{table} WHERE run_id = ?",
                [new_id, run_id],
            )
    cpu, wall = time.process_time(), time.perf_counter()
    con.execute("CHECKPOINT s")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    con.execute("DETACH s")
    con.execute(f"ATTACH '{copy}' AS s (READ_ONLY)")
    read = time.process_time()
    con.execute("SELECT * FROM s.runs WHERE run_id = ?", [latest[-1]]).fetchall()
    read = time.process_time() - read
    con.close()
    return cpu, wall, read


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", default=None, help="the store file (default: this machine's)")
    parser.add_argument("--trials", type=int, default=5)
    ns = parser.parse_args()
    source = Path(ns.path) if ns.path else paths.store_path()
    if not source.is_file():
        raise SystemExit(f"no store file at {source}")
    modes = {"DuckDB's default": None, f"crucible's (no {SLOW_STRING_COMPRESSION})": SLOW_STRING_COMPRESSION}
    results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in modes}
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as scratch:
        # The store as it is now, read once (its log too: the attach replays it, as the store's
        # own would); every trial starts from this snapshot, never from the live file.
        snapshot = Path(scratch) / "snapshot.duckdb"
        shutil.copyfile(source, snapshot)
        if (log := source.with_name(source.name + ".wal")).is_file():
            shutil.copyfile(log, snapshot.with_name(snapshot.name + ".wal"))
        with duckdb.connect(str(snapshot)) as con:
            con.execute("CHECKPOINT")  # the log folded in once, so no trial pays its replay
            runs = con.execute("SELECT count(*) FROM runs").fetchone()
        if not runs or runs[0] < 8:
            raise SystemExit(f"{source}: fewer than 8 runs to append copies of")
        for _ in range(ns.trials):
            for name, disabled in modes.items():
                results[name].append(one_trial(snapshot, Path(scratch), disabled))
    print(f"{source}: {runs[0]} runs, {os.path.getsize(source) / 1e6:.1f} MB; 8 runs appended; medians of {ns.trials}")
    print(f"{'string compression':36} {'checkpoint CPU ms':>18} {'wall ms':>8} {'read by id CPU ms':>18}")
    medians = {}
    for name, values in results.items():
        medians[name] = [statistics.median(v[k] for v in values) * 1000 for k in range(3)]
        print(f"{name:36} {medians[name][0]:18.1f} {medians[name][1]:8.1f} {medians[name][2]:18.2f}")
    default, ours = medians.values()
    if ours[0] >= default[0]:
        print("FAIL: the store's checkpoint is no cheaper than DuckDB's default")
        return 1
    print(f"ok: the checkpoint at {ours[0] / default[0]:.2f}x the default's CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
