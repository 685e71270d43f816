"""A run that comes back from a Ray worker as data (engine/run/ray_job.py JobResult) lands in
the launcher's store once: its files under the job's directory, its records pointing there,
and ingesting the same result again changes nothing. No cluster needed: the data is the
interface. And ``hydra/launcher=ray`` naming a cluster that is not there is one line, at once
(Ray itself would retry for minutes)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from store_records import count, make_run

from engine.cli.ray_sweep import ingest
from engine.run.ray_job import JobResult
from engine.store.duckdb import DuckDBStore


def _result(worker_dir: str) -> JobResult:
    first = make_run("r-1", status="error", infrastructure=True, run_dir=worker_dir)
    retry = make_run("r-2", run_dir=f"{worker_dir}/retry-1", retry_of="r-1")
    running = make_run("r-3", status="running", run_dir=worker_dir)  # never a final word
    return JobResult(
        worker="ray node 10.0.0.7/abcd1234 (w7)",
        run_id="r-2",
        files={
            "record.json": json.dumps(first.to_dict()).encode(),
            "retry-1/record.json": json.dumps(retry.to_dict()).encode(),
            "retry-1/agent.log": b"the agent's log\n",
            "stale/record.json": json.dumps(running.to_dict()).encode(),
            "../outside.txt": b"never written",
        },
    )


def test_a_returned_run_is_stored_once_under_the_launchers_job_dir_however_often_it_is_ingested(tmp_path):
    store = DuckDBStore(tmp_path / "store.duckdb").validate()
    job_dir = tmp_path / "sweeps" / "s1" / "0"
    result = _result("/home/worker/.crucible/ray-jobs/s1/0-r-1")
    for _ in range(2):
        final = ingest(result, job_dir, store)
    assert final.run_id == "r-2" and final.run_dir == str(job_dir / "retry-1")
    assert count(store, "SELECT count(*) FROM runs") == 2
    assert count(store, "SELECT count(*) FROM runs WHERE run_id = 'r-3'") == 0
    rows = dict(store.query("SELECT run_id, run_dir FROM runs")[1])
    assert rows == {"r-1": str(job_dir), "r-2": str(job_dir / "retry-1")}
    assert count(store, "SELECT count(*) FROM runs WHERE host = 'ray node 10.0.0.7/abcd1234 (w7)'") == 2
    assert (job_dir / "retry-1" / "agent.log").read_text() == "the agent's log\n"
    assert json.loads((job_dir / "record.json").read_text())["run_dir"] == str(job_dir)
    assert not (tmp_path / "sweeps" / "s1" / "outside.txt").exists()


def test_a_ray_address_where_no_cluster_answers_is_one_line_before_anything_runs(tmp_path):
    try:
        import hydra_plugins.hydra_ray_launcher  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but the ray extra (hydra-ray-launcher, ray) is not installed")
        pytest.skip("the ray extra is not installed")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"  # bound, never listening: refused
        args = ["run", "-m", "task=sample/last_page", "agent=noop", "hydra/launcher=ray"]
        proc = subprocess.run(
            [sys.executable, "-m", "engine.cli.main", *args, f"hydra.launcher.ray.init.address={closed}"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home")},
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"crucible run: hydra.launcher.ray.init.address={closed}: no Ray cluster answers there (Connection refused); "
        "start one with `ray start --head`, or leave the address out for a local cluster"
    ]
