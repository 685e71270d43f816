"""Config errors as one line: what was wrong and where (the key, the file, the override).

Hydra's and OmegaConf's messages run to several lines and name internals; PyYAML's name a
column from 0. Composing (``engine.config.compose``) turns each into one line from here.
"""

from __future__ import annotations

import re

import yaml

from engine.config.tree import GROUPS, group_options, no_task_selected, option_file


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def yaml_error(exc: yaml.YAMLError) -> str:
    """PyYAML's multi-line error as one line: the file, line and column (1-based, as editors
    count) where the parser gave up, what it found, and where the construct it was reading
    began (an unclosed bracket's line) when that is elsewhere."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return f"YAML error: {first_line(exc)}"
    problem = getattr(exc, "problem", None) or "YAML syntax error"
    text = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}: YAML syntax error: {problem}"
    context, begun = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and begun is not None and (begun.line, begun.column) != (mark.line, mark.column):
        text += f" ({context} from line {begun.line + 1}, column {begun.column + 1})"
    if "'\\t'" in problem:
        text += "; YAML indents with spaces, never tabs"
    return text


def describe(exc: BaseException, overrides: list[str]) -> str:
    """One line that says what was wrong and where (key, file, override)."""
    chain: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and len(chain) < 6:
        chain.append(node)
        node = node.__cause__ or node.__context__
    text = " | ".join(str(e) for e in chain)
    full_key = re.search(r"full_key:\s*(\S+)", text)
    if m := re.search(r"You must specify '(\w+)'", text):
        if m.group(1) == "task":
            return str(no_task_selected())
        return f"no {m.group(1)} selected: add {m.group(1)}=<option> (e.g. {m.group(1)}={(group_options(m.group(1)) or ['...'])[0]})"
    if m := re.search(r"In '([^']+)': Could not load 'task/base_task'", text):
        # Task YAMLs written before the flavors carried the task schemas began with
        # `defaults: [/task/base_task@_here_, _self_]`; that config is gone, its job done by the flavor.
        task_file = option_file(*m.group(1).split("/", 1)) if "/" in m.group(1) else None
        return (
            f"{task_file or m.group(1)}: its defaults list (/task/base_task@_here_) is from an earlier crucible "
            "and no longer needed: delete it (a task's schema now comes from its flavor)"
        )
    if m := re.search(r"Could not override '([^']+)'", text):
        return f"unknown config key '{m.group(1)}' (from override '{_override_for(m.group(1), overrides)}')"
    if m := re.search(r"Key '([^']+)' not in '(\w+)'", text) or re.search(r"Key '([^']+)' is not in struct", text):
        where = full_key.group(1) if full_key else m.group(1)
        return f"unknown config key '{where}'{_file_hint(where)}"
    if m := re.search(r"Error merging override (\S+)", text):
        return f"bad value in override '{m.group(1)}': {_leaf_message(chain)}"
    if full_key:
        return f"bad config value at '{full_key.group(1)}'{_file_hint(full_key.group(1))}: {_leaf_message(chain)}"
    return f"config error: {_leaf_message(chain)}"


def _leaf_message(chain: list[BaseException]) -> str:
    return first_line(chain[-1])


def from_override(message: str, overrides: list[str]) -> str:
    """``message``, one line naming a key (``unknown config key 'agent.max_stepz'``), with the
    override that set that key, where one did."""
    named = re.search(r"'([\w.]+)'", message)
    given = _override_for(named.group(1), overrides) if named else ""
    return f"{message} (from override '{given}')" if named and given != named.group(1) else message


def _override_for(key: str, overrides: list[str]) -> str:
    return next((o for o in overrides if o.lstrip("+~").split("=", 1)[0] == key), key)


def _file_hint(full_key: str) -> str:
    group = full_key.split(".", 1)[0]
    if group not in GROUPS:
        return ""
    return f" (in a conf/{group}/ option)"
