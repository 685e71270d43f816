"""Modules a dependency imports at its own import but uses, if ever, much later: a stand-in
takes the name in ``sys.modules`` and imports the real module on the first attribute read
(``DEFERRED`` lists them; httpx's command-line client is the other).

``paramiko``: the Docker SDK imports it with its transports for ``ssh://`` hosts reached
through paramiko, which costs every command that talks to Docker ~0.09 s and ~19 MB (with
``cryptography``; measured here: ``import docker`` 0.17 s / 47 MB peak, 0.08 s / 28 MB without
it). crucible never takes that path: its ``ssh://`` hosts go through the OpenSSH client
(``use_ssh_client=True``, engine/runtimes/docker/placement.py), where the SDK never touches
paramiko. Anything that does use it gets the real module, loaded then.

The standard library's ``importlib.util.LazyLoader`` cannot do this on Python 3.11: a second
``import paramiko`` statement reads the module's ``__spec__``, which loads it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import types
from typing import Any

DEFERRED: dict[str, tuple[str, ...]] = {
    "paramiko": (),
    # httpx imports its command-line client (``httpx._main``: click, rich's console, pygments;
    # ~0.08 s of CPU) at its own import, ``from ._main import main``, whatever uses httpx (the
    # MCP SDK): its ``main`` stands in, the client loading when it is called.
    "httpx._main": ("main",),
    # httpcore imports trio (~0.07 s of CPU; installed beside selenium) to learn whether it is
    # there, and reads it only when running under trio: crucible's event loop is asyncio.
    "trio": (),
}
"""Module -> the callables a ``from module import name`` reads at its importer's import
(a stand-in forwards each call to the real one, loaded then)."""
_lock = threading.Lock()


class DeferredModule(types.ModuleType):
    """Stands in for a module until an attribute of it is read; then it is the real one, both
    in ``sys.modules`` and through every reference to the stand-in."""

    def __getattr__(self, attr: str) -> Any:
        if attr == "__path__" and self.__spec__ is not None and self.__spec__.submodule_search_locations is None:
            # What ``from module import name`` asks first: a plain module has none (no load).
            raise AttributeError(attr)
        return getattr(self._real(), attr)

    def _real(self) -> types.ModuleType:
        with _lock:
            real = self.__dict__.get("_deferred_real")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = self.__dict__["_deferred_real"] = importlib.import_module(self.__name__)
        return real


def defer(name: str, callables: tuple[str, ...] = ()) -> None:
    """Make ``import name`` cost nothing until an attribute of the module is read (or one of
    ``callables`` called). A module already imported, or not installed, is left as it is."""
    if name in sys.modules:
        return
    parent, _, _ = name.rpartition(".")
    if parent and parent in sys.modules:
        return  # its package was imported first, and with it (perhaps) the module
    spec = importlib.util.find_spec(parent) if parent else importlib.util.find_spec(name)
    if spec is None:
        return
    if parent:  # without importing the package (find_spec of a submodule would)
        search = spec.submodule_search_locations or []
        spec = importlib.machinery.PathFinder.find_spec(name, list(search))
        if spec is None:
            return
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec  # what the import statement reads (not yet initializing: done)
    for attr in callables:
        setattr(stand_in, attr, _forwarder(stand_in, attr))
    sys.modules[name] = stand_in


def _forwarder(stand_in: DeferredModule, attr: str) -> Any:
    def forward(*args: Any, **kwargs: Any) -> Any:
        return getattr(stand_in._real(), attr)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = attr
    return forward


def defer_all() -> None:
    for name, callables in DEFERRED.items():
        defer(name, callables)
