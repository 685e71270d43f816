"""Workspace runtimes: where a run's commands execute.

Each runtime is a class implementing ``engine.interfaces.Runtime``, chosen by the
``runtime`` config group through its ``_target_`` (``conf/runtime/docker.yaml`` ->
``engine.runtimes.docker.runtime.DockerRuntime``). A new runtime is a new module here plus a
config file; nothing in the engine switches on runtime names.
"""
from __future__ import annotations

from typing import Any

from engine.errors import ConfigError
from engine.interfaces import Runtime

_PACKAGE = "engine.runtimes."


def build_runtime(cfg: Any) -> Runtime:
    """Instantiate the runtime a ``runtime`` config node (mapping, DictConfig or dataclass) names.

    Only targets inside ``engine.runtimes`` are instantiated: a config file must not be
    able to make the engine call arbitrary code. Raises ``ConfigError`` in one line.
    """
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    node = OmegaConf.structured(cfg) if not OmegaConf.is_config(cfg) else cfg
    target = OmegaConf.select(node, "_target_", default=None)
    if not isinstance(target, str) or not target.startswith(_PACKAGE):
        raise ConfigError(f"runtime._target_ must name a class in {_PACKAGE}*, got {target!r}")
    try:
        runtime = instantiate(node, _convert_="all")
    except InstantiationException as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"cannot make runtime {target}: {reason}") from exc
    if not callable(getattr(runtime, "provision", None)):
        raise ConfigError(f"{target} is not a Runtime (it has no provision())")
    return runtime


__all__ = ["build_runtime"]
