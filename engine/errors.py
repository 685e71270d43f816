"""Typed errors. Each knows the pipeline phase it belongs to, so a run records where it failed.

``UserError`` and its children are the user's mistakes: the CLI prints them as one line
and exits non-zero, never with a traceback.
"""

from __future__ import annotations


class CrucibleError(Exception):
    phase: str = "engine"


class UserError(CrucibleError):
    """Bad input: a config key, a task id, a SQL typo. One line, exit code 2."""

    exit_code = 2


class ConfigError(UserError):
    phase = "plan"


class EngineUnavailable(UserError):
    """No reachable Docker engine (and none could be started)."""

    phase = "provision"
    exit_code = 3


class PlanError(CrucibleError):
    phase = "plan"


class BuildError(CrucibleError):
    phase = "build"


class BaseImageMissing(BuildError):
    """The image a Dockerfile builds FROM is not here and could not be pulled: the flavor that
    named it may add where such images come from (``ImageInputs.missing_base_hint``)."""


class WorkspaceError(CrucibleError):
    phase = "provision"


class SetupError(CrucibleError):
    phase = "setup"


class AgentError(CrucibleError):
    phase = "agent"


class CaptureError(CrucibleError):
    phase = "capture"


class GradeError(CrucibleError):
    phase = "grade"


class StoreError(CrucibleError):
    phase = "store"


class InfrastructureError(CrucibleError):
    """The machinery failed, not the task and not the agent: a Docker host or engine that went
    away or cannot be reached, a sweep worker that died. A run that ends in one is recorded as
    an ``error`` labelled ``infrastructure`` (``RunRecord.infrastructure``), retried a bounded
    number of times by policy (``retries.infrastructure``) and counted apart, never scored 0.

    ``phase``: where it happened (a run's phase), ``host``: the Docker host or worker it
    happened on, when known."""

    phase = "provision"

    def __init__(self, message: str, *, phase: str | None = None, host: str | None = None) -> None:
        super().__init__(message)
        if phase is not None:
            self.phase = phase
        self.host = host


class IntegrityUnavailable(UserError):
    """The requested integrity mode cannot be had on this runtime; refuse, never weaken."""

    phase = "provision"
