"""The sdlc agent's tools: the coding flavor's bash and edit tools, plus the mock GitHub's."""

from __future__ import annotations

from envs.coding.tools import CodingTools
from envs.sdlc.github import NAMES, SPECS, MockGitHub


class SdlcTools:
    """``bash`` and ``str_replace_based_edit_tool`` act on the workspace; ``github_*`` act on
    the host-side mock, which the workspace cannot reach otherwise."""

    def __init__(self, coding: CodingTools, github: MockGitHub) -> None:
        self.coding, self.github = coding, github
        self.user, self.workdir = coding.user, coding.workdir

    def specs(self) -> list[dict]:
        return self.coding.specs() + [dict(spec) for spec in SPECS]

    async def call(self, name: str, arguments: dict) -> tuple[str, bool]:
        if name in NAMES:
            if not isinstance(arguments, dict):
                return "Error: arguments must be an object", True
            return await self.github.call(name, arguments)
        return await self.coding.call(name, arguments)
