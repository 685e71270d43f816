"""The coding flavor's task schema: three-branch repos graded by a test command.

Registered by the flavor (``CodingFlavor.task_schema``), so every ``task.*`` key of a
coding task is validated at compose time, by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from omegaconf import MISSING

from engine.config.schema import TaskConfig


@dataclass
class TaskRefs:
    """The three-branch convention; any ref may be overridden per task."""

    baseline: str = "${..name}_baseline"
    test: str = "${..name}_test"
    golden: str = "${..name}_golden"


@dataclass
class CodingTaskConfig(TaskConfig):
    repo: str = MISSING
    """A git URL, a local path, or ``generated://NAME`` (built by samples/NAME/build_repo.py)."""
    refs: TaskRefs = field(default_factory=TaskRefs)
    hidden_tests: List[str] = MISSING
    test_command: str = MISSING
    """Shell command run in the repo dir; ``{test_files}`` becomes the hidden test files."""
    isolated_verdict: bool = False
    """The hidden tests never import the code under test: they call ``crucible_probe``
    scenarios, which return plain data. Under an integrity mode that isolates the verdict
    (``strict``) each scenario runs in its own interpreter as the agent's uid and pytest runs
    outside the repo as another uid with the grader's own options (``test_command`` unused),
    so no code under test can forge the verdict (envs/coding/isolated.py); otherwise
    ``test_command`` runs them in the repo and the scenarios are called in-process."""
    system_packages: List[str] = field(default_factory=list)
    install: str = ""
    workdir: str = "/app"
    protected_paths: List[str] = field(default_factory=list)
    test_timeout: float = 600.0
    tests_ran_regex: str = (r"(?m)^(?!.*\b[1-9][0-9]* (?:failed|skipped|deselected|xfailed|xpassed|errors?)\b)"
                            r".*\b[1-9][0-9]* passed\b")
    """Output must match this for a passing exit code to count: no tests run scores 0, and so
    does a summary that also counts skipped, deselected, xfailed or errored tests (code under
    test calling pytest.skip() where it would fail must not pass). A task whose hidden tests
    legitimately skip sets its own pattern."""
