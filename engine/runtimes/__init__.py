"""Workspace runtimes: where a run's commands execute.

Each runtime is a class implementing ``engine.interfaces.Runtime``, chosen by the
``runtime`` config group through its ``_target_`` (``conf/runtime/docker.yaml`` ->
``engine.runtimes.docker.runtime.DockerRuntime``). A new runtime is a new module here plus a
config file; nothing in the engine switches on runtime names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from engine.errors import ConfigError

if TYPE_CHECKING:  # the interfaces (and every model) are not imported by a read command's housekeeping
    from engine.interfaces import Runtime

_PACKAGE = "engine.runtimes."


def build_runtime(cfg: Any) -> Runtime:
    """Instantiate the runtime a ``runtime`` config node (mapping, DictConfig or dataclass) names.

    Only targets inside ``engine.runtimes`` are instantiated: a config file must not be
    able to make the engine call arbitrary code. Raises ``ConfigError`` in one line.
    """
    from omegaconf import OmegaConf

    from engine.config.plugins import plugin_class

    node = OmegaConf.structured(cfg) if not OmegaConf.is_config(cfg) else cfg
    target = OmegaConf.select(node, "_target_", default=None)
    if not isinstance(target, str) or not target.startswith(_PACKAGE):
        raise ConfigError(f"runtime._target_ must name a class in {_PACKAGE}*, got {target!r}")
    data = OmegaConf.to_container(node, resolve=True)
    assert isinstance(data, dict)  # a runtime node is a mapping: it has a _target_
    kwargs = {str(k): v for k, v in data.items() if k != "_target_"}
    cls = plugin_class(target, where="runtime")
    try:
        runtime = cls(**kwargs)
    except (TypeError, ValueError) as exc:  # a key the class does not take, a value it refuses
        raise ConfigError(f"cannot make runtime {target}: {' '.join(str(exc).split())}") from exc
    if not callable(getattr(runtime, "provision", None)):
        raise ConfigError(f"{target} is not a Runtime (it has no provision())")
    return cast("Runtime", runtime)  # a class of ours with provision(), checked above


__all__ = ["build_runtime"]
