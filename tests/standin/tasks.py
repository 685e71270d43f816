"""What the stand-in knows about crucible's tasks: which task a prompt is, and its golden fix.

A task is recognised by its prompt (the first user message the agent sends is the task's
prompt, verbatim). The golden fix is the task's own ``validation``: the tool calls that
turn the baseline into the golden, derived from the task repo on the host (the generated
sample repo: ``engine.plan.repos.resolve_repo`` + ``git``), exactly what ``crucible check``
replays. A stand-in that "fixes" a task therefore sends the same edits the golden makes.
"""

from __future__ import annotations

import functools
import re

import yaml

from engine.config.compose import compose_config, to_typed
from engine.config.tree import config_dirs, group_options, option_file


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@functools.lru_cache(maxsize=1)
def prompt_index() -> tuple[tuple[str, str, str], ...]:
    """(normalised prompt, task id, config option) for every task in the config dirs."""
    index = []
    for option in group_options("task"):
        path = option_file("task", option)
        data = yaml.safe_load(path.read_text()) if path else None
        if isinstance(data, dict) and isinstance(data.get("prompt"), str):
            task_id = f"{data.get('set', option.split('/')[0])}/{data.get('name', option.split('/')[-1])}"
            index.append((_normal(data["prompt"]), task_id, option))
    return tuple(index)


def task_for_prompt(prompt: str) -> str | None:
    """The id (``set/name``) of the task whose prompt ``prompt`` is, or None."""
    wanted = _normal(prompt)
    matches = [task for text, task, _ in prompt_index() if text and text in wanted]
    return matches[0] if len(matches) == 1 else None


@functools.cache
def golden_calls(task_id: str) -> tuple[dict, ...]:
    """The golden's edits as ``{name, arguments}`` tool calls (the task's validation)."""
    from engine.plan import repos
    from envs.coding.validation import derive_validation

    options = [option for _, task, option in prompt_index() if task == task_id]
    if not options:
        raise KeyError(f"stand-in: no task '{task_id}' in {[str(d) for d in config_dirs()]}")
    cfg = to_typed(compose_config([f"task={options[0]}"]))
    task = cfg.task
    if task.validation is not None:
        return tuple(task.validation)
    repo = repos.resolve_repo(task.repo)
    baseline = repos.pin(repo, task.refs.baseline, task_id=task_id, role="baseline")
    golden = repos.pin(repo, task.refs.golden, task_id=task_id, role="golden")
    return tuple(derive_validation(repo, baseline, golden, task.workdir))
