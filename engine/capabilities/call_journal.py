"""The tool calls an MCP server served a run, journalled as steps as they start and end.

An agent stopped by the run's timeout is cancelled, and its own record of its steps goes with
it; a tool call it had in flight may still have changed the workspace before the server's
shutdown stopped it, and that change is in the captured diff. The run then records the
server's journal (``McpService.calls``), for any agent that works through MCP.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime
from typing import Any

from engine.models import Step

IN_FLIGHT_NOTE = "in flight at the agent's timeout"


class CallJournal:
    """Every tool call the server saw start and end, as steps: what a run records of its agent's
    calls when the agent cannot say (stopped by its timeout, its own steps lost with it). A call
    still running is a step too (``IN_FLIGHT_NOTE``, an error): what it did before it was
    stopped reaches the captured diff, so the record must show it was called."""

    def __init__(self) -> None:
        self.calls: list[Step] = []  # in order of their start
        self.running: dict[int, float] = {}  # id(step) -> its start (monotonic)
        self.ended_ids: set[int] = set()

    def started(self, tool: str, arguments: dict[str, Any]) -> Step:
        step = Step(
            idx=len(self.calls),
            kind="tool_call",
            capability="mcp",
            tool=tool,
            arguments=dict(arguments),
            started_at=datetime.now(UTC).isoformat(),
        )
        self.calls.append(step)
        self.running[id(step)] = time.monotonic()
        return step

    def ended(self, step: Step, result: str, is_error: bool) -> None:
        began = self.running.pop(id(step), time.monotonic())
        step.result, step.is_error, step.seconds = result, is_error, round(time.monotonic() - began, 4)
        self.ended_ids.add(id(step))

    def forget(self, step: Step) -> None:
        self.running.pop(id(step), None)  # a call that raised (cancelled): it ended without a result

    def steps(self) -> list[Step]:
        """The calls ended and those still running, in order of their start."""
        now, steps = time.monotonic(), []
        for step in self.calls:
            if id(step) in self.running:
                steps.append(
                    dataclasses.replace(
                        step, is_error=True, note=IN_FLIGHT_NOTE, seconds=round(now - self.running[id(step)], 4)
                    )
                )
            elif id(step) in self.ended_ids:
                steps.append(step)
        return [dataclasses.replace(step, idx=i) for i, step in enumerate(steps)]
