"""What a task image is to ``runtime=local``: a prepared template dir, copied per run.

    $CRUCIBLE_HOME/local/templates/<input hash>/   app/ (baseline tree, uid 1000) + crucible/vault/repo.git
    $CRUCIBLE_HOME/local/runs/<run>-<purpose>.p<owner pid>.<rand>/   one workspace's root

A template is what ``Dockerfile.hud`` would build, from the same inputs (the context's
``repo.bundle`` and the build args): the baseline cloned, its ``.git`` moved into the
root-only vault, ``INSTALL_CMD`` run as root in a sandbox, the tree handed to uid 1000.
``SYSTEM_PACKAGES`` are not installed: they must already be on the host (the sandbox
shows the host's /usr), and a missing one is one actionable error. Templates are built
once per input hash under a lock; a run copies one (``cp -a --reflink=auto``).

Every run root records its owner (pid, its start time, host) so ``reap_local_orphans``
can remove what a SIGKILLed engine left behind (its sandbox died with it:
``--die-with-parent``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import BuildError, WorkspaceError
from engine.models import BuildRecord, ImageRef, canonical_json, sha256_hex
from engine.plan.repos import file_lock
from engine.runtimes.local.sandbox import BlockingSandbox, Layout, SandboxError, one_line
from engine.runtimes.owner import LABEL_OWNER_HOST, LABEL_OWNER_PID, owner_alive, owner_labels, process_start_time
from engine.util import paths

if TYPE_CHECKING:
    from engine.interfaces import RecordsBuilds

log = logging.getLogger(__name__)

TEMPLATE_KIND = "crucible-local-template/1"
OWNER_FILE = "owner.json"
SANDBOX_FILE = "sandbox.json"
_READY = ".ready"
_RESERVED = ("/tmp", "/root", "/var/lib/crucible", "/proc", "/sys", "/dev", "/usr", "/etc")
_installed: set[str] = set()
"""Packages already seen installed (they stay so; a missing one is asked about every time)."""


def local_dir(name: str) -> Path:
    """``$CRUCIBLE_HOME/local/<name>``, created on first use."""
    path = paths.home() / "local" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class TemplateInputs:
    """The parts of an ImageRef a local template is made from."""

    input_hash: str
    bundle: Path
    workdir: str
    baseline_ref: str
    packages: tuple[str, ...]
    install_cmd: str

    @classmethod
    def of(cls, image: ImageRef) -> TemplateInputs:
        args = dict(image.build_args)
        if args.get("INSTANCE_ID"):
            raise WorkspaceError(
                f"runtime=local cannot run the SWE-bench Pro instance image {image.tag}; use runtime=docker"
            )
        workdir = os.path.normpath(args.get("REPO_DIR") or "/app")
        if (
            not workdir.startswith("/")
            or workdir == "/"
            or any(workdir == p or workdir.startswith(p + "/") for p in _RESERVED)
        ):
            raise WorkspaceError(
                f"runtime=local cannot put the repo at REPO_DIR={workdir!r} "
                f"(the sandbox keeps {', '.join(_RESERVED)} for itself)"
            )
        if not args.get("BASELINE_REF"):
            raise WorkspaceError(f"image {image.tag} has no BASELINE_REF build arg")
        return cls(
            input_hash=image.input_hash,
            bundle=Path(image.context_dir) / "repo.bundle",
            workdir=workdir,
            baseline_ref=args["BASELINE_REF"],
            packages=tuple(args.get("SYSTEM_PACKAGES", "").split()),
            install_cmd=args.get("INSTALL_CMD", ""),
        )


def plan_template(context_dir: Path, build_args: Mapping[str, str], purpose: str) -> ImageRef:
    """An ImageRef for a local template, addressed by what the template is made of.

    BASE (and the Dockerfile) do not enter: locally the "base" is the host itself.
    """
    bundle = Path(context_dir) / "repo.bundle"
    if not bundle.is_file():
        raise BuildError(f"no repo.bundle in the build context {context_dir}")
    args = {k: v for k, v in sorted(build_args.items()) if k != "BASE"}
    inputs = {"kind": TEMPLATE_KIND, "bundle_sha256": _file_sha(bundle), "build_args": args}
    input_hash = sha256_hex(canonical_json(inputs))
    return ImageRef(
        tag=f"local/{purpose}:{input_hash[:24]}",
        input_hash=input_hash,
        dockerfile="",
        context_dir=str(Path(context_dir).resolve()),
        build_args=tuple(args.items()),
        base="host",
        purpose=purpose,
        inputs=inputs,
    )


def _file_sha(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_packages(packages: tuple[str, ...]) -> list[str]:
    """Those of ``packages`` dpkg does not list as installed on this host."""
    packages = tuple(p for p in packages if p not in _installed)
    if not packages:
        return []
    try:
        listed = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *packages],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except FileNotFoundError as exc:
        raise BuildError("runtime=local needs a Debian host (dpkg-query) to check SYSTEM_PACKAGES") from exc
    installed = {line.split()[0].split(":")[0] for line in listed.stdout.splitlines() if line.endswith(" installed")}
    _installed.update(p for p in packages if p.split(":")[0] in installed)
    return [p for p in packages if p.split(":")[0] not in installed]


def template_path(inputs: TemplateInputs) -> Path:
    return local_dir("templates") / inputs.input_hash[:32]


def template_ready(inputs: TemplateInputs) -> bool:
    return (template_path(inputs) / _READY).is_file()


def ensure_template(inputs: TemplateInputs, *, bwrap: str, install_timeout: float) -> tuple[Path, bool]:
    """The template dir for ``inputs``, built unless present; (path, cache hit). Blocking."""
    missing = missing_packages(inputs.packages)
    if missing:
        names = " ".join(missing)
        raise BuildError(
            f"runtime=local needs host packages that are not installed: {names} "
            f"(install them with `apt-get install -y {names}`)"
        )
    target = template_path(inputs)
    if template_ready(inputs):
        return target, True
    with file_lock(f"local-template-{inputs.input_hash[:32]}"):
        if template_ready(inputs):
            return target, True
        stage = local_dir("templates") / f".stage-{inputs.input_hash[:16]}.p{os.getpid()}.{secrets.token_hex(3)}"
        try:
            _write_owner(stage, run_id="template", purpose="template")
            _build(stage, inputs, bwrap=bwrap, install_timeout=install_timeout)
            (stage / _READY).write_text(canonical_json({"input_hash": inputs.input_hash, "kind": TEMPLATE_KIND}))
            if target.exists():
                shutil.rmtree(target)  # an unfinished template (no ready mark) from a crashed build
            os.rename(stage, target)
        finally:
            if stage.exists():
                shutil.rmtree(stage, ignore_errors=True)
    return target, False


def _build(stage: Path, inputs: TemplateInputs, *, bwrap: str, install_timeout: float) -> None:
    layout = Layout(stage, inputs.workdir)
    vault = layout.crucible / "vault"
    vault.mkdir(parents=True)
    for path in (layout.crucible, vault):
        os.chmod(path, 0o700)
    git_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(stage),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "LANG": "C",
    }
    _git(["clone", "--quiet", "--branch", inputs.baseline_ref, str(inputs.bundle), str(layout.app)], git_env)
    os.rename(layout.app / ".git", vault / "repo.git")
    subprocess.run(
        ["git", f"--git-dir={vault / 'repo.git'}", "config", "--unset", "core.worktree"],
        env=git_env,
        capture_output=True,
    )
    if inputs.install_cmd:
        _install(layout, inputs, bwrap=bwrap, timeout=install_timeout)
    for sub in ("tmp", "root", "gitconfig", "empty"):  # per-run parts made by the install sandbox
        victim = stage / sub
        if victim.is_dir():
            shutil.rmtree(victim)
        elif victim.exists():
            victim.unlink()
    _chown_tree(layout.app, 1000)


def _git(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(["git", *args], env=env, capture_output=True, timeout=600)
    if done.returncode != 0:
        raise BuildError(f"git {args[0]} failed while preparing a local template: {one_line(done.stderr)}")


def _install(layout: Layout, inputs: TemplateInputs, *, bwrap: str, timeout: float) -> None:
    """INSTALL_CMD as root in the repo dir, in a sandbox with network (as a build has)."""
    layout.make_private_dirs()
    log_path = paths.builds_dir() / f"local-{inputs.input_hash[:32]}.log"
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
    try:
        with BlockingSandbox(bwrap, layout, network=True) as sandbox:
            done = sandbox.run(["/bin/sh", "-c", inputs.install_cmd], cwd=inputs.workdir, env=env, timeout=timeout)
    except SandboxError as exc:
        raise BuildError(f"INSTALL_CMD could not run in a local sandbox: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise BuildError(f"INSTALL_CMD did not finish within {timeout:g} s") from exc
    log_path.write_bytes(done.stdout + done.stderr)
    if done.returncode != 0:
        raise BuildError(
            f"INSTALL_CMD failed with exit code {done.returncode}: "
            f"{one_line(done.stderr[-500:] or done.stdout[-500:])} (log: {log_path})"
        )


def _chown_tree(top: Path, uid: int) -> None:
    os.lchown(top, uid, uid)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


# -- per-run roots -------------------------------------------------------------------------


def new_run_root(run_id: str, purpose: str) -> Path:
    """An empty, owner-stamped per-run root (mode 700)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{run_id}-{purpose}").strip("-.")[:60] or "run"
    root = local_dir("runs") / f"{slug}.p{os.getpid()}.{secrets.token_hex(4)}"
    _write_owner(root, run_id=run_id, purpose=purpose)
    return root


def _write_owner(root: Path, *, run_id: str, purpose: str) -> None:
    root.mkdir(mode=0o700)
    owner = {**owner_labels(), "run_id": run_id, "purpose": purpose}
    (root / OWNER_FILE).write_text(json.dumps(owner))


def record_sandbox(root: Path, init_pid: int) -> None:
    """Note the sandbox's init (pid and start time) in its run root, for the reaper."""
    (root / SANDBOX_FILE).write_text(json.dumps({"pid": init_pid, "started": process_start_time(init_pid)}))


def kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_recorded_sandbox(root: Path) -> None:
    """A dead owner's sandbox normally died with it (``--die-with-parent``), except when the
    owner died while bwrap was still setting up; then its init is killed here."""
    try:
        recorded = json.loads((root / SANDBOX_FILE).read_text())
        pid = int(recorded["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    started = process_start_time(pid)
    if started is not None and started == recorded.get("started"):
        kill_quietly(pid)  # the PID namespace's init: everything in it dies too


def populate(root: Path, template: Path) -> None:
    """Copy the template's tree and vault into ``root`` (ownership and modes kept)."""
    for sub in ("app", "crucible"):
        done = subprocess.run(
            ["cp", "-a", "--reflink=auto", "--", str(template / sub), str(root / sub)],
            capture_output=True,
            timeout=3600,
        )
        if done.returncode != 0:
            raise WorkspaceError(f"could not copy the local template {template.name}: {one_line(done.stderr)}")


def remove_root(root: Path) -> None:
    """Delete a run root; the sandbox must be dead (its mounts lived in its own namespace)."""
    try:
        shutil.rmtree(root)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise WorkspaceError(f"could not remove the local workspace {root}: {exc}") from exc


def run_roots(run_id: str | None = None) -> list[Path]:
    """Existing run roots, optionally only those of ``run_id``."""
    found = []
    for root in sorted(local_dir("runs").iterdir()):
        owner = read_owner(root)
        if run_id is None or owner.get("run_id") == run_id:
            found.append(root)
    return found


def read_owner(root: Path) -> dict[str, Any]:
    try:
        owner: dict[str, Any] = json.loads((root / OWNER_FILE).read_text())
        return owner
    except (OSError, ValueError):
        # Stamped before anything else, so a root without a readable stamp is from an
        # owner killed in the instant between mkdir and write: the name still carries the pid.
        match = re.search(r"\.p(\d+)\.[0-9a-f]+$", root.name)
        return {LABEL_OWNER_PID: match.group(1) if match else "", LABEL_OWNER_HOST: socket.gethostname()}


def reap_local_orphans() -> list[str]:
    """Remove run roots and template stages whose owner process is gone; return their names.

    A dead owner's sandbox died with it (``--die-with-parent`` kills the PID namespace) or
    is killed here through its recorded init. Roots of other hosts (a shared home) are kept.
    """
    reaped = []
    host = socket.gethostname()
    candidates = list(local_dir("runs").iterdir())
    candidates += [p for p in local_dir("templates").iterdir() if p.name.startswith(".stage-")]
    for root in candidates:
        owner = read_owner(root)
        if owner.get(LABEL_OWNER_HOST, host) != host or owner_alive(owner):
            continue
        _kill_recorded_sandbox(root)
        try:
            remove_root(root)
        except WorkspaceError as exc:
            log.warning("%s", exc)
            continue
        log.info("removed orphaned local workspace %s (owner pid %s gone)", root.name, owner.get(LABEL_OWNER_PID))
        reaped.append(root.name)
    return reaped


# -- the ImageBuilder face of templates ------------------------------------------------------


class LocalTemplateBuilder:
    """``engine.interfaces.ImageBuilder`` for ``runtime=local``: plans and prepares templates.

    No Docker engine is involved; ``ensure`` is the template build, recorded like an image build.
    """

    default_base = "host"
    """What planning should pass as BASE: locally the host is the base (nothing to ask Docker for)."""

    def fallback_base(self) -> str:
        return self.default_base  # never asked: the builder's own base comes first

    def __init__(self, *, bwrap: str = "/usr/bin/bwrap", install_timeout: float = 1800.0) -> None:
        self.bwrap = bwrap
        self.install_timeout = install_timeout

    def plan(self, dockerfile: Path, context_dir: Path, build_args: Mapping[str, str], purpose: str) -> ImageRef:
        return plan_template(Path(context_dir), build_args, purpose)

    def status(self, ref: ImageRef) -> str:
        return "cached" if template_ready(TemplateInputs.of(ref)) else "missing"

    def dry_run(self, refs: Sequence[ImageRef]) -> list[tuple[ImageRef, str]]:
        return [(ref, self.status(ref)) for ref in refs]

    def ensure(self, ref: ImageRef, store: RecordsBuilds | None = None) -> BuildRecord:
        started, t0 = datetime.now(UTC).isoformat(), time.monotonic()
        error, hit = None, False
        try:
            _, hit = ensure_template(TemplateInputs.of(ref), bwrap=self.bwrap, install_timeout=self.install_timeout)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            record = BuildRecord(
                build_id=uuid.uuid4().hex,
                tag=ref.tag,
                input_hash=ref.input_hash,
                purpose=ref.purpose,
                cache_hit=hit,
                seconds=time.monotonic() - t0,
                size_bytes=None,
                inputs=ref.inputs,
                log_path=None,
                started_at=started,
                error=error,
            )
            if store is not None:
                store.record_build(record, ingest=not hit)  # a hit's record waits for the next ingest
        return record


__all__ = [
    "LocalTemplateBuilder",
    "TemplateInputs",
    "ensure_template",
    "missing_packages",
    "new_run_root",
    "plan_template",
    "populate",
    "reap_local_orphans",
    "record_sandbox",
    "remove_root",
    "run_roots",
]
