"""Agents: what works on a task. Each is a Hydra ``_target_`` under ``conf/agent/``.

An agent gets an ``AgentContext`` (the spec, how to reach the task's capabilities, the
validation steps, the prompt) and returns an ``AgentOutcome`` (its steps, warnings, why
it stopped, its answer). Grading never looks at the outcome, only at the workspace.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from engine.models import RunSpec, Step


@dataclass
class AgentContext:
    spec: RunSpec
    capabilities: Mapping[str, str]
    capability_auth: Mapping[str, str]
    validation: Sequence[object]
    prompt: str


@dataclass
class AgentOutcome:
    steps: list[Step] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stop_reason: str = "done"
    answer: str = ""
