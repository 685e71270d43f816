"""An image build's steps, shown as they happen on a terminal (nothing elsewhere)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TextIO

from engine.util.console import console, escape, is_interactive


class BuildProgress:
    """An image build's steps as they happen, on a terminal: where its full log is, then each
    ``Step N/M`` line as Docker starts it. Elsewhere nothing (a failed build's error names its log)."""

    def __init__(
        self, tag: str, log_path: Path, *, stream: TextIO | None = None, interactive: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.interactive = is_interactive(self.stream) if interactive is None else interactive
        self.tag = tag
        if self.interactive:
            self._print(f"[bold]building[/] {escape(tag)}  (full log: {escape(str(log_path))})")

    def output(self, line: str) -> None:
        """One line of the build's output: shown if it starts a step."""
        if self.interactive and line.startswith("Step "):
            self._print(f"  {self.tag.split(':')[-1][:12]}  {escape(line.rstrip())}")

    def done(self, error: str | None) -> None:
        if self.interactive:
            self._print(
                f"  {self.tag.split(':')[-1][:12]}  " + (f"[red]failed[/]: {escape(error)}" if error else "built")
            )

    def _print(self, markup: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            console(self.stream).print(markup, highlight=False, soft_wrap=True)
