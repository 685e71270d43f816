"""Plug-ins by ``_target_``: the one place a config's class name becomes a class.

Only classes in crucible's own packages are instantiated, plus packages the user names in
``$CRUCIBLE_PLUGIN_PACKAGES`` (colon-separated, e.g. ``myorg.flavors``): a config file must
not be able to make the engine import arbitrary code. Imports happen only when a plug-in is
chosen, so a heavy backend costs nothing to the commands that do not use it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any

from engine.errors import ConfigError

ALLOWED_TARGET_PREFIXES = ("engine.", "envs.", "swe_tasks.")


def allowed_prefixes() -> tuple[str, ...]:
    extra = [
        p.strip().rstrip(".") + "." for p in os.environ.get("CRUCIBLE_PLUGIN_PACKAGES", "").split(":") if p.strip()
    ]
    return (*ALLOWED_TARGET_PREFIXES, *extra)


def plugin_class(target: str, *, where: str) -> type:
    if not target:
        raise ConfigError(f"{where} has no _target_ (the plug-in's class)")
    if not target.startswith(allowed_prefixes()):
        raise ConfigError(
            f"{where}._target_ '{target}' is outside crucible's packages; refusing to instantiate it "
            "(add its package to $CRUCIBLE_PLUGIN_PACKAGES to allow it)"
        )
    module_name, _, name = target.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), name) if module_name else None
    except Exception as exc:  # a broken plug-in module is the user's: one line, whatever it raised
        raise ConfigError(f"{where}._target_ '{target}' cannot be imported: {str(exc).splitlines()[0]}") from exc
    if not isinstance(found, type):
        raise ConfigError(f"{where}._target_ '{target}' cannot be imported: it names no class")
    return found


def explainer_class(target: str) -> type:
    """What ``crucible show`` builds to explain a flavor's raw grade: the class its package names
    in ``EXPLAINERS`` (flavor class name -> ``_target_`` of a class constructed as the flavor is,
    with the flavor's ``explain``), else the flavor class itself. A flavor module that is slow
    to import (the coding flavor loads its whole grader) so costs ``show`` nothing."""
    module_name = target.rpartition(".")[0]
    package, _, _ = module_name.rpartition(".")
    if package and target.startswith(allowed_prefixes()):  # nothing outside them is imported
        try:
            named = getattr(importlib.import_module(package), "EXPLAINERS", {}).get(target.rpartition(".")[2])
        except Exception:  # a broken package: plugin_class below says so
            named = None
        if isinstance(named, str):
            return plugin_class(named, where="flavor explainer")
    return plugin_class(target, where="flavor")


def flavor_class(target: str) -> type[Any]:
    """The flavor class ``target`` names, checked for what the engine reads off it."""
    cls = plugin_class(target, where="flavor")
    schema = getattr(cls, "task_schema", None)
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        raise ConfigError(f"flavor {target} declares no task_schema dataclass")
    return cls


def instantiate(part: Any, *, where: str, **extra: Any) -> Any:
    """Build a plug-in from its typed config part (a dataclass with ``_target_``): every other
    field becomes a keyword argument, then ``extra``."""
    cls = plugin_class(getattr(part, "_target_", ""), where=where)
    kwargs = {f.name: getattr(part, f.name) for f in dataclasses.fields(part) if f.name != "_target_"}
    return cls(**kwargs, **extra)
