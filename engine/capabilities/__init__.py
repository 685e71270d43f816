"""Capabilities: how agents reach a run's workspace (the task's tools over MCP, ssh/2 onto its shell),
and which of them a run serves its agent (``capabilities_used``)."""

from __future__ import annotations

from engine.errors import AgentError
from engine.models import RunSpec

CAPABILITIES = ("mcp", "ssh")
"""What a run can serve its agent: the task's tools over MCP (from the host, and as a unix
socket inside the workspace), and ssh/2 onto the workspace's shell."""


def capabilities_used(agent: object, spec: RunSpec) -> frozenset[str]:
    """The capabilities ``agent`` declares it connects to in the run ``spec``; all of them where
    it declares none (a plug-in written before agents could say). Raises AgentError for a name
    not served."""
    declared = getattr(agent, "capabilities", CAPABILITIES)
    if callable(declared):
        declared = declared(spec)
    unknown = sorted(set(declared) - set(CAPABILITIES))
    if unknown:
        raise AgentError(
            f"agent {getattr(agent, 'name', type(agent).__name__)!r} declares capabilities "
            f"{unknown}, not among {list(CAPABILITIES)}"
        )
    return frozenset(declared)
