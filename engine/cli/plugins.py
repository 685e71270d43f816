"""Commands that plug-in packages add: ``conf/command/<name>.yaml`` names a class by
``_target_`` (crucible's packages, or ``$CRUCIBLE_PLUGIN_PACKAGES``) whose ``run(argv) -> int``
is ``crucible <name> ...``; its ``help`` line joins the usage. The engine knows no command of
a flavor's by name (``crucible swe eval`` is swe_tasks')."""
from __future__ import annotations

from engine.errors import ConfigError


def commands() -> dict[str, str]:
    """Plug-in command name -> its help line."""
    from engine.config.compose import group_options, option_file

    found = {}
    for name in group_options("command"):
        path = option_file("command", name)
        if path is not None:
            found[name] = str(_load(path).get("help", ""))
    return found


def _load(path) -> dict:
    from omegaconf import OmegaConf

    data = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a command is a mapping with _target_")
    return data


def run_command(name: str, argv: list[str]) -> int | None:
    """Run plug-in command ``name``; None when there is no such command."""
    from engine.config.compose import option_file
    from engine.config.plugins import plugin_class

    path = option_file("command", name)
    if path is None:
        return None
    target = _load(path).get("_target_")
    cls = plugin_class(str(target or ""), where=f"command {name} ({path})")
    runner = getattr(cls(), "run", None)
    if not callable(runner):
        raise ConfigError(f"command {name}: {target} has no run(argv) method")
    return int(runner(argv) or 0)
