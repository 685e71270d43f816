"""Content-addressed image builds: an image's tag is a hash of everything that goes into it.

``plan`` hashes the Dockerfile text, every build-context file the Docker SDK would send
(its own ``.dockerignore`` matcher decides), the build args, the resolved base image ID
and the forwarded CA bundle, and names the image ``crucible/<purpose>:<hash[:24]>``.
``ensure`` builds only when no image has that tag: a cache hit is one inspect and never
reaches the daemon's builder. Concurrent ``ensure`` calls for one tag, from any process
on this host, build it once (an fcntl lock keyed by the input hash).

Every image built carries labels: its input hash, its purpose, and the store it was built for
(``crucible.store``, its path), so that ``crucible gc`` of one store on an engine shared with
others leaves their images alone. Labels are no input: the tag, and so every cache hit, is
the same whichever store builds it. On a terminal a build shows its steps as they start and
where its full log is (``$CRUCIBLE_HOME/builds/<input hash>.log``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import requests
from docker.utils.build import exclude_paths

from engine.errors import BaseImageMissing, BuildError, UserError
from engine.interfaces import RecordsBuilds
from engine.models import BuildRecord, ImageRef, canonical_json, sha256_hex
from engine.plan.repos import file_lock
from engine.util import paths
from engine.util.inputs import note_file, note_image

if TYPE_CHECKING:
    from engine.build.progress import BuildProgress

log = logging.getLogger(__name__)

AUTO = "auto"
"""``ca_bundle=AUTO``: forward the host's bundle ($SSL_CERT_FILE, else $REQUESTS_CA_BUNDLE)."""

CA_FILE = "crucible-ca.pem"
"""Where the forwarded CA bundle lands in every build context (empty when none)."""

STORE_LABEL = "crucible.store"
"""The image label naming the store (its path) a build was made for."""

_PURPOSE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")
_FROM = re.compile(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE | re.MULTILINE)
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.IGNORECASE | re.MULTILINE)
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


def default_ca_bundle() -> str | None:
    """The host's CA bundle to forward into builds: $SSL_CERT_FILE or $REQUESTS_CA_BUNDLE."""
    for var in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        candidate = os.environ.get(var)
        if candidate:
            note_file(candidate)  # looked for, not opened: its appearing changes what is planned
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat()


def image_info(client: docker.DockerClient, tag: str) -> dict[str, Any] | None:
    """The image's inspect data, or None. One API call."""
    try:
        info: dict[str, Any] = client.api.inspect_image(tag)  # the engine's JSON
    except docker.errors.ImageNotFound:
        note_image(tag, None)
        return None
    except docker.errors.APIError as exc:
        raise BuildError(f"cannot inspect image {tag}: {exc.explanation or exc}") from exc
    except requests.RequestException as exc:
        raise BuildError(f"cannot inspect image {tag}: Docker engine unreachable ({type(exc).__name__})") from exc
    note_image(tag, info.get("Id"))  # an input of what is being answered, if anything records (engine.util.inputs)
    return info


def sent_files(context_dir: Path, dockerfile: Path) -> list[str]:
    """The context paths (files and directories) the Docker SDK sends, sorted.

    Reads ``.dockerignore`` exactly as ``docker.api.build`` does and asks the SDK's own
    matcher, so what we hash is what the daemon receives.
    """
    patterns: list[str] = []
    ignore = context_dir / ".dockerignore"
    if ignore.exists():
        lines = [line.strip() for line in ignore.read_text().splitlines()]
        patterns = [line for line in lines if line and not line.startswith("#")]
    try:
        inside = dockerfile.resolve().relative_to(context_dir.resolve()).as_posix()
    except ValueError:
        # Outside the context the SDK injects the Dockerfile under a random name, so no
        # context file gets re-included on its behalf.
        inside = ".dockerfile.crucible-outside"
    return sorted(exclude_paths(str(context_dir), patterns, dockerfile=inside))


def _file_entry(root: Path, rel: str) -> list[str]:
    path = root / rel
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        return [rel, "link", os.readlink(path)]
    if stat.S_ISDIR(info.st_mode):
        return [rel, "dir"]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return [rel, "exec" if info.st_mode & 0o111 else "file", digest.hexdigest()]


def _from_images(dockerfile_text: str, build_args: Mapping[str, str]) -> list[str]:
    """The external images the Dockerfile's FROM lines name, build args substituted."""
    first_from = _FROM.search(dockerfile_text)
    head = dockerfile_text[: first_from.start()] if first_from else dockerfile_text
    values = {name: default.strip("\"'") for name, default in _ARG.findall(head)}
    values.update(build_args)
    images, stages = [], set()
    for ref, alias in _FROM.findall(dockerfile_text):
        resolved = _VAR.sub(lambda m: values.get(m.group(1), ""), ref)
        if resolved.lower() != "scratch" and resolved not in stages:
            images.append(resolved)
        if alias:
            stages.add(alias)
    return images


BUILD_TIMEOUT = 3600.0
"""A build's budget, and its engine client's read timeout (a long step sends nothing)."""


class ContentAddressedBuilder:
    """Plans input-addressed image tags and builds them at most once.

    ``ca_bundle``: a PEM file forwarded into every build context as ``crucible-ca.pem``
    (default: $SSL_CERT_FILE or $REQUESTS_CA_BUNDLE when that file exists). It is an
    input: a different bundle is a different image.
    """

    default_base: str | None = None  # FROM is whatever the plan's BASE build arg names

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        ca_bundle: str | None = AUTO,
        network_mode: str = "host",
        build_timeout: float = BUILD_TIMEOUT,
    ) -> None:
        self.client = client
        self.ca_bundle = default_ca_bundle() if ca_bundle == AUTO else ca_bundle
        self.network_mode = network_mode
        self.build_timeout = build_timeout
        self._planned: dict[str, str] = {}
        self._resolved: dict[str, str] = {}
        """base name -> what it resolved to (its inputs or its ID), once per builder."""
        """tag -> input hash of every image this builder planned: a base named here (an agent
        layer's task image) is known by its inputs before it is built."""

    def fallback_base(self) -> str:
        """The bootstrapped offline base, made now if missing (``engine.build.baseimage``)."""
        from engine.build.baseimage import offline_base

        return offline_base(self.client)

    # -- planning -------------------------------------------------------------------

    def plan(self, dockerfile: Path, context_dir: Path, build_args: Mapping[str, str], purpose: str) -> ImageRef:
        """Compute the input-addressed tag without building anything.

        Stages ``crucible-ca.pem`` in ``context_dir`` (so the context holds what is sent).
        A base the Dockerfile names may be an image this builder planned and has not built yet
        (an agent layer over its task image): it stands for its input hash, as it does once
        built. Raises ``UserError`` for a bad purpose or a missing Dockerfile/context and
        ``BuildError`` when a base image the Dockerfile names is neither present nor planned.
        """
        if not _PURPOSE.match(purpose):
            raise UserError(f"image purpose {purpose!r} must be lowercase [a-z0-9._-]")
        dockerfile, context_dir = Path(dockerfile), Path(context_dir)
        if not dockerfile.is_file() or not context_dir.is_dir():
            raise UserError(f"no Dockerfile at {dockerfile} or no context dir at {context_dir}")
        ca_sha = self._stage_ca(context_dir)
        text = dockerfile.read_text()
        args = dict(sorted(build_args.items()))
        entries = [_file_entry(context_dir, rel) for rel in sent_files(context_dir, dockerfile)]
        base_ids = [self._resolve_base(name) for name in _from_images(text, args)]
        inputs = {
            "dockerfile_sha256": sha256_hex(text),
            "file_count": len(entries),
            "files_sha256": sha256_hex(canonical_json(entries)),
            "build_args": args,
            "base_ids": base_ids,
            "ca_sha256": ca_sha,
        }
        input_hash = sha256_hex(canonical_json(inputs))
        tag = f"crucible/{purpose}:{input_hash[:24]}"
        self._planned[tag] = input_hash
        return ImageRef(
            tag=tag,
            input_hash=input_hash,
            dockerfile=str(dockerfile.resolve()),
            context_dir=str(context_dir.resolve()),
            build_args=tuple(args.items()),
            base=",".join(base_ids),
            purpose=purpose,
            inputs=inputs,
        )

    def _stage_ca(self, context_dir: Path) -> str:
        data = Path(self.ca_bundle).read_bytes() if self.ca_bundle else b""
        target = context_dir / CA_FILE
        if not target.exists() or target.read_bytes() != data:
            # Atomic, so a concurrent planner of the same context never hashes half a file.
            tmp = context_dir / f".{CA_FILE}.{uuid.uuid4().hex}"
            tmp.write_bytes(data)
            os.replace(tmp, target)
        return sha256_hex(data)

    def _resolve_base(self, name: str) -> str:
        if not name:
            raise BuildError("the Dockerfile's FROM is empty: pass the BASE build arg")
        if name not in self._resolved:  # one inspect per base and builder: 8 plans would ask 8 times
            self._resolved[name] = self._resolve_base_now(name)
        return self._resolved[name]

    def _resolve_base_now(self, name: str) -> str:
        found = image_info(self.client, name)
        if found is None and name in self._planned:
            return f"inputs:{self._planned[name]}"  # what it resolves to once built (its label)
        if found is None:
            found = self._pull(name)
        # An image crucible made is identified by its inputs, not its ID: a bootstrapped
        # base's bytes differ on every machine (timestamps), its recipe does not, so the
        # same task plans to the same tag everywhere.
        made_from = ((found.get("Config") or {}).get("Labels") or {}).get("crucible.input_hash")
        return f"inputs:{made_from}" if made_from else found["Id"]

    def _pull(self, name: str) -> dict[str, Any]:
        """``name`` pulled from its registry (once across processes), or ``BaseImageMissing``
        saying plainly that it is not here and why no registry gave it."""
        from engine.build.baseimage import BaseRecipe

        if name == BaseRecipe().tag:  # made here, by debootstrap: no registry has it
            raise BaseImageMissing(f"base image {name} is not present: `crucible doctor --fix` bootstraps it")
        with file_lock(f"pull-{sha256_hex(name)[:24]}"):
            found = image_info(self.client, name)  # another process may have pulled it
            if found is not None:
                return found
            log.info("base image %s is not present: pulling it", name)
            try:
                self.client.images.pull(name)
            except (docker.errors.DockerException, requests.RequestException) as exc:
                why = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
                raise BaseImageMissing(
                    f"base image {name} is not present and could not be pulled from its registry "
                    f"({str(why).splitlines()[0]}): pull or `docker load` it where a registry is reachable"
                ) from exc
            found = image_info(self.client, name)
        if found is None:
            raise BaseImageMissing(f"base image {name} was pulled but the engine does not list it")
        return found

    # -- building -------------------------------------------------------------------

    def status(self, ref: ImageRef) -> str:
        """'cached' when an image with the ref's tag exists, else 'missing'. One inspect."""
        return "cached" if image_info(self.client, ref.tag) else "missing"

    def dry_run(self, refs: Sequence[ImageRef]) -> list[tuple[ImageRef, str]]:
        return [(ref, self.status(ref)) for ref in refs]

    def ensure(self, ref: ImageRef, store: RecordsBuilds | None = None) -> BuildRecord:
        """Build ``ref`` unless an image with its tag exists; record the build in ``store``.

        A cache hit is a single inspect. Raises ``BuildError`` (naming the build log) when
        the build fails; the failed build is recorded first.
        """
        started, t0 = _now(), time.monotonic()
        found = image_info(self.client, ref.tag)
        if found is not None and self._on_its_bases(ref, found):
            return self._record(store, ref, started, t0, found=found, cache_hit=True)
        with file_lock(f"build-{ref.input_hash}"):
            found = image_info(self.client, ref.tag)  # another process may have built it
            if found is not None and self._on_its_bases(ref, found):
                return self._record(store, ref, started, t0, found=found, cache_hit=True)
            log_path = paths.builds_dir() / f"{ref.input_hash}.log"
            try:
                found = self._build(ref, log_path, store_label(store))
            except BuildError as exc:
                self._record(store, ref, started, t0, found=None, cache_hit=False, log_path=log_path, error=str(exc))
                raise
        return self._record(store, ref, started, t0, found=found, cache_hit=False, log_path=log_path)

    def ensure_if_current(self, ref: ImageRef, store: RecordsBuilds | None = None) -> BuildRecord | None:
        """``ensure``'s cache hit where it would build nothing: an image with the ref's tag that
        sits on its bases as they are now (recorded in ``store``, if given); None otherwise, and
        nothing is built (a sweep checks its first jobs' images this way while it plans)."""
        started, t0 = _now(), time.monotonic()
        found = image_info(self.client, ref.tag)
        if found is None or not self._on_its_bases(ref, found):
            return None
        return self._record(store, ref, started, t0, found=found, cache_hit=True)

    def _on_its_bases(self, ref: ImageRef, found: dict[str, Any]) -> bool:
        """Whether a cached image still sits on each crucible-built image its Dockerfile names,
        as that image is now. One built here is named by its inputs, not its bytes: rebuilt under
        the same tag (an unpinned install fetching something newer), what was layered over the old
        one (an agent's layer, a setup layer) would go on serving the old bytes, so it is built
        again. The bootstrapped base is left out: its bytes differ on every bootstrap, its recipe
        does not."""
        if "inputs:" not in ref.base:
            return True  # every base named by its ID: that image for good
        try:
            names = _from_images(Path(ref.dockerfile).read_text(), dict(ref.build_args))
        except OSError:
            return True  # its context is gone: nothing to check it against
        layers = (found.get("RootFS") or {}).get("Layers") or []
        for name in names:
            base = image_info(self.client, name)
            labels = ((base or {}).get("Config") or {}).get("Labels") or {}
            if base is None or labels.get("crucible.purpose") in (None, "base"):
                continue
            under = (base.get("RootFS") or {}).get("Layers") or []
            if layers[: len(under)] != under:
                log.info("%s was built over an earlier %s: building it again", ref.tag, name)
                return False
        return True

    @staticmethod
    def _record(
        store: RecordsBuilds | None,
        ref: ImageRef,
        started: str,
        t0: float,
        *,
        found: dict[str, Any] | None,
        cache_hit: bool,
        log_path: Path | None = None,
        error: str | None = None,
    ) -> BuildRecord:
        record = BuildRecord(
            build_id=uuid.uuid4().hex,
            tag=ref.tag,
            input_hash=ref.input_hash,
            purpose=ref.purpose,
            cache_hit=cache_hit,
            seconds=time.monotonic() - t0,
            size_bytes=found.get("Size") if found else None,
            inputs=ref.inputs,
            log_path=str(log_path) if log_path else None,
            started_at=started,
            error=error,
        )
        if store is not None:
            # A cache hit's record is bookkeeping: spooled (durably) for the next ingest, the
            # run's own record or any read, rather than a turn at the store of its own.
            store.record_build(record, ingest=not cache_hit)
        return record

    def _build(self, ref: ImageRef, log_path: Path, store: str) -> dict[str, Any]:
        # The context may have changed since plan(); building it under the old tag would
        # poison the cache, so re-plan (cheap next to a build) and refuse on a mismatch.
        again = self.plan(Path(ref.dockerfile), Path(ref.context_dir), dict(ref.build_args), ref.purpose)
        if again.input_hash != ref.input_hash:
            raise BuildError(f"inputs of {ref.tag} changed since it was planned; plan again")
        from engine.build.progress import BuildProgress

        shown = BuildProgress(ref.tag, log_path)
        try:
            last_error = self._stream_build(ref, log_path, store, shown)
        except BuildError as exc:
            shown.done(str(exc))
            raise
        shown.done(last_error)
        if last_error is not None:
            raise BuildError(_failure(ref, last_error, log_path))
        found = image_info(self.client, ref.tag)
        if found is None:
            raise BuildError(f"build of {ref.tag} ended without the image (log: {log_path})")
        return found

    def _stream_build(self, ref: ImageRef, log_path: Path, store: str, shown: BuildProgress) -> str | None:
        """Run the build, writing every line to ``log_path`` (and showing its steps); the error
        line, if any."""
        with open(log_path, "w") as log:
            log.write(f"# crucible build {ref.tag} at {_now()}\n# inputs {canonical_json(ref.inputs)}\n")
            try:
                stream = self.client.api.build(
                    path=ref.context_dir,
                    dockerfile=ref.dockerfile,
                    tag=ref.tag,
                    buildargs=dict(ref.build_args),
                    labels={"crucible.input_hash": ref.input_hash, "crucible.purpose": ref.purpose, STORE_LABEL: store},
                    network_mode=self.network_mode,
                    rm=True,
                    forcerm=True,
                    pull=False,
                    decode=True,
                    timeout=self.build_timeout,
                )
                for chunk in stream:
                    if "error" in chunk:
                        log.write(f"ERROR: {chunk['error']}\n")
                        return str(chunk["error"]).strip().splitlines()[-1]
                    line = chunk.get("stream") or chunk.get("status") or ""
                    log.write(line if line.endswith("\n") else line + "\n")
                    log.flush()
                    shown.output(line)
            except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
                log.write(f"ERROR: {exc}\n")
                raise BuildError(f"build of {ref.tag} failed: {exc} (log: {log_path})") from exc
        return None


def store_label(store: RecordsBuilds | None) -> str:
    """What ``crucible.store`` says of a build for ``store``: its path (the default store's when
    the build has none)."""
    path = getattr(store, "path", None)  # DuckDBStore's; the Store protocol reads and writes only
    return str(path if path is not None else paths.store_path())


TAIL_LINES = 20
"""How many of a failed step's last output lines a build error shows (the log has them all)."""

_NONZERO = re.compile(r"returned a non-zero code: (\d+)\s*$")
_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NOISE = (" ---> ", "Removing intermediate container", "ERROR: ")


def _failure(ref: ImageRef, error: str, log_path: Path) -> str:
    """What a failed build tells a person. Where a RUN step exited non-zero, Docker's line
    repeats the step's whole shell text (1.5 KB for Dockerfile.hud) and says nothing of why:
    instead one line names the step (by the build arg it runs, where the flavor named one:
    ``ImageRef.arg_roles``) and its exit code, and the step's last lines of output follow."""
    code = _NONZERO.search(error)
    if code is None:
        return f"build of {ref.tag} failed: {error} (log: {log_path})"
    step, instruction, output = _last_step(log_path)
    used = set(_VAR.findall(instruction))
    values = dict(ref.build_args)
    roles = [f"{role} `{values[arg]}`" for arg, role in ref.arg_roles if arg in used and values.get(arg)]
    where = f"build step {step} of {ref.tag}"
    head = (
        f"{' or '.join(roles)} failed with exit code {code.group(1)} ({where}; log: {log_path})"
        if roles
        else f"{where} failed with exit code {code.group(1)} (log: {log_path})"
    )
    if not output:
        return f"{head}; it printed nothing"
    return "\n    ".join([f"{head}; its last lines:", *output])


def _last_step(log_path: Path) -> tuple[str, str, list[str]]:
    """The last step a build log shows started: its number (``12/15``), its instruction, and
    the last ``TAIL_LINES`` lines it printed (Docker's own bookkeeping lines left out)."""
    try:
        lines = [_ANSI.sub("", line).rstrip() for line in log_path.read_text(errors="replace").splitlines()]
    except OSError:
        return "?", "", []
    starts = [i for i, line in enumerate(lines) if _STEP.match(line)]
    if not starts:
        return "?", "", []
    found = _STEP.match(lines[starts[-1]])
    assert found is not None  # matched above
    output = [line for line in lines[starts[-1] + 1 :] if line.strip() and not line.startswith(_NOISE)]
    return found.group(1), found.group(2), output[-TAIL_LINES:]
