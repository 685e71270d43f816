"""The engine's version as a content hash of the code a verdict depends on.

Planning stamps it into every spec (``engine_version``), and config evaluation keys its cache
by it (a changed schema is a new evaluation), so it sits below both, in the shared base.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from engine.util import paths
from engine.util.inputs import note_files

DOCKERFILE = paths.PROJECT_ROOT / "Dockerfile.hud"
"""The single image definition: hashed with the code, and what a task image builds from."""

CODE_PACKAGES = ("engine", "envs", "swe_tasks")


def engine_version(*plugins: str) -> str:
    """A content hash of the code a verdict depends on: the engine's and the environments'
    packages, every file of them (the shell scripts that run in workspaces and the verdict's
    own scripts too, not only the Python), the image definition, and the package of each
    plug-in target in ``plugins`` that lives elsewhere (a flavor in tests/ or a user's package):
    a change to any of them is a new spec, never a stale cached verdict."""
    roots = {*CODE_PACKAGES, *(_package_of(target) for target in plugins)}
    digest, files = _content_hash(tuple(sorted(r for r in roots if r)))
    note_files(files)  # wherever they live (a plug-in installed as a package too), even when remembered
    return digest


def _package_of(target: str) -> str:
    """The top-level package of a ``_target_`` (``tests.toy_flavor.flavor.ToyFlavor`` -> the
    directory of ``tests.toy_flavor``, as a path relative to the project or absolute)."""
    import importlib.util

    module = target.rsplit(".", 1)[0]
    parts = module.split(".")
    if parts[0] in CODE_PACKAGES:
        return ""
    for depth in range(len(parts) - 1, 0, -1):  # the deepest package above the module
        try:
            spec = importlib.util.find_spec(".".join(parts[:depth]))
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            return str(Path(list(spec.submodule_search_locations)[0]).resolve())
    found = importlib.util.find_spec(module) if module else None
    return str(Path(found.origin).resolve()) if found is not None and found.origin else ""


@functools.lru_cache(maxsize=16)
def _content_hash(roots: tuple[str, ...]) -> tuple[str, tuple[Path, ...]]:
    digest = hashlib.sha256()
    files = {DOCKERFILE}
    for root in roots:
        base = Path(root) if Path(root).is_absolute() else paths.PROJECT_ROOT / root
        found = [base] if base.is_file() else base.rglob("*")
        files |= {p for p in found if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    for path in sorted(files):
        name = path.relative_to(paths.PROJECT_ROOT) if path.is_relative_to(paths.PROJECT_ROOT) else path
        digest.update(str(name).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16], tuple(sorted(files))
