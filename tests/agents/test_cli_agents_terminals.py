"""Terminal lifecycle and retention (seed 001), against the fake TUI (tests/fake_tui/fake_cli.py)
over real tmux and a real DuckDB store: a terminal is ``running`` with periodic snapshots (a
bounded number) while the CLI works, ``closing`` with ``closes_at`` and a final snapshot once its
run ends it, ``completed`` and unlisted after its retention (the final snapshot kept, printed by
``crucible show``), ``stale`` when its tmux server dies under it, ``failed`` when the end comes
after; parallel terminals stay apart; a dismissed terminal leaves the listing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.agents.cli.terminal import TerminalRecorder, new_terminal_id, server_name
from engine.agents.cli.tmux import TmuxPane
from engine.models import RunRecord
from engine.store.duckdb import DuckDBStore
from engine.store.terminals import TerminalLog, TerminalPolicy

FAKE = Path(__file__).resolve().parents[1] / "fake_tui" / "fake_cli.py"
ROOT = Path(__file__).resolve().parents[2]
RETENTION = 5.0
"""Seconds an ended terminal is kept: the checks made within it (a store read or two) have that
long, on a loaded machine too, before its clean-up is due."""

pytestmark = pytest.mark.slow  # real tmux, turns wait for a stable screen


async def host_run(argv) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode("utf-8", "replace")


@pytest.fixture
def store(tmp_path) -> DuckDBStore:
    return DuckDBStore(tmp_path / "store.duckdb").validate()


def run_record(run_id: str, status: str = "running") -> RunRecord:
    now = datetime.now(UTC)
    return RunRecord(
        run_id=run_id,
        spec_hash="h",
        spec={},
        status=status,
        task_id="sample/t",
        agent="claude_code",
        model="anthropic/claude-sonnet-4-6",
        flavor="coding",
        runtime="docker",
        integrity_requested="strict",
        integrity_obtained=None,
        attempt=0,
        seed=0,
        sweep_id=None,
        started_at=now.isoformat(),
        ended_at=None if status == "running" else now.isoformat(),
    )


class Terminal:
    """A fake CLI in its own tmux server, recorded as a terminal of ``run_id``."""

    def __init__(self, tmp_path: Path, store: DuckDBStore, run_id: str, policy: TerminalPolicy) -> None:
        (tmp_path / "state").mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo").mkdir(exist_ok=True)
        self.tmp_path = tmp_path
        self.id = new_terminal_id()
        self.pane = TmuxPane(host_run, server_name(self.id))
        self.recorder = TerminalRecorder(
            self.pane,
            TerminalLog(store, run_id, policy),
            terminal_id=self.id,
            owner="workflow-step:" + run_id,
            cwd=str(tmp_path / "repo"),
        )

    async def start(self) -> TmuxPane:
        await self.pane.start(
            [sys.executable, str(FAKE), "--state", str(self.tmp_path / "state"), "--no-trust"],
            cwd=str(self.tmp_path / "repo"),
        )
        await self.recorder.start()
        await self.pane.wait_ready(20)
        return self.pane


def drive(body):
    return asyncio.run(body())


def crucible(tmp_path: Path, store: DuckDBStore, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_STORE": str(store.path), "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )


def test_a_terminal_runs_with_bounded_snapshots_closes_with_closes_at_then_its_retention_cleans_it_up(tmp_path, store):
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    store.record_run(run_record(run_id))
    policy = TerminalPolicy(retention=RETENTION, every=0.2, keep=3)
    terminal = Terminal(tmp_path, store, run_id, policy)

    async def body():
        try:
            pane = await terminal.start()
            await pane.submit("slow 2")  # a turn of ~2.6 s: about a dozen screens at 0.2 s
            await asyncio.sleep(1.5)
            during = store.terminals(run_id)
            await pane.wait_done(20)
            answer = await pane.answer("slow 2")
            await terminal.recorder.end(None)
            return during, answer
        finally:
            await terminal.pane.kill()

    during, answer = drive(body)
    ended_at = datetime.now(UTC)
    assert [(t.terminal_id, t.state, t.tmux_server, t.owner) for t in during] == [
        (terminal.id, "running", f"crucible-{terminal.id}", f"workflow-step:{run_id}")
    ]
    [closing] = store.terminals(run_id)
    assert closing.state == "closing" and closing.end_reason == "done" and closing.closed_at is None
    closes_at = datetime.fromisoformat(closing.closes_at)
    assert ended_at - timedelta(seconds=5) < closes_at - timedelta(seconds=RETENTION) <= ended_at
    snapshots = store.terminal_snapshots(terminal.id)
    periodic, final = [s for s in snapshots if not s.final], [s for s in snapshots if s.final]
    assert 1 <= len(periodic) <= 3, len(periodic)  # many were taken, the newest 3 kept
    assert any("esc to interrupt" in s.text for s in periodic)  # taken while the CLI worked
    assert answer == "The slow tool is done." and len(final) == 1 and "● The slow tool is done." in final[0].text

    assert store.housekeep_terminals() == ([], [])  # within its retention: nothing to do yet
    time.sleep(max(0.0, (closes_at - datetime.now(UTC)).total_seconds()) + 0.2)
    assert store.housekeep_terminals() == ([], [terminal.id])
    assert store.terminals(run_id) == []
    [completed] = store.terminals(run_id, include_closed=True)
    assert (completed.state, completed.closed_by) == ("completed", "retention")
    assert [s.final for s in store.terminal_snapshots(terminal.id)] == [True]

    shown = crucible(tmp_path, store, "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert f"terminal   {terminal.id}  completed" in shown.stdout
    assert "final snapshot (" in shown.stdout and "  ● The slow tool is done." in shown.stdout.splitlines()


def test_a_terminal_whose_tmux_server_dies_becomes_stale_and_a_later_end_fails_it(tmp_path, store):
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    terminal = Terminal(tmp_path, store, run_id, TerminalPolicy(retention=600, every=0.2))

    async def body():
        try:
            pane = await terminal.start()
            await pane.turn("remember the-canary", 20)
            deadline = time.monotonic() + 120  # a cap for a stuck recorder: each wait ends on its condition
            while time.monotonic() < deadline and not any(
                "● Noted." in s.text for s in store.terminal_snapshots(terminal.id)
            ):
                await asyncio.sleep(0.1)  # a periodic snapshot of the answer
            await host_run(["tmux", "-L", pane.server, "kill-server"])  # not through the recorder
            while time.monotonic() < deadline and not terminal.recorder.stale:
                await asyncio.sleep(0.1)
            stale = store.terminals(run_id)
            await terminal.recorder.end("the CLI exited (its tmux session is gone)")
            return stale
        finally:
            await terminal.pane.kill()

    [stale] = drive(body)
    assert (stale.state, stale.end_reason) == ("stale", "its tmux server went away") and stale.closes_at
    [failed] = store.terminals(run_id)
    assert (failed.state, failed.end_reason) == ("failed", "the CLI exited (its tmux session is gone)")
    finals = [s for s in store.terminal_snapshots(terminal.id) if s.final]
    assert len(finals) == 2 and all("● Noted." in s.text for s in finals)  # the last screen seen


def test_parallel_terminals_have_their_own_ids_servers_and_final_snapshots(tmp_path, store):
    run_ids = [f"run-{uuid.uuid4().hex[:8]}" for _ in "ab"]
    terminals = [
        Terminal(tmp_path / name, store, run_id, TerminalPolicy(every=0.3)) for name, run_id in zip("ab", run_ids)
    ]

    async def body():
        try:
            panes = await asyncio.gather(*(t.start() for t in terminals))
            await asyncio.gather(*(p.turn(f"I am {name}", 20) for p, name in zip(panes, "ab")))
            await asyncio.gather(*(t.recorder.end(None) for t in terminals))
        finally:
            for t in terminals:
                await t.pane.kill()

    drive(body)
    stored = [store.terminals(run_id) for run_id in run_ids]
    assert [len(s) for s in stored] == [1, 1]
    assert len({s[0].terminal_id for s in stored}) == 2 and len({s[0].tmux_server for s in stored}) == 2
    for (terminal,), name, other in zip(stored, "ab", "ba"):
        [final] = [s.text for s in store.terminal_snapshots(terminal.terminal_id) if s.final]
        assert f"● You said: I am {name}" in final and f"I am {other}" not in final


def test_an_ended_terminal_is_dismissed_and_leaves_the_listing_a_running_one_is_refused(tmp_path, store):
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    store.record_run(run_record(run_id))
    terminal = Terminal(tmp_path, store, run_id, TerminalPolicy(retention=3600, every=0.3))

    async def body():
        try:
            await terminal.start()
            refused = crucible(tmp_path, store, "terminals", "dismiss", terminal.id)
            await terminal.recorder.end(None)
            return refused
        finally:
            await terminal.pane.kill()

    refused = drive(body)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == (
        f"crucible terminals: terminal {terminal.id} is still running; it can be dismissed once its run has ended it"
    )
    listed = crucible(tmp_path, store, "terminals", run_id)
    assert listed.returncode == 0 and f"{terminal.id}  closing" in listed.stdout and "closes_at" in listed.stdout

    dismissed = crucible(tmp_path, store, "terminals", "dismiss", terminal.id[:8])
    assert dismissed.returncode == 0 and dismissed.stdout.strip() == f"dismissed {terminal.id}"
    assert crucible(tmp_path, store, "terminals", run_id).stdout.strip() == "no terminals"
    [closed] = store.terminals(run_id, include_closed=True)
    assert (closed.state, closed.closed_by) == ("completed", "dismissed")
    again = crucible(tmp_path, store, "terminals", "dismiss", terminal.id)
    assert again.returncode != 0 and again.stderr.strip().endswith("is already closed (dismissed)")
