"""A Harbor task's image inputs: environment/ as the build context, its Dockerfile with the
FROM images mapped (``base_image``) and crucible's tail (``tail.Dockerfile``) appended.

The context is a copy of environment/ under the cache, named by its content, so the builder's
input hash covers the task's files, the Dockerfile as built, the build args and the base's ID:
an unchanged task is a cache hit, with no build sent to the daemon.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from engine.build.images import CA_FILE
from engine.errors import ConfigError
from engine.interfaces import PlanContext
from engine.models import ImageInputs
from envs.harbor import folder as harbor_folder
from envs.harbor.folder import HarborFolder

BASE_ARG = "CRUCIBLE_HARBOR_BASE"
LOCAL_BASE = "host"
"""What ``runtime=local``'s builder builds every template from (``default_base``): no Docker image."""
DOCKERFILE = "Dockerfile.crucible"
_FROM = re.compile(r"^(\s*FROM\s+(?:--\S+\s+)*)(\S+)((?:\s+AS\s+\S+)?\s*)$", re.IGNORECASE | re.MULTILINE)
_TAIL = Path(__file__).with_name("tail.Dockerfile")
_PYTHON_IMAGE = re.compile(r"(?:(?:docker\.io/)?library/)?python(?::[^@\s]*)?(?:@\S+)?", re.IGNORECASE)
PYTHON_SHIM = (
    "RUN set -eu; if ! command -v pip >/dev/null 2>&1; then apt-get update; "
    "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pip "
    "python3-venv python-is-python3 ca-certificates; rm -rf /var/lib/apt/lists/*; fi\n"
    f"COPY {CA_FILE} /etc/crucible/ca.pem\n"
    "RUN [ -s /etc/crucible/ca.pem ] || cp /etc/ssl/certs/ca-certificates.crt /etc/crucible/ca.pem\n"
    "ARG PIP_CERT=/etc/crucible/ca.pem\n"
    "ENV PIP_BREAK_SYSTEM_PACKAGES=1\n"
)
"""After a ``FROM python:*`` mapped onto crucible's base: what the official image has and the
base lacks (python, pip, venv), so the Dockerfile's ``pip install`` steps run as written. The
base's Debian python (3.11 on bookworm) stands for the tag's version; pip may install into it
(Debian marks it externally managed; the official image's python is not). The build's CA bundle
(the builder forwards the host's as ``crucible-ca.pem``) is pip's for this stage's build steps
(an ARG: not in the image), else the system's."""


def inputs(task_folder: HarborFolder, base_image: str, ctx: PlanContext) -> ImageInputs:
    """The image's Dockerfile, context and build args (nothing is built here)."""
    base = ctx.base_image() if base_image == "auto" else base_image
    if base == LOCAL_BASE:
        raise ConfigError(
            f"harbor task {task_folder.path.name}: its image is its own environment/Dockerfile, which "
            "runtime=local (a host directory, no images) cannot build; use runtime=docker"
        )
    text = _dockerfile_text(task_folder, bool(base))
    env_dir = task_folder.path / "environment"
    key = hashlib.sha256(f"{harbor_folder.digest(env_dir)}\0{text}".encode()).hexdigest()[:24]
    context = ctx.cache_dir / "harbor-context" / key
    if not (context / DOCKERFILE).is_file():
        _materialise(context, env_dir, text)
    args = {"CRUCIBLE_WORKDIR": task_folder.workdir, **({BASE_ARG: base} if base else {})}
    hint = (
        f"harbor task {task_folder.path.name}: its Dockerfile's FROM image is not here and no registry "
        "gave it; map it onto a local image with the source's base_image (auto = crucible's base)"
    )
    return ImageInputs(str(context / DOCKERFILE), str(context), args, missing_base_hint=hint)


def _dockerfile_text(task_folder: HarborFolder, mapped: bool, tail: bool = True) -> str:
    """The task's Dockerfile (or a bare one for a compose task without it), FROM mapped, tail on
    (``tail=False``: without it, as bench/bench_harbor.py's bare ``docker build`` builds it)."""
    try:
        own = task_folder.dockerfile.read_text(encoding="utf-8")
    except OSError:
        own = "FROM scratch-replaced-by-base\n"  # a compose task with no Dockerfile: setup refuses it
        mapped = True
    if mapped:
        stages: set[str] = set()

        def swap(match: re.Match) -> str:
            image, rest = match.group(2), match.group(3)
            alias = rest.split()[-1] if rest.strip() else ""
            result = match.group(0) if image in stages else f"{match.group(1)}${{{BASE_ARG}}}{rest}"
            if image not in stages and _PYTHON_IMAGE.fullmatch(image):
                result = f"{match.group(1)}${{{BASE_ARG}}}{rest.rstrip()}\n{PYTHON_SHIM}"
            if alias:
                stages.add(alias)
            return result

        own = f"ARG {BASE_ARG}\n" + _FROM.sub(swap, own)
    return own.rstrip("\n") + "\n\n" + (_TAIL.read_text(encoding="utf-8") if tail else "")


def _materialise(context: Path, env_dir: Path, text: str) -> None:
    """environment/ copied with the Dockerfile as built, into place whole (a concurrent planner
    sees no folder or a complete one)."""
    tmp = context.with_name(f"{context.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    if env_dir.is_dir():
        shutil.copytree(env_dir, tmp, symlinks=True)
    else:
        tmp.mkdir(parents=True)
    (tmp / DOCKERFILE).write_text(text, encoding="utf-8")
    try:
        tmp.rename(context)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)  # another planner made it first: the same content
