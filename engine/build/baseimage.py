"""The offline base image: ``debootstrap`` a Debian rootfs and ``docker import`` it.

No registry is reachable here, so nothing can be pulled; the default ``BASE`` of every
build is bootstrapped locally. A rootfs is not byte-reproducible (timestamps, package
versions on the mirror), so the tag names the *recipe*: ``crucible-base:<hash[:16]>`` of
the recipe's canonical JSON. Users elsewhere point ``BASE`` at any registry image.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import docker

from engine.build.images import image_info
from engine.errors import BuildError, UserError
from engine.models import ImageRef, canonical_json, sha256_hex
from engine.plan.repos import file_lock
from engine.util import paths

DEBOOTSTRAP_TIMEOUT = 1800
_CHUNK = 1 << 20


@dataclass(frozen=True)
class BaseRecipe:
    suite: str = "bookworm"
    variant: str = "minbase"
    include: tuple[str, ...] = ("git", "ca-certificates")
    mirror: str = "http://deb.debian.org/debian"
    changes: tuple[str, ...] = (
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
    )
    """The exact ``docker import --change`` lines."""
    remove: tuple[str, ...] = ("var/cache/apt/archives/*.deb", "var/lib/apt/lists/*")
    """Globs, relative to the rootfs, deleted before import (~100 MB of debs and apt lists)."""

    @property
    def input_hash(self) -> str:
        return sha256_hex(canonical_json(dataclasses.asdict(self)))

    @property
    def tag(self) -> str:
        return f"crucible-base:{self.input_hash[:16]}"

    def ref(self) -> ImageRef:
        return ImageRef(
            tag=self.tag,
            input_hash=self.input_hash,
            dockerfile="",
            context_dir="",
            purpose="base",
            inputs=dataclasses.asdict(self),
        )


def base_image_status(client: docker.DockerClient, recipe: BaseRecipe = BaseRecipe()) -> str:
    """'present' or 'missing'. One inspect."""
    return "present" if image_info(client, recipe.tag) else "missing"


_OFFLINE: dict[str, str] = {}
"""The recipe's input hash -> its tag, once made present in this process."""


def offline_base(client: docker.DockerClient, recipe: BaseRecipe = BaseRecipe()) -> str:
    """The bootstrapped base's tag, made if missing: once per process (an inspect each time
    otherwise)."""
    if recipe.input_hash not in _OFFLINE:
        _OFFLINE[recipe.input_hash] = ensure_base_image(client, recipe).tag
    return _OFFLINE[recipe.input_hash]


def ensure_base_image(client: docker.DockerClient, recipe: BaseRecipe = BaseRecipe()) -> ImageRef:
    """The base image's ref, bootstrapping and importing it first if it is missing (~1 min).

    Raises ``UserError`` when this host cannot bootstrap (not root, no debootstrap) and
    ``BuildError`` when debootstrap or the import fails.
    """
    if image_info(client, recipe.tag):
        return recipe.ref()
    _require_bootstrap_tools()
    with file_lock(f"base-{recipe.input_hash[:16]}"):
        if not image_info(client, recipe.tag):  # another process may have built it
            _bootstrap_and_import(client, recipe)
    return recipe.ref()


def _require_bootstrap_tools() -> None:
    if os.geteuid() != 0:
        raise UserError("building the offline base image needs root (debootstrap): rerun as root")
    if shutil.which("debootstrap") is None:
        raise UserError(
            "building the offline base image needs debootstrap: run `crucible doctor --fix` "
            "(or `apt-get install debootstrap`)"
        )


def _bootstrap_and_import(client: docker.DockerClient, recipe: BaseRecipe) -> None:
    log_path = paths.builds_dir() / f"base-{recipe.input_hash[:16]}.log"
    rootfs = Path(tempfile.mkdtemp(prefix="rootfs-", dir=paths.cache_dir()))
    try:
        _debootstrap(recipe, rootfs, log_path)
        _trim(recipe, rootfs)
        _import(client, recipe, rootfs)
    finally:
        _remove_rootfs(rootfs)


def _debootstrap(recipe: BaseRecipe, rootfs: Path, log_path: Path) -> None:
    argv = [
        "debootstrap",
        f"--variant={recipe.variant}",
        f"--include={','.join(recipe.include)}",
        recipe.suite,
        str(rootfs),
        recipe.mirror,
    ]
    try:
        with open(log_path, "w") as log:
            log.write(f"# {' '.join(argv)}\n")
            log.flush()
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=DEBOOTSTRAP_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"debootstrap timed out after {DEBOOTSTRAP_TIMEOUT} s (log: {log_path})") from exc
    if done.returncode != 0:
        raise BuildError(f"debootstrap failed ({_last_line(log_path)}); log: {log_path}")


def _trim(recipe: BaseRecipe, rootfs: Path) -> None:
    for pattern in recipe.remove:
        for path in rootfs.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


def _import(client: docker.DockerClient, recipe: BaseRecipe, rootfs: Path) -> None:
    """Stream ``tar -c`` of the rootfs into the engine's import: never the whole tar in memory."""
    repository, tag = recipe.tag.split(":")
    labels = [f"LABEL crucible.purpose=base crucible.input_hash={recipe.input_hash}"]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert tar.stdout is not None and tar.stderr is not None  # PIPE
    try:
        client.api.import_image_from_stream(
            _chunks(tar.stdout), repository=repository, tag=tag, changes=list(recipe.changes) + labels
        )
    except docker.errors.DockerException as exc:
        raise BuildError(f"docker import of {recipe.tag} failed: {exc}") from exc
    finally:
        tar.stdout.close()
        stderr = tar.stderr.read().decode(errors="replace")
        tar.stderr.close()
        code = tar.wait()
    if code != 0:
        if image_info(client, recipe.tag):  # a truncated rootfs must not carry the tag
            client.api.remove_image(recipe.tag, force=True)
        raise BuildError(f"tar of the base rootfs failed: {stderr.strip()[-300:]}")
    if not image_info(client, recipe.tag):
        raise BuildError(f"docker import finished without {recipe.tag}")


def _chunks(stream: IO[bytes]) -> Iterator[bytes]:
    # A generator body makes requests send chunked transfer encoding in fixed-size blocks.
    yield from iter(lambda: stream.read(_CHUNK), b"")


def _remove_rootfs(rootfs: Path) -> None:
    # debootstrap mounts proc/sys inside the target; a failed run can leave them mounted,
    # and deleting through a live /proc or /sys mount must never happen.
    prefix = str(rootfs.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        targets = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for target in sorted(targets, reverse=True):
        subprocess.run(["umount", "-l", target], check=False)
    shutil.rmtree(rootfs, ignore_errors=True)


def _last_line(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
