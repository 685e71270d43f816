"""Agents: what works on a task. Each is a Hydra ``_target_`` under ``conf/agent/``.

An agent gets an ``AgentContext`` (engine/interfaces.py: the spec, its workspace and uid,
how to reach the task's capabilities, the validation steps, the prompt) and returns an ``AgentOutcome`` (its steps, warnings, why
it stopped, its answer). Grading never looks at the outcome, only at the workspace.
"""

from __future__ import annotations

from engine.interfaces import AgentContext, AgentOutcome

__all__ = ["AgentContext", "AgentOutcome"]
