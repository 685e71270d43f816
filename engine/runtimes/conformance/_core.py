"""What every check builds on: how it fails, what it runs against, and the registry."""

from __future__ import annotations

import asyncio
import importlib
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Protocol, TypeVar

from engine.interfaces import Runtime, Workspace

# -- the capabilities a runtime's probe may have (a check's ``needs``) -------------------------


LEFTOVERS = "leftovers"
"""The probe can name what still exists of a run outside its workspaces (containers, dirs, sandboxes)."""
DOCKER_CONTAINER = "docker_container"
"""The workspace is a Docker container (``ws.container_id``, ``ws.client``: its engine's SDK client)."""
EXEC_BACKSTOP = "exec_backstop"
"""``exec``'s deadline has a host-side backstop past ``ws.backstop_grace`` seconds."""


# -- how a check fails -------------------------------------------------------------------------


class ConformanceFailure(AssertionError):
    """A workspace broke its contract; the message says how."""


def expect(condition: object, message: str) -> None:
    if not condition:
        raise ConformanceFailure(message)


class _Raises:
    """``with raises(FileNotFoundError, "read_file of a missing path"):`` (not stripped by -O)."""

    def __init__(self, kind: type[BaseException], what: str) -> None:
        self.kind, self.what = kind, what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if exc_type is None:
            raise ConformanceFailure(f"{self.what}: expected {self.kind.__name__}, nothing was raised")
        if issubclass(exc_type, self.kind):
            return True
        raise ConformanceFailure(f"{self.what}: expected {self.kind.__name__}, got {exc_type.__name__}: {exc}") from exc


raises = _Raises


# -- what a check runs against -----------------------------------------------------------------


class Probe(Protocol):
    """A runtime's view from outside its workspaces, for the checks that need one."""

    capabilities: frozenset[str]

    def leftovers(self, run_id: str) -> list[str]:
        """Whatever of ``run_id``'s workspaces still exists (empty once all are destroyed)."""

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        """Variables a command may see beyond its env (an image's declared ENV, the shell's PWD)."""


class BlindProbe:
    """For a runtime without a conformance module: no capabilities, only PWD beyond the env."""

    capabilities: frozenset[str] = frozenset()

    def leftovers(self, run_id: str) -> list[str]:
        raise ConformanceFailure("this runtime's probe cannot see leftovers")

    async def baseline_env_names(self, ws: Workspace) -> set[str]:
        return {"PWD"}


def probe_for(runtime: Runtime) -> Probe:
    """The runtime's own probe (``runtime.conformance_probe()``, else ``probe(runtime)`` in the
    ``conformance`` module beside the runtime's, inside engine.runtimes), or a ``BlindProbe``."""
    own = getattr(runtime, "conformance_probe", None)
    if callable(own):
        own_probe: Probe = own()
        return own_probe
    package = type(runtime).__module__.rpartition(".")[0]
    if not package.startswith("engine.runtimes."):
        return BlindProbe()
    try:
        module = importlib.import_module(f"{package}.conformance")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.conformance":
            raise
        return BlindProbe()
    found: Probe = module.probe(runtime)
    return found


@dataclass
class Target:
    """A runtime, an image it provisions from, and its probe."""

    runtime: Runtime
    image: object
    probe: Probe
    purpose: str = "conformance"

    def provision(self, run_id: str | None = None, *, network: bool = False, bridge: str | None = None) -> Workspace:
        # image: an ImageRef or a bare tag; each runtime checks what it takes.
        return self.runtime.provision(
            self.image,  # type: ignore[arg-type]
            run_id=run_id or fresh_run_id(),
            network=network,
            purpose=self.purpose,
            bridge=bridge,
        )

    async def leftovers(self, run_id: str) -> list[str]:
        return await asyncio.to_thread(self.probe.leftovers, run_id)


def fresh_run_id() -> str:
    return f"conformance-{uuid.uuid4().hex[:8]}"


# -- the registry ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    func: Callable[..., Awaitable[None]]
    fresh: bool = False
    """Gets the ``Target`` and provisions its own workspaces (else: the shared workspace)."""
    needs: frozenset[str] = frozenset()
    uses_probe: bool = False
    kwargs: Mapping[str, object] = field(default_factory=dict)

    @property
    def doc(self) -> str:
        return (self.func.__doc__ or self.name.replace("_", " ")).strip().splitlines()[0]

    def missing(self, probe: Probe) -> frozenset[str]:
        return self.needs - probe.capabilities

    async def run(self, target: Target, shared: Workspace | None) -> None:
        kwargs = {**self.kwargs, **({"probe": target.probe} if self.uses_probe else {})}
        if self.fresh:
            return await self.func(target, **kwargs)
        if shared is None:
            raise ConformanceFailure("no shared workspace to run on (provisioning it failed)")
        return await self.func(shared, **kwargs)


CHECKS: list[Check] = []

CheckFunc = TypeVar("CheckFunc", bound=Callable[..., Awaitable[None]])


def check(
    *,
    fresh: bool = False,
    needs: tuple[str, ...] = (),
    uses_probe: bool = False,
    variants: Mapping[str, Mapping[str, object]] | None = None,
) -> Callable[[CheckFunc], CheckFunc]:
    """Register ``check_<name>`` (once per variant, as ``<name>-<variant>``)."""

    def register(func: CheckFunc) -> CheckFunc:

        name = func.__name__.removeprefix("check_")
        for suffix, kwargs in (variants or {"": {}}).items():
            CHECKS.append(
                Check(f"{name}-{suffix}" if suffix else name, func, fresh, frozenset(needs), uses_probe, dict(kwargs))
            )
        return func

    return register
