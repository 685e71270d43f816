"""The conf/ tree: the config dirs, the options of each group, and the task sets.

What exists is read from the files alone (no Hydra, no task source run where it can be
helped), so listing options, hints and help cost nothing; composing (``engine.config.compose``)
and its one-line errors (``engine.config.describe``) build on it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from engine.errors import ConfigError
from engine.util import paths

CONF_DIR = paths.PROJECT_ROOT / "conf"
GROUPS = ("env", "flavor", "agent", "integrity", "runtime", "task")
_ENV_REF = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)")


def env_variables(text: str) -> set[str]:
    """The environment variables a config file reads (``${oc.env:NAME...}``): an input of
    whatever is composed from it, besides its bytes."""
    return set(_ENV_REF.findall(text))


def config_dirs() -> list[Path]:
    """conf/ first, then extra dirs from $CRUCIBLE_CONFIG_PATH (colon-separated), then the
    dirs holding the options of their task sources (``engine.config.sources``)."""
    from engine.config.sources import generated_dirs

    written = written_config_dirs()
    return [*written, *generated_dirs(written)]


def written_config_dirs() -> list[Path]:
    """conf/ and the dirs of $CRUCIBLE_CONFIG_PATH: the config files as written, no task source
    run (what lists plug-in commands needs, so ``--help`` loads no flavor's source)."""
    return [CONF_DIR, *(Path(p) for p in os.environ.get("CRUCIBLE_CONFIG_PATH", "").split(":") if p)]


def searchpath_override() -> list[str]:
    extra = config_dirs()[1:]
    if not extra:
        return []
    return ["hydra.searchpath=[" + ",".join(f"file://{p.resolve()}" for p in extra) + "]"]


def group_options(group: str, roots: list[Path] | None = None) -> list[str]:
    """Every option of a group, nested folders included (``sample/a``); schemas excluded.
    ``roots``: the config dirs to look in (default ``config_dirs()``, task sources run)."""
    found: set[str] = set()
    for root in config_dirs() if roots is None else roots:
        base = root / group
        if base.is_dir():
            for path in base.rglob("*.yaml"):
                option = path.relative_to(base).with_suffix("").as_posix()
                if not any(part.startswith(("_", "base_")) for part in option.split("/")):
                    found.add(option)
    return sorted(found)


def task_sets() -> list[str]:
    """The task sets (``sample``, ``sdlc/hard``): folders under ``task/`` of the config dirs as
    written that hold a task file or a task source's ``_source.yaml``. No source is run, so
    help and hints cost nothing and a source whose dataset is unset is still listed."""
    from engine.config.sources import SOURCE_FILE

    found: set[str] = set()
    for root in written_config_dirs():
        base = root / "task"
        for path in base.rglob("*.yaml") if base.is_dir() else []:
            folder = path.parent.relative_to(base).as_posix()
            hidden = path.stem.startswith(("_", "base_")) and path.name != SOURCE_FILE
            if folder != "." and not hidden and not any(p.startswith(("_", "base_")) for p in folder.split("/")):
                found.add(folder)
    return sorted(found)


def no_task_selected() -> ConfigError:
    """What every command that needs a task says without one: how to choose one, and the sets."""
    sets = ", ".join(task_sets()) or "(none: add a folder of task YAMLs under conf/task/)"
    return ConfigError(f"no task selected: add task=SET/NAME, or task='glob(SET/*)' for a whole set; task sets: {sets}")


def option_file(group: str, option: str) -> Path | None:
    for root in config_dirs():
        candidate = root / group / f"{option}.yaml"
        if candidate.is_file():
            return candidate
    return None
