"""The PR check (0.2 of the reward): structural by default, or a rubric judged by a model.

Both are pure functions of the raw grade once the judge's reply is in it, so a stored run
regrades without calling any model again.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from engine.errors import GradeError
from envs.sdlc.schema import JudgeConfig, SdlcTaskConfig

JUDGE_SYSTEM = (
    "You review pull requests against a rubric. Reply with one short paragraph of reasons, then a "
    "last line of the form `SCORE: x` where x is a number from 0 to 1."
)
MAX_DIFF_CHARS = 20000


def issue_number(task: SdlcTaskConfig) -> int | None:
    """The issue the PR must resolve: ``task.issue``, else the task's first issue."""
    if task.issue is not None:
        return int(task.issue)
    return int(task.issues[0].number) if task.issues else None


def structural(pull: Mapping[str, Any], issue: int | None) -> dict[str, bool]:
    """Each structural check: what a reviewer asks of any PR before reading it."""
    text = f"{pull.get('title') or ''}\n{pull.get('body') or ''}"
    return {
        "title": bool(str(pull.get("title") or "").strip()),
        "body": bool(str(pull.get("body") or "").strip()),
        "head_is_not_base": pull.get("head") != pull.get("base"),
        "head_exists": bool(pull.get("head_sha")),
        "references_issue": issue is None or re.search(rf"#{issue}(?!\d)", text) is not None,
    }


def score(pr_check: Mapping[str, Any]) -> float:
    """The PR check's subscore from its raw record (pure)."""
    if pr_check.get("kind") == "rubric":
        return parse_score(str(pr_check.get("reply") or ""))
    checks = pr_check.get("checks") or {}
    return sum(1.0 for ok in checks.values() if ok) / len(checks) if checks else 0.0


def parse_score(reply: str) -> float:
    """The judge's ``SCORE: x`` (its last one), clamped to 0..1; 0 when it gave none."""
    found = re.findall(r"(?i)score\W{0,3}\s*([01](?:\.\d+)?|\.\d+)", reply)
    if not found:
        return 0.0
    return min(1.0, max(0.0, float(found[-1])))


def rubric_prompt(task: SdlcTaskConfig, pull: Mapping[str, Any], diff: str) -> str:
    issue = next((i for i in task.issues if i.number == issue_number(task)), None)
    parts = [f"# Rubric\n{task.pr_rubric}"]
    if issue is not None:
        parts.append(f"# The issue (#{issue.number}): {issue.title}\n{issue.body}")
    parts.append(f"# The pull request #{pull.get('number')}: {pull.get('title')}\n{pull.get('body')}")
    parts.append(f"# Its diff\n{diff[:MAX_DIFF_CHARS]}")
    return "\n\n".join(parts)


async def judge(task: SdlcTaskConfig, pull: Mapping[str, Any], diff: str) -> dict[str, Any]:
    """Ask the task's judge model to score the PR by ``pr_rubric``: the raw record. A judge
    that cannot be reached is a ``GradeError`` (never a score)."""
    from engine.agents.providers import (
        ModelAPIError,
        Sampling,
        UserText,
        base_url_for,
        key_env_for,
        make_provider,
        parse_model,
    )

    config: JudgeConfig = task.judge
    choice = parse_model(config.model)
    key_env = key_env_for(choice, config.api_key_env)
    provider = make_provider(
        choice,
        base_url=base_url_for(choice, config.base_url),
        api_key=os.environ.get(key_env) if key_env else None,
        sampling=Sampling(temperature=0.0, max_tokens=config.max_tokens, seed=None),
    )
    prompt = rubric_prompt(task, pull, diff)
    try:
        reply = await provider.complete(JUDGE_SYSTEM, [UserText(prompt)], [], timeout=config.request_timeout)
    except ModelAPIError as exc:
        raise GradeError(f"the PR judge ({config.model}) failed: {exc}") from exc
    finally:
        await provider.aclose()
    return {"kind": "rubric", "model": config.model, "prompt_chars": len(prompt), "reply": reply.text}


def describe(pr_check: Mapping[str, Any]) -> str:
    if pr_check.get("kind") == "rubric":
        return f"rubric judged by {pr_check.get('model')}: {json.dumps(str(pr_check.get('reply'))[-300:])}"
    failed = [name for name, ok in (pr_check.get("checks") or {}).items() if not ok]
    return "structural: " + ("all checks pass" if not failed else "failed " + ", ".join(failed))
