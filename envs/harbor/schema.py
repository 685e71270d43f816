"""The ``harbor`` task schema: where the task folder is, and what planning read from it.

A task option (``envs/harbor/source.py``) sets ``path`` and ``base_image``; ``plan_task`` fills
the rest from the folder (instruction, ``task.toml``, the Dockerfile's WORKDIR), so all of it is
in the run spec and its hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from engine.config.schema import TaskConfig


@dataclass
class HarborTaskConfig(TaskConfig):
    path: str = MISSING
    """The Harbor task folder (absolute)."""
    base_image: str = "auto"
    """What environment/Dockerfile's FROM images become: ``auto`` = crucible's base (the env's,
    ``build.base``, else the offline bootstrapped Debian), ``""`` = the Dockerfile's own (pulled
    if missing), any other value = that image."""
    workdir: str = ""
    """Filled at plan time: the Dockerfile's last WORKDIR (where the agent works, what is captured)."""
    agent_timeout_sec: float = 600.0
    verifier_timeout_sec: float = 600.0
    """``[verifier].timeout_sec``: test.sh's limit at grading."""
    verifier_env: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    allow_internet: bool = True
    capture: str = "workdir"
    """task.toml's ``[metadata].crucible_capture``: ``workdir``, ``container`` or ``live``."""
    shape: str = "dockerfile"
    sidecars: list[str] = field(default_factory=list)
