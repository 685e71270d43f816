"""Housekeeping reads what is due in one store turn (``DuckDBStore.housekeeping_due``) and writes
only then: a run is due exactly when ``mark_orphaned_runs`` would take it (running on this host,
its owner dead), and a terminal left running by an ended run is still marked stale."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from engine.models import RunRecord, TerminalRecord
from engine.run.session import housekeeping
from engine.store.duckdb import DuckDBStore
from engine.store.files import this_host
from engine.store.terminals import TerminalLog, TerminalPolicy


@pytest.fixture
def store(tmp_path, monkeypatch) -> DuckDBStore:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    return DuckDBStore(tmp_path / "store.duckdb").validate()


def running(run_id: str, pid: int) -> RunRecord:
    now = datetime.now(UTC).isoformat()
    return RunRecord(
        run_id=run_id,
        spec_hash="h",
        spec={},
        status="running",
        task_id="t",
        agent="noop",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained=None,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=now,
        owner_pid=pid,
        owner_host=this_host(),
    )


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_owners_run_is_not_due_and_a_dead_owners_is(store):
    store.record_run(running("live", pid=os.getpid()))
    assert store.housekeeping_due() == (False, False)
    store.record_run(running("dead", pid=dead_pid()))
    assert store.housekeeping_due() == (True, False)
    assert store.mark_orphaned_runs() == ["dead"]
    assert store.housekeeping_due() == (False, False)


def test_housekeeping_ends_a_dead_owners_run_and_stales_its_terminal(store):
    store.record_run(running("r", pid=dead_pid()))
    log = TerminalLog(store, "r", TerminalPolicy(retention=60))
    asyncio.run(
        log.start(
            TerminalRecord(
                terminal_id="t-r",
                run_id="r",
                owner="agent:x",
                tmux_server="s",
                tmux_session="crucible",
                state="running",
                started_at=datetime.now(UTC).isoformat(),
            )
        )
    )
    housekeeping(store)
    record = store.get_run("r")
    assert record is not None and record.status == "error" and "owner process died" in (record.error or "")
    assert [t.state for t in store.terminals("r")] == ["stale"]
    assert store.housekeeping_due() == (False, False)


def test_a_terminal_of_a_run_that_ended_is_due_and_housekeeping_stales_it(store):
    store.record_run(replace(running("e", pid=os.getpid()), status="completed", ended_at=datetime.now(UTC).isoformat()))
    log = TerminalLog(store, "e", TerminalPolicy(retention=60))
    asyncio.run(
        log.start(
            TerminalRecord(
                terminal_id="t-e",
                run_id="e",
                owner="agent:x",
                tmux_server="s",
                tmux_session="crucible",
                state="running",
                started_at=datetime.now(UTC).isoformat(),
            )
        )
    )
    assert store.housekeeping_due() == (False, True)
    housekeeping(store)
    assert [t.state for t in store.terminals("e", include_closed=True)] == ["stale"]
