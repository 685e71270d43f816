"""Terminal records in the store (engine/store/terminals.py): end events reconciled by tmux
session or run metadata when the owner strings differ (never by the owner), an end that matches
nothing set aside, a terminal left running by an ended run marked stale, retention, and the
policy's variables checked in one line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.models import RunRecord, TerminalRecord
from engine.store.duckdb import DuckDBStore
from engine.store.terminals import TerminalLog, TerminalPolicy

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path, monkeypatch) -> DuckDBStore:
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    return DuckDBStore(tmp_path / "store.duckdb").validate()


def started(terminal_id: str, run_id: str, owner: str, server: str, session: str = "crucible") -> TerminalRecord:
    return TerminalRecord(
        terminal_id=terminal_id,
        run_id=run_id,
        owner=owner,
        tmux_server=server,
        tmux_session=session,
        state="running",
        started_at=datetime.now(UTC).isoformat(),
    )


def run_record(run_id: str, status: str) -> RunRecord:
    now = datetime.now(UTC).isoformat()
    return RunRecord(
        run_id=run_id,
        spec_hash="h",
        spec={},
        status=status,
        task_id="t",
        agent="claude_code",
        model=None,
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained=None,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=now,
        ended_at=None if status == "running" else now,
    )


def states(store: DuckDBStore) -> dict[str, str]:
    return {t.terminal_id: t.state for t in store.terminals(include_closed=True)}


def test_an_end_whose_owner_differs_closes_the_terminal_by_its_tmux_session_and_no_other(store):
    log = TerminalLog(store, "run-1", TerminalPolicy(retention=60))

    async def events():
        await log.start(started("t-a", "run-1", "workflow-step:42", "crucible-a"))
        await log.start(started("t-b", "run-1", "workflow-step:43", "crucible-b"))
        # The end names neither the terminal nor the owner the start used: only its tmux identity.
        await log.end(
            "",
            state="closing",
            reason="done",
            owner="42",
            tmux_server="crucible-a",
            tmux_session="crucible",
            final_text="● Done.",
        )

    asyncio.run(events())
    assert states(store) == {"t-a": "closing", "t-b": "running"}
    [final] = store.terminal_snapshots("t-a", final_only=True)
    assert final.text == "● Done." and store.terminal_snapshots("t-b") == []


def test_an_end_with_only_run_metadata_closes_the_runs_one_open_terminal(store):
    log = TerminalLog(store, "run-2", TerminalPolicy(retention=60))

    async def events():
        await log.start(started("t-c", "run-2", "background:7", "crucible-c"))
        await log.end("", state="failed", reason="canceled", owner="7")

    asyncio.run(events())
    assert states(store) == {"t-c": "failed"}
    assert store.terminals("run-2")[0].end_reason == "canceled"


def test_an_end_that_matches_no_terminal_is_set_aside_with_the_reason(store):
    log = TerminalLog(store, "run-3", TerminalPolicy())
    asyncio.run(log.end("", state="closing", reason="done", owner="x", tmux_server="nowhere", tmux_session="s"))

    assert states(store) == {}
    rejected = store.spool / "rejected"
    reasons = [p.read_text() for p in rejected.glob("*.reason.txt")]
    assert len(reasons) == 1 and "terminal end event matches no terminal" in reasons[0]
    assert [p for p in store.spool.glob("*.json")] == []  # nothing blocks the spool


def test_a_terminal_left_running_by_an_ended_run_is_stale_and_an_end_after_that_still_counts(store):
    log = TerminalLog(store, "run-4", TerminalPolicy(retention=60))
    store.record_run(run_record("run-4", "running"))
    asyncio.run(log.start(started("t-d", "run-4", "agent:claude_code", "crucible-d")))
    assert store.housekeep_terminals() == ([], [])  # its run still runs

    store.record_run(run_record("run-4", "error"))  # e.g. its owner was kill -9'd
    assert store.housekeep_terminals() == (["t-d"], [])
    [stale] = store.terminals("run-4")
    assert stale.state == "stale" and stale.closes_at and stale.end_reason == "its run ended without ending it"

    asyncio.run(log.end("t-d", state="closing", reason="done"))  # the real end, late: it wins
    assert states(store) == {"t-d": "closing"}


def test_a_later_start_or_a_repeated_end_does_not_move_an_ended_terminal_back(store):
    log = TerminalLog(store, "run-5", TerminalPolicy(retention=60))
    record = started("t-e", "run-5", "agent", "crucible-e")

    async def events():
        await log.start(record)
        await log.end("t-e", state="failed", reason="crashed")
        await log.start(record)
        await log.end("t-e", state="closing", reason="done")

    asyncio.run(events())
    assert states(store) == {"t-e": "failed"}


def test_a_bad_retention_variable_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_TERMINAL_RETENTION", "a day")
    with pytest.raises(ConfigError, match=r"^\$CRUCIBLE_TERMINAL_RETENTION='a day': must be a number 0 or more$"):
        TerminalPolicy.from_env()


def test_an_unknown_terminal_to_dismiss_is_one_line(store, tmp_path):
    env = {
        **os.environ,
        "CRUCIBLE_HOME": str(tmp_path / "home"),
        "CRUCIBLE_STORE": str(store.path),
        "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "terminals", "dismiss", "nope"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0 and proc.stderr == "crucible terminals: no terminal 'nope' in the store\n"


@pytest.mark.slow
@pytest.mark.docker
def test_gc_closes_terminals_past_their_retention_and_a_dry_run_only_counts_them(
    store, monkeypatch, capsys, docker_client
):
    from engine.cli import main as cli

    monkeypatch.setenv("CRUCIBLE_STORE", str(store.path))
    log = TerminalLog(store, "run-6", TerminalPolicy(retention=0))
    keep = TerminalLog(store, "run-6", TerminalPolicy(retention=3600))

    async def events():
        await log.start(started("t-old", "run-6", "agent", "crucible-old"))
        await log.snapshot("t-old", "● working")
        await log.end("t-old", state="closing", reason="done", final_text="● Done.")
        await keep.start(started("t-new", "run-6", "agent", "crucible-new"))
        await keep.end("t-new", state="failed", reason="crashed")

    asyncio.run(events())
    match = "--match=nothing-crucible-made-*"  # no image of anyone's is looked at
    assert cli.main(["gc", "--dry-run", match]) == 0
    assert "would close 1 terminal(s) past their retention window" in capsys.readouterr().out.splitlines()
    assert states(store) == {"t-old": "closing", "t-new": "failed"}

    assert cli.main(["gc", match]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "terminals: 0 marked stale (their run ended without ending them), 1 closed past their retention "
        "window (periodic snapshots removed, final snapshots kept)"
    )
    assert states(store) == {"t-old": "completed", "t-new": "failed"}
    assert [s.text for s in store.terminal_snapshots("t-old")] == ["● Done."]
    assert [t.terminal_id for t in store.terminals()] == ["t-new"]
