"""Four sweep workers write into one store while it is queried; one is SIGKILLed mid-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.models import canonical_json, sha256_hex
from engine.store.duckdb import DuckDBStore
from engine.store.files import this_host

WRITER_SCRIPT = Path(__file__).resolve().parents[1] / "store_writer.py"


def _load_writer():
    # By path, so this works whether or not tests/ is a package.
    import importlib.util

    spec = importlib.util.spec_from_file_location("crucible_store_writer", WRITER_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_writer = _load_writer()
make_record, run_id, step_count = _writer.make_record, _writer.run_id, _writer.step_count

WRITERS = 4
RUNS_EACH = 50
KILLED = 0
KILL_AFTER = 20


def checksum(record) -> str:
    return sha256_hex(canonical_json(record.to_dict()))


def _read_ids(proc: subprocess.Popen, sink: list[str], kill_after: int | None) -> None:
    for line in proc.stdout:
        sink.append(line.strip())
        if len(sink) == kill_after:
            proc.send_signal(signal.SIGKILL)  # mid-way: its next run is in flight


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_parallel_writers_and_readers_lose_nothing_and_double_nothing(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("CRUCIBLE_HOME", str(home))
    env = {**os.environ, "CRUCIBLE_HOME": str(home)}
    procs, printed, readers = [], [], []
    err_files = [open(tmp_path / f"writer{w}.err", "w") for w in range(WRITERS)]  # noqa: SIM115 (the writers' stderr, closed below)
    for w in range(WRITERS):
        procs.append(
            subprocess.Popen(
                [sys.executable, str(WRITER_SCRIPT), str(w), str(RUNS_EACH)],
                stdout=subprocess.PIPE,
                stderr=err_files[w],
                text=True,
                env=env,
            )
        )
        printed.append([])
        kill_after = KILL_AFTER if w == KILLED else None
        readers.append(threading.Thread(target=_read_ids, args=(procs[w], printed[w], kill_after), daemon=True))
        readers[w].start()

    store = DuckDBStore()
    counts = []
    started = time.monotonic()
    while any(p.poll() is None for p in procs):
        # Every read must succeed while the writers hold the file in turns.
        (_, [(runs,)]) = store.query("SELECT count(*) FROM runs")
        time.sleep(0.02)
        counts.append(runs)
        assert time.monotonic() - started < 150, "writers did not finish"
    for r in readers:
        r.join(10)
    for f in err_files:
        f.close()

    assert procs[KILLED].returncode == -signal.SIGKILL
    assert KILL_AFTER <= len(printed[KILLED]) < RUNS_EACH
    for w in range(WRITERS):
        if w != KILLED:
            assert procs[w].returncode == 0, (tmp_path / f"writer{w}.err").read_text()[-2000:]
            assert len(printed[w]) == RUNS_EACH
    assert len(counts) >= 5 and counts == sorted(counts), "reader saw the run count go backwards"

    store.ingest_pending()  # what the killed writer spooled but did not commit
    orphaned = set(store.mark_orphaned_runs())

    _, [(rows, distinct)] = store.query("SELECT count(*), count(DISTINCT run_id) FROM runs")
    assert rows == distinct
    stored = store.get_runs([run_id(w, i) for w in range(WRITERS) for i in range(RUNS_EACH)])
    assert len(stored) == rows

    _, step_rows = store.query("SELECT run_id, count(*) FROM steps GROUP BY run_id")
    steps_by_run = dict(step_rows)
    for rid, record in stored.items():
        i = int(rid.split("run")[1])
        expected = step_count(i) if record.status == "completed" else 0
        assert steps_by_run.get(rid, 0) == expected, rid
        assert record.status != "running", f"{rid} left running after its owner was killed"

    host = this_host()
    runs_root = home.resolve() / "runs"
    must_have = set(printed[KILLED]) | {run_id(w, i) for w in range(WRITERS) if w != KILLED for i in range(RUNS_EACH)}
    assert len(must_have) >= 3 * RUNS_EACH + KILL_AFTER
    assert must_have <= set(stored), f"reported recorded but missing: {sorted(must_have - set(stored))[:5]}"
    for rid, record in stored.items():
        if record.status == "completed":  # every finished run, printed or not, is exactly what was written
            w, i = int(rid[1:].split("-")[0]), int(rid.split("run")[1])
            expected = make_record(w, i, "completed", procs[w].pid, host, str(runs_root / rid))
            assert checksum(record) == checksum(expected), _differences(record, expected)
        else:  # only the killed writer's in-flight run can have been orphaned
            assert rid in orphaned and rid not in must_have
            assert record.owner_pid == procs[KILLED].pid and record.status == "error"
    assert store.mark_orphaned_runs() == []


def _differences(got, want) -> str:
    g, w = got.to_dict(), want.to_dict()
    return f"{got.run_id}: " + ", ".join(f"{k}: {g[k]!r} != {w[k]!r}" for k in w if g[k] != w[k])
