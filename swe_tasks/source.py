"""The task source for SWE-bench Pro (``engine.config.sources``): one task option per row.

``conf/task/<set>/_source.yaml`` names this class and a dataset; the options are the rows'
instance ids, narrowed by ``instances`` (globs over ids), ``repos`` and ``languages``, so a
task set is a selection with no YAML file per instance.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.util import paths
from engine.util.inputs import note_file
from swe_tasks import rows
from swe_tasks.schema import DEFAULT_REGISTRY

FLAVOR = "swebench_pro"


class SwebenchProSource:
    def __init__(
        self,
        dataset: str = "",
        assets: str = "",
        registry: str = DEFAULT_REGISTRY,
        base_images: str = "",
        instances: Sequence[str] = (),
        repos: Sequence[str] = (),
        languages: Sequence[str] = (),
    ) -> None:
        self.dataset = Path(dataset).expanduser() if dataset else None
        self.assets = os.path.abspath(os.path.expanduser(assets)) if assets else ""
        self.registry = registry
        self.base_images = Path(base_images).expanduser() if base_images else None
        self.instances, self.repos, self.languages = list(instances), list(repos), list(languages)

    def fingerprint(self) -> str:
        """The dataset's and the base-image mapping's content hashes (no dataset: none)."""
        if self.dataset is None:
            return "no dataset"
        parts = [file_sha256(self.dataset, "dataset")]
        if self.base_images is not None:
            parts.append(file_sha256(self.base_images, "base_images mapping"))
        return ":".join(parts)

    def options(self, set_name: str) -> Mapping[str, Mapping[str, Any]]:
        if self.dataset is None:
            return {}
        if not self.assets:
            raise ConfigError(
                f"task source {set_name}: no assets (a checkout of the benchmark's repository) configured"
            )
        mapping = self._mapping()
        chosen = {}
        for row in rows.read_rows(self.dataset):
            if self._selected(row.fields):
                chosen[row.instance_id] = self._option(set_name, row.fields, mapping.get(row.instance_id, ""))
        return chosen

    def missing(self, set_name: str, name: str) -> tuple[str, list[str]]:
        """Why ``name`` (an instance id, or a glob of ids) is not among the set's options, and
        the arguments that would change it (``engine.config.sources.why_missing``)."""
        if self.dataset is None:
            return "has no dataset", ["dataset"]
        found = [row for row in rows.read_rows(self.dataset) if fnmatch.fnmatchcase(row.instance_id, name)]
        if not found:
            return f"finds no instance {name} in the dataset {self.dataset}", ["dataset"]
        return (
            f"selects no instance {name} of the dataset {self.dataset} (by its instances, repos and languages)",
            ["instances", "repos", "languages"],
        )

    def _selected(self, fields: Mapping[str, Any]) -> bool:
        iid = fields["instance_id"]
        return (
            (not self.instances or any(fnmatch.fnmatchcase(iid, p) for p in self.instances))
            and (not self.repos or any(fnmatch.fnmatchcase(fields["repo"], p) for p in self.repos))
            and (not self.languages or fields["repo_language"].lower() in {x.lower() for x in self.languages})
        )

    def _option(self, set_name: str, fields: dict[str, Any], base_image: str) -> dict[str, Any]:
        # Every text is encoded (rows.encode_text): the flavor decodes it when it plans the task.
        return {
            "defaults": [{"override /flavor@_global_.flavor": FLAVOR}, "_self_"],
            "name": fields["instance_id"],
            "set": set_name,
            **rows.encode_text(
                {
                    "prompt": rows.prompt(fields),
                    **fields,
                    "assets": self.assets,
                    "registry": self.registry,
                    "base_image": base_image,
                }
            ),
        }

    def _mapping(self) -> dict[str, str]:
        """``instance_id -> image`` from a JSON object file (the offline stand-ins)."""
        if self.base_images is None:
            return {}
        try:
            data = json.loads(self.base_images.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"base_images mapping {self.base_images}: {exc}") from exc
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ConfigError(f"base_images mapping {self.base_images}: not an object of instance id -> image")
        return data


def file_sha256(path: Path, what: str) -> str:
    """A file's sha256, remembered by its stat (size, mtime, inode) under the cache: composing
    a config hashes a large dataset once, not every time."""
    note_file(path)  # an input of what is answered, though the memo below may spare reading it
    try:
        st = path.stat()
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc.strerror}") from exc
    key = hashlib.sha256(f"{os.path.abspath(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}".encode()).hexdigest()[
        :32
    ]
    memo = paths.cache_dir() / "file-sha256" / key
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(digest.hexdigest())
    tmp.replace(memo)
    return digest.hexdigest()
