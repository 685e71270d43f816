"""One Harbor task folder, read: its ``task.toml`` settings, instruction, environment shape and
the content hashes of the parts a verdict depends on.

Pure reading (no Docker, no config): the source lists folders with it, the flavor plans from it.
Field names follow Harbor's ``task.toml`` (``[agent].timeout_sec``, ``[verifier].timeout_sec``,
``[verifier].env``, ``[environment]`` ``cpus``/``memory_mb``/``memory``/``allow_internet``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
import tarfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

TASK_FILE = "task.toml"
SOLVE = "solve.sh"
"""solution/'s entry point: Harbor's oracle runs it."""
DEFAULT_AGENT_TIMEOUT = 600.0
DEFAULT_VERIFIER_TIMEOUT = 600.0
"""Harbor's defaults for ``[agent]`` and ``[verifier]`` ``timeout_sec``."""

CAPTURES = ("workdir", "container", "live")
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


@dataclass
class HarborFolder:
    """What crucible reads of one task folder."""

    path: Path
    instruction: str
    agent_timeout: float
    verifier_timeout: float
    verifier_env: dict[str, str]
    cpus: float | None
    memory_mb: int | None
    allow_internet: bool
    shape: str
    """``dockerfile``, or ``compose`` (environment/docker-compose.yaml)."""
    sidecars: list[str] = field(default_factory=list)
    """Compose services beside ``main`` (not supported yet: setup refuses them in one line)."""
    workdir: str = ""
    internet_named: bool = False
    """Whether task.toml names ``allow_internet`` (Harbor's default, unnamed, is true: only a
    task that asks for it gets the run's warning when ``strict`` withholds it)."""
    capture: str = "workdir"
    """``[metadata].crucible_capture``: ``workdir`` (the working directory's diff), ``container``
    (also every file changed outside it), ``live`` (the tests need the agent's running container)."""

    @property
    def dockerfile(self) -> Path:
        return self.path / "environment" / "Dockerfile"


def is_task(path: Path) -> bool:
    return path.is_dir() and (path / TASK_FILE).is_file() and not path.name.startswith((".", "_"))


def read(path: Path, error: Callable[[str], Exception] = ConfigError) -> HarborFolder:
    """The folder's settings. Raises ``error`` (one line naming the folder and the file at fault)."""
    where = f"harbor task {path}"
    try:
        settings = tomllib.loads((path / TASK_FILE).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{where}: task.toml cannot be read: {exc}") from exc
    try:
        instruction = (path / "instruction.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{where}: instruction.md cannot be read: {exc}") from exc
    if not (path / "tests" / "test.sh").is_file():
        raise error(f"{where}: tests/test.sh is missing (Harbor's verifier runs it)")
    agent, verifier, env = (_table(settings, k, where, error) for k in ("agent", "verifier", "environment"))
    shape, sidecars = _shape(path, where, error)
    folder = HarborFolder(
        path=path,
        instruction=instruction,
        agent_timeout=_seconds(agent, "agent", DEFAULT_AGENT_TIMEOUT, where, error),
        verifier_timeout=_seconds(verifier, "verifier", DEFAULT_VERIFIER_TIMEOUT, where, error),
        verifier_env={str(k): str(v) for k, v in (verifier.get("env") or {}).items()},
        cpus=float(env["cpus"]) if isinstance(env.get("cpus"), (int, float)) else None,
        memory_mb=_memory_mb(env),
        allow_internet=bool(env.get("allow_internet", True)),
        shape=shape,
        sidecars=sidecars,
    )
    folder.workdir = _workdir(folder)
    folder.internet_named = "allow_internet" in env
    metadata = _table(settings, "metadata", where, error)
    folder.capture = str(metadata.get("crucible_capture", "workdir"))
    if folder.capture not in CAPTURES:
        raise error(
            f"{where}: task.toml's [metadata].crucible_capture must be one of {', '.join(CAPTURES)}, "
            f"got {folder.capture!r}"
        )
    return folder


def _table(settings: dict, key: str, where: str, error: Callable[[str], Exception]) -> dict[str, Any]:
    value = settings.get(key) or {}
    if not isinstance(value, dict):
        raise error(f"{where}: task.toml's [{key}] is not a table")
    return value


def _seconds(table: dict, name: str, default: float, where: str, error: Callable[[str], Exception]) -> float:
    value = table.get("timeout_sec", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise error(f"{where}: task.toml's [{name}].timeout_sec must be a positive number, got {value!r}")
    return float(value)


def _memory_mb(env: dict) -> int | None:
    """``memory_mb``, or the older ``memory = "4G"`` spelling."""
    if isinstance(env.get("memory_mb"), int):
        return int(env["memory_mb"])
    text = str(env.get("memory") or "").strip().upper()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MG])B?", text)
    if not match:
        return None
    return int(float(match.group(1)) * (1024 if match.group(2) == "G" else 1))


def _shape(path: Path, where: str, error: Callable[[str], Exception]) -> tuple[str, list[str]]:
    """``dockerfile`` or ``compose``, and the compose services beside ``main``."""
    for name in ("docker-compose.yaml", "docker-compose.yml"):
        compose = path / "environment" / name
        if compose.is_file():
            import yaml

            try:
                data = yaml.safe_load(compose.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as exc:
                raise error(f"{where}: environment/{name} cannot be read: {exc}") from exc
            services = data.get("services") if isinstance(data, dict) else None
            if not isinstance(services, dict) or "main" not in services:
                raise error(f"{where}: environment/{name} has no `main` service (Harbor's agent container)")
            return "compose", sorted(str(s) for s in services if s != "main")
    return "dockerfile", []


def _workdir(folder: HarborFolder) -> str:
    """The last WORKDIR of environment/Dockerfile: where the agent works and what is captured."""
    try:
        text = folder.dockerfile.read_text(encoding="utf-8")
    except OSError:
        return "/app"
    found = _WORKDIR.findall(text)
    return found[-1].strip("\"'") if found else ""


def digest(path: Path) -> str:
    """sha256 over a folder's files (relative names, modes and contents), in name order."""
    sha = hashlib.sha256()
    if path.is_dir():
        for item in sorted(p for p in path.rglob("*") if p.is_file() or p.is_symlink()):
            rel = item.relative_to(path).as_posix()
            data = str(item.readlink()).encode() if item.is_symlink() else item.read_bytes()
            sha.update(rel.encode() + b"\0" + str(item.lstat().st_mode & 0o111).encode() + b"\0")
            sha.update(hashlib.sha256(data).digest())
    return sha.hexdigest()


def pins(folder: HarborFolder) -> dict[str, str]:
    """What a verdict depends on, by content: the tests, the solution, the environment, the
    instruction. A changed part is a new spec, never a stale verdict."""
    return {
        "tests_sha256": digest(folder.path / "tests"),
        "solution_sha256": digest(folder.path / "solution"),
        "environment_sha256": digest(folder.path / "environment"),
        "instruction_sha256": hashlib.sha256(folder.instruction.encode()).hexdigest(),
    }


def tarball(path: Path) -> bytes:
    """A folder as an uncompressed tar (names relative to it, owned by root, modes kept, no mtimes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for item in sorted(path.rglob("*")):
            info = tar.gettarinfo(str(item), arcname=item.relative_to(path).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0  # the same folder is the same bytes (the oracle's calls are in the spec)
            if item.is_file() and not item.is_symlink():
                with item.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def b64_tarball(path: Path) -> str:
    return base64.b64encode(tarball(path)).decode()
