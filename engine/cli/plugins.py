"""Commands that plug-in packages add: ``conf/command/<name>.yaml`` names a class by
``_target_`` (crucible's packages, or ``$CRUCIBLE_PLUGIN_PACKAGES``) whose ``run(argv) -> int``
is ``crucible <name> ...``; its ``help`` line (the usage, then the description after three
spaces or more) joins ``crucible --help``, read from the file alone: the engine knows no command
of a flavor's by name (``crucible swe eval`` is swe_tasks') and imports none to list them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.errors import ConfigError


def commands() -> dict[str, str]:
    """Plug-in command name -> its help line."""
    return {name: str(_load(path).get("help", "")) for name, path in sorted(_command_files().items())}


def _command_files() -> dict[str, Path]:
    """Each command's file, the first on the config path winning (as ``option_file`` picks).
    Commands are written files, never a task source's options: none is run to find them."""
    from engine.config.tree import written_config_dirs

    found: dict[str, Path] = {}
    for root in written_config_dirs():
        base = root / "command"
        if base.is_dir():
            for path in sorted(base.glob("*.yaml")):
                if not path.stem.startswith(("_", "base_")):
                    found.setdefault(path.stem, path)
    return found


def _load(path: Path) -> dict[Any, Any]:  # a YAML mapping: its keys are whatever the file says

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = OmegaConf.to_container(OmegaConf.load(path))
    except (OmegaConfBaseException, OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a command is a mapping with _target_")
    return data


def run_command(name: str, argv: list[str]) -> int | None:
    """Run plug-in command ``name``; None when there is no such command."""
    from engine.config.plugins import plugin_class

    path = _command_files().get(name)
    if path is None:
        return None
    target = _load(path).get("_target_")
    cls = plugin_class(str(target or ""), where=f"command {name} ({path})")
    runner = getattr(cls(), "run", None)
    if not callable(runner):
        raise ConfigError(f"command {name}: {target} has no run(argv) method")
    return int(runner(argv) or 0)
