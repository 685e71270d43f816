"""The sdlc flavor's task schema: a coding task (repo, refs, hidden tests) plus its issues.

Registered by the flavor (``SdlcFlavor.task_schema``), so a misspelled key of a task or of
one of its issues fails at compose time, in one line naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from envs.coding.schema import CodingTaskConfig


@dataclass
class IssueComment:
    author: str = "reporter"
    body: str = MISSING


@dataclass
class IssueConfig:
    """One issue of the mock GitHub, as the agent first sees it."""

    number: int = MISSING
    title: str = MISSING
    body: str = ""
    labels: list[str] = field(default_factory=list)
    comments: list[IssueComment] = field(default_factory=list)
    author: str = "reporter"


@dataclass
class JudgeConfig:
    """The model that judges ``pr_rubric``, through the model agents' providers."""

    model: str = ""
    """``provider/name`` as for the tool-calling agent (``openai-compatible/NAME`` + base_url)."""
    base_url: str | None = None
    api_key_env: str | None = None
    max_tokens: int = 512
    request_timeout: float = 120.0


@dataclass
class SdlcTaskConfig(CodingTaskConfig):
    issues: list[IssueConfig] = field(default_factory=list)
    issue: int | None = None
    """The issue the pull request must resolve (and reference, ``#N``); None = the first issue."""
    pr_rubric: str | None = None
    """None: the structural PR check. Else a rubric a model (``judge``) scores the PR by, 0..1."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    branch: str = "fix"
    """The branch name the golden pushes (its PR's head)."""
