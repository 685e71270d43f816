"""The task source for Harbor datasets (``engine.config.sources``): one option per task folder.

``conf/task/harbor/<dataset>/_source.yaml`` names this class and a directory of Harbor task
folders; ``task=harbor/<dataset>/<folder>`` and ``task='glob(harbor/<dataset>/*)'`` then select
them with no YAML per task. An option carries only where its folder is: the flavor reads the
folder itself when it plans (its instruction, settings and content hashes), so a changed test is
a new spec at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from envs.harbor import folder

FLAVOR = "harbor"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HarborSource:
    def __init__(self, path: str = "", base_image: str = "auto") -> None:
        self.path = Path(path).expanduser().resolve() if path else None
        self.base_image = base_image

    def fingerprint(self) -> str:
        """The folders' names (the options are a function of them and of the arguments alone)."""
        return hashlib.sha256("\0".join(self._names()).encode()).hexdigest() if self.path else "no dataset"

    def options(self, set_name: str) -> Mapping[str, Mapping[str, Any]]:
        if self.path is None:
            return {}
        return {
            name: {
                "defaults": [{"override /flavor@_global_.flavor": FLAVOR}, "_self_"],
                "name": name,
                "set": set_name,
                "prompt": "",
                "path": str(self.path / name),
                "base_image": self.base_image,
            }
            for name in self._names()
        }

    def missing(self, set_name: str, name: str) -> tuple[str, list[str]]:
        if self.path is None:
            return "has no dataset directory", ["path"]
        return f"finds no Harbor task folder {name} (with a task.toml) under {self.path}", ["path"]

    def _names(self) -> list[str]:
        if self.path is None:
            return []
        if not self.path.is_dir():
            raise ConfigError(f"harbor dataset {self.path} is not a directory")
        names = sorted(p.name for p in self.path.iterdir() if folder.is_task(p))
        odd = [n for n in names if not _NAME.match(n) or n.startswith("base_")]
        if odd:
            raise ConfigError(
                f"harbor dataset {self.path}: task folder name {odd[0]!r} cannot be a task name "
                "(letters, digits, '.', '_', '-'; not starting with base_)"
            )
        return names
