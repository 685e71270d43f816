"""The progress of runs in this process (check, lock, swe eval), and of the tool calls an MCP server
journals for a run whose agent cannot say what it did."""

from __future__ import annotations

import io

from engine.capabilities.call_journal import IN_FLIGHT_NOTE, CallJournal
from engine.run.progress import TaskProgress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_wait_for_a_run_then_count_done_running_failed_and_the_eta():
    clock, out = Clock(), io.StringIO()
    progress = TaskProgress("check", 4, stream=out, interactive=False, every_s=0, clock=clock)
    assert progress.tick() is None  # images still building: nothing to say yet
    progress.finished("completed", was_running=False, from_store=True)  # a verdict from the store
    progress.running()
    progress.running()
    clock.now = 10
    progress.finished("completed")
    assert progress.tick() == (
        "check: 2/4 done, 1 completed, 0 failed, 1 skipped, 1 running, 1 waiting | 0:10 elapsed, ETA 0:20"
    )
    progress.finished("timeout")
    assert progress.tick(final=True).startswith("check: 3/4 done, 1 completed, 1 failed, 1 skipped, 0 running")
    assert out.getvalue().count("\n") == 2


def test_a_failure_leaves_no_final_line_to_stand_beside_its_error():
    out = io.StringIO()
    try:
        with TaskProgress("lock", 2, stream=out, interactive=False, poll_s=60):
            raise RuntimeError("the build failed")
    except RuntimeError:
        pass
    assert out.getvalue() == ""


def test_the_journal_numbers_calls_by_start_and_marks_those_in_flight():
    journal = CallJournal()
    first = journal.started("bash", {"command": "ls"})
    slow = journal.started("bash", {"command": "sleep 300"})
    journal.ended(first, "README.md", False)
    steps = journal.steps()
    assert [(s.idx, s.arguments["command"], s.is_error, s.note) for s in steps] == [
        (0, "ls", False, None),
        (1, "sleep 300", True, IN_FLIGHT_NOTE),
    ]
    assert steps[0].result == "README.md" and slow.note is None  # a copy is marked, not the call's own
    journal.forget(slow)  # cancelled at shutdown: it ended without a result
    assert [s.arguments["command"] for s in journal.steps()] == ["ls"]
