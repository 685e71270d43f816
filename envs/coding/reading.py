"""Which named test results a coding task's grading reads (``results.format``, ``auto``
resolved from its test command), and the plan-time refusal of a task that reads none under a
mode that takes verdicts from named results only (the ``named_results_only`` defence)."""

from __future__ import annotations

import re

from envs.coding import isolated
from envs.coding.defences import CodingIntegrity
from envs.coding.schema import CodingTaskConfig


def text_only_refusal(task: CodingTaskConfig, integrity: CodingIntegrity | None) -> str | None:
    """The one line refusing ``task`` under ``integrity`` at plan time when its verdict would
    come from text alone (``results.format`` none, no isolated verdict) and the mode takes
    verdicts from named results only (``strict``); else None. The grader scores such a run 0
    too, should one be planned some other way."""
    if integrity is None or not integrity.named_results_only or declared_format(task) != "none":
        return None
    if task.isolated_verdict and integrity.isolate_verdict:
        return None  # the launcher, not the tested code, says how the isolated tests went
    return (
        f"task '{task.id}': integrity={integrity.mode} takes verdicts from named test results only, and "
        f"`{task.test_command}` gives none (results.format {task.results.format!r}): set results.format "
        "(pytest, go, parser) or grade it under integrity=vault"
    )


def declared_format(task: CodingTaskConfig) -> str:
    """The results format a task's settings give, before any mode (``auto`` resolved)."""
    return results_format(task, None)


def results_format(task: CodingTaskConfig, plan: isolated.Plan | None) -> str:
    """How the named results are read: the task's choice, or what its command runs."""
    if plan is not None and plan.separate:
        return "none"  # the isolated verdict's own pytest, outside the repo: judged by its launcher
    chosen = str(task.results.format)
    if chosen != "auto":
        return chosen
    command = str(task.test_command)
    if re.search(r"\bpytest\b", command):
        return "pytest"
    if re.search(r"\bgo\s+test\b", command) and re.search(r"(^|\s)-json\b", command):
        return "go"
    return "none"
