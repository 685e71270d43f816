"""A sweep's progress, shown by the process that launched it: done / running / failed, elapsed, ETA.

The launching process knows how many jobs the sweep has and where their run
directories go (``<runs>/sweeps/<sweep_id>/<job>/``). A background thread looks at
those directories only: each job's ``record.json`` (written atomically by the runner,
status "running" first, then the final one) and the markers a job leaves when it does
not run (``user_error.txt``, ``skipped.txt``). It never opens the DuckDB store, which
sweep workers need for themselves, and it re-reads a record only while its job is
unfinished and the file has changed, so a poll of a large sweep stays cheap.

The same line serves every command that runs many runs (``check``, ``lock``, ``swe eval``:
``TaskProgress``, fed by the batch as runs start and end) and image builds show their steps
(``engine.build.progress``). On a terminal rich draws them on stderr (``LiveLine``: a bar and the
line, redrawn in place, with what else is printed scrolling above it). Elsewhere, or with
``CI`` set, a plain line is printed at most every ``every_s`` seconds, only when something
changed, and once at the end: quiet in CI logs, and parsable.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TextIO

from engine.util.console import console, is_interactive, same_terminal

USER_ERROR_MARKER = "user_error.txt"
"""A job that failed before its run started (bad config, ...) writes its one-line reason here."""
SKIPPED_MARKER = "skipped.txt"
"""A job skipped by ``resume=true`` (its spec already has a completed run) writes this."""
FAILED_STATUSES = ("error", "timeout", "canceled")


def mark_job(run_dir: Path, marker: str, text: str) -> None:
    """Leave ``marker`` in a job's directory (for the progress display and the sweep summary)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / marker).write_text(text.rstrip("\n") + "\n")


@dataclass(frozen=True)
class Counts:
    total: int
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    running: int = 0

    @property
    def finished(self) -> int:
        return self.completed + self.failed + self.skipped

    @property
    def waiting(self) -> int:
        return max(0, self.total - self.finished - self.running)


def job_state(job_dir: Path) -> str | None:
    """ "completed" | "failed" | "skipped" | "running" | None (not started, or no record yet)."""
    if (job_dir / SKIPPED_MARKER).exists():
        return "skipped"
    if (job_dir / USER_ERROR_MARKER).exists():
        return "failed"
    try:
        status = json.loads((job_dir / "record.json").read_text()).get("status")
    except FileNotFoundError:
        # Hydra writes .hydra/ when a job starts; the run's first record comes after planning.
        return "running" if (job_dir / ".hydra").is_dir() else None
    except (OSError, ValueError):
        return "running"  # unreadable for a moment: the job exists, so it has started
    if status == "completed":
        return "completed"
    if status == "error" and (retries := sorted(job_dir.glob("retry-*"), key=_retry_number)):
        return job_state(retries[-1]) or "running"  # tried again (batch.py): its last try says
    return "failed" if status in FAILED_STATUSES else "running"


def _retry_number(path: Path) -> int:
    number = path.name.removeprefix("retry-")
    return int(number) if number.isdigit() else 0


class _Progress:
    """What every progress display shares: the line (counts, elapsed, ETA), when it is shown,
    and the thread that shows it (use as a context manager). Subclasses say what the counts are."""

    quiet_until_started = False
    """Plain lines (not on a terminal) only once a run has started."""

    def __init__(
        self,
        title: str,
        total: int,
        *,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        every_s: float = 10.0,
        poll_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.title = title
        self.total = total
        self.stream = stream or sys.stderr
        self.interactive = is_interactive(self.stream) if interactive is None else interactive
        self.every_s = every_s
        self.poll_s = poll_s
        self.clock = clock
        self.started = clock()
        self._live: LiveLine | None = None
        self._last_line: str | None = None
        self._last_print = float("-inf")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> Counts:
        raise NotImplementedError

    # ---- the line ----------------------------------------------------------------------

    def line(self, counts: Counts) -> str:
        elapsed = self.clock() - self.started
        executed = counts.completed + counts.failed
        remaining = counts.total - counts.finished
        if remaining <= 0:
            eta = "done"
        elif executed:
            eta = "ETA " + _clock(elapsed / executed * remaining)
        else:
            eta = "ETA --"
        parts = [f"{counts.finished}/{counts.total} done", f"{counts.completed} completed", f"{counts.failed} failed"]
        if counts.skipped:
            parts.append(f"{counts.skipped} skipped")
        parts += [f"{counts.running} running", f"{counts.waiting} waiting"]
        return f"{self.title}: " + ", ".join(parts) + f" | {_clock(elapsed)} elapsed, {eta}"

    def tick(self, *, final: bool = False) -> str | None:
        """Poll and show the line if due; returns the line shown, or None."""
        counts = self.poll()
        line = self.line(counts)
        now = self.clock()
        if self.interactive:
            if not (final or line != self._last_line or now - self._last_print >= 1.0):
                return None
            if self._live is None:
                self._live = LiveLine(self.stream)
            if not self._live.show(line, counts.finished, counts.total, final=final):
                self._stop.set()
        else:
            # The elapsed clock alone is no news: compare the counts part of the line.
            changed = line.split(" | ")[0] != (self._last_line or "").split(" | ")[0]
            if not final and not (changed and now - self._last_print >= self.every_s):
                return None
            if not final and self.quiet_until_started and not (counts.running or counts.finished):
                return None  # images are still being built: a build that fails is one error, alone
            self._write(line + "\n")
        self._last_line, self._last_print = line, now
        return line

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stream must never fail the work
            self._stop.set()

    # ---- the thread --------------------------------------------------------------------

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._loop, name="crucible-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, final: bool = True) -> None:
        """Stop the thread and show the final line (``final`` False: none, the work failed and
        its error is what the user reads)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if final or self._live is not None:  # a live line is left as it was last drawn
                self.tick(final=True)
        finally:
            if self._live is not None:
                self._live.close()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.tick()
            except Exception:  # a display problem must never fail the work
                continue

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.stop(final=exc_type is None or exc_type is KeyboardInterrupt)


class SweepProgress(_Progress):
    """Polls a sweep's job directories and shows its progress (use as a context manager)."""

    def __init__(
        self,
        sweep_dir: Path,
        total: int,
        *,
        label: str = "",
        stream: TextIO | None = None,
        interactive: bool | None = None,
        every_s: float = 10.0,
        poll_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sweep_dir = Path(sweep_dir)
        self.label = label or self.sweep_dir.name
        super().__init__(
            f"sweep {self.label}",
            total,
            stream=stream,
            interactive=interactive,
            every_s=every_s,
            poll_s=poll_s,
            clock=clock,
        )
        self._final: dict[str, str] = {}  # job -> state that can no longer change
        self._seen: dict[str, tuple[tuple[int, int], str | None]] = {}  # job -> (record inode+mtime, state)

    def poll(self) -> Counts:
        states: dict[str, int] = {"completed": 0, "failed": 0, "skipped": 0, "running": 0}
        try:
            jobs = [p for p in self.sweep_dir.iterdir() if p.is_dir()]
        except FileNotFoundError:
            jobs = []
        for job in jobs:
            state = self._final.get(job.name) or self._state(job)
            if state in ("completed", "failed", "skipped") and not (state == "failed" and _may_be_retried(job)):
                self._final[job.name] = state
            if state is not None:
                states[state] += 1
        return Counts(total=self.total, **states)

    def _state(self, job: Path) -> str | None:
        try:
            stat = (job / "record.json").stat()
        except FileNotFoundError:
            return job_state(job)  # markers and .hydra/ only: cheap
        # Records are replaced by rename: a new version is a new inode.
        version = (stat.st_ino, stat.st_mtime_ns)
        cached = self._seen.get(job.name)
        if cached is not None and cached[0] == version:
            return cached[1]
        state = job_state(job)
        # Not kept while a retry's own record may yet change it, or a retry may yet come.
        settled = state != "running" or not any(job.glob("retry-*"))
        if settled and not (state == "failed" and _may_be_retried(job)):
            self._seen[job.name] = (version, state)
        return state


def _may_be_retried(job: Path) -> bool:
    """Whether the job's first try failed for the infrastructure: a retry may come (batch.py)."""
    try:
        return bool(json.loads((job / "record.json").read_text()).get("infrastructure"))
    except (OSError, ValueError):
        return False


class TaskProgress(_Progress):
    """The progress of runs in this process (``check``, ``lock``, ``swe eval``): told by the
    batch as each run starts (``running``) and ends (``finished``), from any thread."""

    quiet_until_started = True

    def __init__(self, title: str, total: int, **kwargs: Any) -> None:

        super().__init__(title, total, **kwargs)
        self._counts = {"completed": 0, "failed": 0, "skipped": 0, "running": 0}
        self._lock = threading.Lock()

    def running(self) -> None:
        with self._lock:
            self._counts["running"] += 1

    def finished(self, status: str, *, was_running: bool = True, from_store: bool = False) -> None:
        """A run ended with ``status`` (``from_store``: a verdict the store answered, counted skipped)."""
        state = "skipped" if from_store else "completed" if status == "completed" else "failed"
        with self._lock:
            self._counts[state] += 1
            if was_running:
                self._counts["running"] = max(0, self._counts["running"] - 1)

    def poll(self) -> Counts:
        with self._lock:
            return Counts(total=self.total, **self._counts)


class LiveLine:
    """One status line with a bar, drawn by rich on a terminal and redrawn in place; what else
    goes to the same console (a build's steps) scrolls above it."""

    def __init__(self, stream: TextIO) -> None:
        from rich.progress import BarColumn, Progress, TextColumn
        from rich.table import Column

        # Folded, never cut: the ETA is at the line's end, and a narrow terminal still shows it.
        text = TextColumn("{task.description}", table_column=Column(no_wrap=False, overflow="fold"))
        # Lines printed to stdout go above the live line when both are this terminal; piped
        # elsewhere, stdout stays untouched (what tests and scripts read).
        self.progress = Progress(
            BarColumn(bar_width=24),
            text,
            console=console(stream),
            auto_refresh=False,
            transient=False,
            redirect_stdout=same_terminal(stream),
            redirect_stderr=False,
        )
        self.task = self.progress.add_task("", total=None)
        self.started = False

    def show(self, line: str, done: int, total: int, *, final: bool = False) -> bool:
        """Draw ``line``; False when the stream is gone (the display then stops, the work goes on)."""
        try:
            self.progress.update(self.task, description=line, completed=done, total=max(total, 1))
            if not self.started:
                self.progress.start()  # draws the line it has just been given
                self.started = True
            self.progress.refresh()
            return True
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        if self.started:
            self.started = False
            with contextlib.suppress(OSError, ValueError):
                self.progress.stop()


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
