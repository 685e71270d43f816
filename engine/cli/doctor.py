"""`crucible doctor [--fix]`: check (and, with --fix, repair) what crucible needs on this host.

Checks, in order: a reachable Docker engine, debootstrap, the offline base image, a
writable store location. Each prints one line ``ok|FAIL|fixed  <what>  <detail>``.
``--fix`` is idempotent: on a healthy host it changes nothing and prints only "ok".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable

import docker

from engine.errors import CrucibleError
from engine.runtimes.docker import daemon
from engine.runtimes.docker.daemon import DEFAULT_SOCKET, DOCKERD_LOG, ENGINE_START_TIMEOUT, HINT, ensure_engine
from engine.util import paths

Echo = Callable[[str], None]


def run_doctor(fix: bool, echo: Echo = print) -> int:
    """Run every check (repairing with ``fix``); 0 when all end ok or fixed, else 1."""
    report = _Report(echo)
    client = _check_engine(fix, report)
    _check_debootstrap(fix, report)
    _check_base_image(client, fix, report)
    _check_store(report)
    return 1 if report.failed else 0


class _Report:
    def __init__(self, echo: Echo) -> None:
        self.echo = echo
        self.failed = False

    def line(self, status: str, what: str, detail: str) -> None:
        self.failed |= status == "FAIL"
        self.echo(f"{status:<5}  {what:<11}  {detail}")


def _can_install() -> str | None:
    """Why this host cannot be repaired with apt and a local dockerd, or None."""
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/etc/debian_version"):
        return "not Debian (install Docker and debootstrap with your package manager)"
    return None


def _apt_install(package: str) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update"], ["apt-get", "install", "-y", package]):
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _check_engine(fix: bool, report: _Report) -> docker.DockerClient | None:
    if (client := daemon.ping()) is not None:
        report.line("ok", "engine", f"Docker {client.version().get('Version', '?')}")
        return ensure_engine()
    where = os.environ.get("DOCKER_HOST", DEFAULT_SOCKET)
    if not fix:
        report.line("FAIL", "engine", f"Docker engine unreachable at {where}: {HINT}")
        return None
    client, detail = _fix_engine(where)
    report.line("fixed" if client else "FAIL", "engine", detail)
    return client


def _fix_engine(where: str) -> tuple[docker.DockerClient | None, str]:
    """Install and start a local dockerd; the client and what was done (or why not)."""
    why_not = _can_install() or (None if where == DEFAULT_SOCKET else f"DOCKER_HOST={where} is not local")
    if why_not:
        return None, f"Docker engine unreachable at {where}; cannot fix: {why_not}"
    done = []
    try:
        if shutil.which("dockerd") is None:
            _apt_install("docker.io")
            done.append("installed docker.io")
        if not daemon.dockerd_running():
            daemon.start_dockerd()
            done.append("started dockerd")
    except (subprocess.CalledProcessError, OSError) as exc:
        return None, f"could not install or start dockerd: {_short(exc)}"
    client = daemon.wait_for_engine(ENGINE_START_TIMEOUT)
    if client is None:
        return None, f"dockerd did not answer within {ENGINE_START_TIMEOUT:.0f} s; see {DOCKERD_LOG}"
    return client, f"{', '.join(done) or 'waited for dockerd'} (log: {DOCKERD_LOG})"


def _check_debootstrap(fix: bool, report: _Report) -> None:
    if (found := shutil.which("debootstrap")) is not None:
        report.line("ok", "debootstrap", found)
        return
    why_not = _can_install() if fix else "run `crucible doctor --fix` (or `apt-get install debootstrap`)"
    if why_not:
        report.line("FAIL", "debootstrap", f"not installed: {why_not}")
        return
    try:
        _apt_install("debootstrap")
    except (subprocess.CalledProcessError, OSError) as exc:
        report.line("FAIL", "debootstrap", f"apt-get install debootstrap failed: {_short(exc)}")
        return
    report.line("fixed", "debootstrap", "installed with apt-get")


def _check_base_image(client: docker.DockerClient | None, fix: bool, report: _Report) -> None:
    from engine.build.baseimage import BaseRecipe, base_image_status, ensure_base_image

    recipe = BaseRecipe()
    if client is None:
        report.line("FAIL", "base-image", f"{recipe.tag} not checked: no Docker engine")
        return
    if base_image_status(client, recipe) == "present":
        report.line("ok", "base-image", recipe.tag)
        return
    if not fix:
        report.line("FAIL", "base-image", f"{recipe.tag} missing: run `crucible doctor --fix` (~1 min)")
        return
    started = time.monotonic()
    try:
        ensure_base_image(client, recipe)
    except CrucibleError as exc:
        report.line("FAIL", "base-image", f"{recipe.tag}: {exc}")
        return
    report.line("fixed", "base-image", f"{recipe.tag} bootstrapped in {time.monotonic() - started:.0f} s")


def _check_store(report: _Report) -> None:
    # Never open the DuckDB file here: a running sweep may hold its lock.
    store = paths.store_path()
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=store.parent, prefix=".doctor-"):
            pass
        if store.exists() and not os.access(store, os.W_OK):
            raise PermissionError(f"{store} is read-only")
    except OSError as exc:
        report.line("FAIL", "store", f"{store} not writable: {exc}")
        return
    report.line("ok", "store", str(store))


def _short(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError) and exc.stderr:
        stderr: bytes = exc.stderr
        return stderr.decode(errors="replace").strip().splitlines()[-1]

    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
