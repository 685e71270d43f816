"""Modules a dependency imports at its own import but uses, if ever, much later: a stand-in
takes the name in ``sys.modules`` and imports the real module on the first attribute read.

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
import importlib.util
import sys
import threading
import types
from typing import Any

DEFERRED = ("paramiko",)
_lock = threading.Lock()


class DeferredModule(types.ModuleType):
    """Stands in for a module until an attribute of it is read; then it is the real one, both
    in ``sys.modules`` and through every reference to the stand-in."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._real(), attr)

    def _real(self) -> types.ModuleType:
        with _lock:
            real = self.__dict__.get("_deferred_real")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = self.__dict__["_deferred_real"] = importlib.import_module(self.__name__)
        return real


def defer(name: str) -> None:
    """Make ``import name`` cost nothing until an attribute of the module is read. A module
    already imported, or not installed, is left as it is."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None:
        return
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec  # what the import statement reads (not yet initializing: done)
    sys.modules[name] = stand_in


def defer_all() -> None:
    for name in DEFERRED:
        defer(name)
