"""The sweep progress display, fed record files and markers the way sweep jobs write them."""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

import pytest

from engine.run.progress import SKIPPED_MARKER, USER_ERROR_MARKER, SweepProgress, mark_job
from engine.store.files import atomic_write_json


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(sweep: Path, job: int, status: str) -> None:
    atomic_write_json(sweep / str(job) / "record.json", {"run_id": f"r{job}", "status": status})


def started(sweep: Path, job: int) -> None:
    (sweep / str(job) / ".hydra").mkdir(parents=True)  # Hydra writes this when a job starts


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_plain_lines_come_at_most_every_interval_and_only_with_news_then_once_at_the_end(tmp_path, clock):
    sweep, out = tmp_path / "sweep", io.StringIO()
    progress = SweepProgress(sweep, 4, label="S", stream=out, interactive=False, every_s=10, clock=clock)

    assert progress.tick() == "sweep S: 0/4 done, 0 completed, 0 failed, 0 running, 4 waiting | 0:00 elapsed, ETA --"
    record(sweep, 0, "running")
    clock.now += 3
    assert progress.tick() is None  # news, but too soon
    clock.now += 8
    assert progress.tick() == "sweep S: 0/4 done, 0 completed, 0 failed, 1 running, 3 waiting | 0:11 elapsed, ETA --"
    record(sweep, 0, "completed")
    mark_job(sweep / "1", USER_ERROR_MARKER, "unknown agent 'x'")
    started(sweep, 2)
    clock.now += 4
    assert progress.tick() is None
    clock.now += 7.5
    assert progress.tick() == (
        "sweep S: 2/4 done, 1 completed, 1 failed, 1 running, 1 waiting | 0:22 elapsed, ETA 0:22"
    )  # 2 jobs in 22.5 s, 2 to go
    clock.now += 30
    assert progress.tick() is None  # only the clock moved
    record(sweep, 2, "timeout")
    mark_job(sweep / "3", SKIPPED_MARKER, "skip t a: spec already has completed run (resume=true)")
    assert progress.tick(final=True) == (
        "sweep S: 4/4 done, 1 completed, 2 failed, 1 skipped, 0 running, 0 waiting | 0:52 elapsed, done"
    )
    assert out.getvalue().count("\n") == 4 and "\r" not in out.getvalue()


def test_on_a_terminal_one_line_is_redrawn_in_place(tmp_path, clock, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the terminal's width, as rich reads it
    sweep, out = tmp_path / "sweep", io.StringIO()
    progress = SweepProgress(sweep, 2, label="S", stream=out, interactive=True, clock=clock)
    progress.tick()
    record(sweep, 0, "completed")
    clock.now += 0.5
    progress.tick()
    clock.now += 0.1
    assert progress.tick() is None  # nothing new, and the clock shows whole seconds
    record(sweep, 1, "error")
    progress.stop()
    # rich draws it: each redraw returns to the line's start and clears it; one newline, at the end.
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    frames = list(
        dict.fromkeys(f[f.index("sweep S") :].split(" | ")[0] for f in re.split(r"[\r\n]", text) if "sweep S" in f)
    )
    assert frames == [
        "sweep S: 0/2 done, 0 completed, 0 failed, 0 running, 2 waiting",
        "sweep S: 1/2 done, 1 completed, 0 failed, 0 running, 1 waiting",
        "sweep S: 2/2 done, 1 completed, 1 failed, 0 running, 0 waiting",
    ]
    assert text.count("\n") == 1 and text.rstrip().endswith("done")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_ci_gets_plain_lines_even_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    assert SweepProgress(tmp_path, 1, stream=FakeTerminal()).interactive is False
    monkeypatch.delenv("CI")
    assert SweepProgress(tmp_path, 1, stream=FakeTerminal()).interactive is True
    assert SweepProgress(tmp_path, 1, stream=io.StringIO()).interactive is False


def test_a_final_record_is_read_once_and_a_torn_read_counts_as_running(tmp_path, clock):
    sweep = tmp_path / "sweep"
    progress = SweepProgress(sweep, 2, stream=io.StringIO(), interactive=False, clock=clock)
    record(sweep, 0, "completed")
    (sweep / "1").mkdir()
    (sweep / "1" / "record.json").write_text('{"status": "compl')  # not atomic: what a reader must survive
    counts = progress.poll()
    assert (counts.completed, counts.running) == (1, 1)
    (sweep / "0" / "record.json").write_text("garbage")  # a finished job is never read again
    (sweep / "1" / "record.json").unlink()
    atomic_write_json(sweep / "1" / "record.json", {"status": "canceled"})
    counts = progress.poll()
    assert (counts.completed, counts.failed, counts.running, counts.finished) == (1, 1, 0, 2)


def test_the_thread_follows_the_sweep_and_prints_the_final_line_on_exit(tmp_path):
    sweep, out = tmp_path / "sweep", io.StringIO()
    with SweepProgress(sweep, 2, label="S", stream=out, interactive=False, every_s=0, poll_s=0.01) as progress:
        record(sweep, 0, "completed")
        deadline = time.monotonic() + 60  # the thread's next poll, however late a loaded machine runs it
        while "1/2 done" not in out.getvalue() and time.monotonic() < deadline:
            progress._stop.wait(0.01)
        record(sweep, 1, "completed")
    lines = out.getvalue().splitlines()
    assert any(line.startswith("sweep S: 1/2 done") for line in lines), lines
    assert lines[-1].startswith("sweep S: 2/2 done, 2 completed, 0 failed, 0 running, 0 waiting |")
    assert lines[-1].endswith("done") and not progress._thread.is_alive()
    assert json.loads((sweep / "0" / "record.json").read_text())["status"] == "completed"


def test_a_job_whose_first_try_the_infrastructure_failed_counts_as_its_retry_ends(tmp_path):
    """The failed try's record lands before its retry's directory is made: the job is not
    settled as failed then, and once the retry completes it counts completed (batch.py)."""
    sweep = tmp_path / "sweep"
    progress = SweepProgress(sweep, 1, label="S", stream=io.StringIO(), interactive=False)
    atomic_write_json(sweep / "0" / "record.json", {"run_id": "r0", "status": "error", "infrastructure": True})
    assert (progress.poll().failed, progress.poll().completed) == (1, 0)  # no retry (yet): failed
    (sweep / "0" / "retry-1").mkdir()
    assert (progress.poll().running, progress.poll().failed) == (1, 0)  # retrying
    atomic_write_json(sweep / "0" / "retry-1" / "record.json", {"run_id": "r1", "status": "completed"})
    assert (progress.poll().completed, progress.poll().failed) == (1, 0)
    other = SweepProgress(tmp_path / "other", 1, label="T", stream=io.StringIO(), interactive=False)
    atomic_write_json(tmp_path / "other" / "0" / "record.json", {"run_id": "r2", "status": "error"})
    assert other.poll().failed == 1
