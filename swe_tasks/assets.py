"""The official per-instance assets, read from a local checkout of the benchmark's repository
(never copied into crucible): ``run_scripts/<id>/run_script.sh``, ``run_scripts/<id>/parser.py``
and the ``ENV`` lines of ``dockerfiles/{base,instance}_dockerfile/<id>/Dockerfile``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ConfigError

FILES = {
    "run_script": "run_scripts/{id}/run_script.sh",
    "parser": "run_scripts/{id}/parser.py",
    "base_dockerfile": "dockerfiles/base_dockerfile/{id}/Dockerfile",
    "instance_dockerfile": "dockerfiles/instance_dockerfile/{id}/Dockerfile",
}


@dataclass(frozen=True)
class Assets:
    run_script: bytes
    parser: bytes
    env_lines: tuple[str, ...]
    """Each ``ENV`` line of the two Dockerfiles turned into an ``export`` line, in order, as
    the official evaluator does."""

    def pins(self) -> dict[str, str]:
        return {
            "run_script_sha256": _sha(self.run_script),
            "parser_sha256": _sha(self.parser),
            "env_sha256": _sha("\n".join(self.env_lines).encode()),
        }


def read_assets(root: str, instance_id: str, error: type[Exception] = ConfigError) -> Assets:
    """The instance's assets; ``error`` (one line naming the instance and the file) if any is missing."""
    found: dict[str, bytes] = {}
    for key, pattern in FILES.items():
        rel = pattern.format(id=instance_id)
        try:
            found[key] = (Path(root) / rel).read_bytes()
        except OSError as exc:
            raise error(
                f"instance {instance_id}: official asset {rel} missing under {root} "
                f"({exc.strerror or type(exc).__name__})"
            ) from exc
    return Assets(
        found["run_script"],
        found["parser"],
        tuple(env_exports(found["base_dockerfile"]) + env_exports(found["instance_dockerfile"])),
    )


def env_exports(dockerfile: bytes) -> list[str]:
    """``ENV`` lines as ``export`` lines: each stripped line starting with ``ENV``, its first
    ``ENV`` replaced (what the official evaluator does, continuation lines and all)."""
    lines = []
    for line in dockerfile.decode("utf-8", "replace").split("\n"):
        line = line.strip()
        if line.startswith("ENV"):
            lines.append(line.replace("ENV", "export", 1))
    return lines


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
