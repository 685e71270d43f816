"""A test-only agent that looks at its own workspace: each probe command's output becomes a
step, so a test can see what the image the agent works in holds (tests/build/test_agent_image.py).
Allowed by ``CRUCIBLE_PLUGIN_PACKAGES=agent_probe`` with tests/ on the import path."""

from __future__ import annotations

from engine.agents import AgentContext, AgentOutcome
from engine.models import Step

PROBES = ("jq --version", "cat /opt/crucible-probe/hello.txt", "cat /opt/crucible-probe/marker", "id -u")
CAPABILITIES_SEEN = "<the capabilities it was given>"


class ProbeAgent:
    takes_model = False
    deterministic = True
    capabilities = ()

    def __init__(self, name: str = "probe") -> None:
        self.name = name

    async def run(self, ctx: AgentContext) -> AgentOutcome:
        assert ctx.workspace is not None
        steps = []
        for idx, command in enumerate(PROBES):
            result = await ctx.workspace.exec(["sh", "-c", command], user=ctx.uid, cwd=ctx.workdir, timeout=60)
            steps.append(
                Step(
                    idx=idx,
                    kind="tool_call",
                    tool="probe",
                    arguments={"command": command},
                    result=result.text().strip(),
                    is_error=not result.ok,
                )
            )
        # What the run served it: it declares no capabilities, so nothing.
        steps.append(
            Step(
                idx=len(steps),
                kind="tool_call",
                tool="probe",
                arguments={"command": CAPABILITIES_SEEN},
                result=",".join(sorted(ctx.capabilities)),
                is_error=False,
            )
        )
        return AgentOutcome(steps=steps)
