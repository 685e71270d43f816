"""``crucible gc``: remove the task images (and local templates) that no stored run refers to.

A task image is named by its inputs (``crucible/task:<hash>``, ``engine.build.images``), so images
pile up as tasks, the Dockerfile or the base change. What a stored run refers to
(``runs.image_tag``) is kept, so a stored run can always be rerun without a build; what
no run refers to goes. Never collected:

- an image any container uses (running or not: a live run's workspace, or one a user
  keeps), nor one a container starts using while gc runs (Docker refuses, gc reports it);
- the base image (``crucible-base``, label ``crucible.purpose=base``), even under an
  extra ``crucible/task`` tag;
- an image with a tag that is kept: removing the collected tag then only untags it.

Terminals (coding CLIs run in tmux, engine/store/terminals.py) past their retention window are
closed too: their periodic snapshots go, their final snapshots stay with their runs.

``runtime=local``'s workspace templates (``$CRUCIBLE_HOME/local/templates/<hash>``) are
referenced the same way, by runs whose ``image_tag`` is ``local/task:<hash[:24]>``; one
is removed under its build lock, so never while it is being built. Templates still being
built (``.stage-*``) are the reaper's.

gc reads the store it is given (the default one for the CLI), and collects only what that
store's builds made: every image crucible builds is labelled with its store's path
(``crucible.store``, engine/build/images.py), and an image another store built is not touched
(listed "not touched: built by another store (PATH)"), since this store cannot know which of
its runs still use it. An image made before builds were labelled has no such label, and is
judged by this store's runs alone. An image built for a run that is not stored yet
(``crucible build`` ahead of runs, or a run in its first instant) is unreferenced too, so
the CLI keeps anything younger than ``--min-age`` (an hour by default): a gc beside a
sweep that is starting does not take its freshly built images.

Bytes: each image is listed with its unique size (``docker system df -v``: the layers no
other image shares), each template with its size on disk. Layers shared only among
collected images go too, so after a removal the total is what the daemon's own layer
accounting dropped by (never less than the unique sizes: a concurrent build must not
hide what was freed); a dry run can only promise the sum of the unique sizes, "at least".
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker
import requests

from engine.build.images import STORE_LABEL
from engine.errors import BuildError
from engine.plan.repos import file_lock
from engine.util import paths

if TYPE_CHECKING:
    from engine.interfaces import Store
    from engine.store.duckdb import DuckDBStore

TASK_IMAGES = "crucible/task:*"
AGENT_LAYERS = "crucible/agent:*"
"""Agent-declared image layers over a task image (``spec.agent_image``), collected alike."""
SETUP_LAYERS = "crucible/setup:*"
"""A flavor's setup of a spec alone over a task image or an agent layer (engine/plan/setup_layer.py):
no run names one, and the next run makes it again in a second, so each goes (first: it is a child
of the image under it) unless a container uses it or it is younger than ``--min-age``."""
LOCAL_PREFIX = "local/task:"
BASE_PURPOSE = "base"
NOT_OURS = "not touched: built by another store"


@dataclass
class Item:
    """One thing gc looked at: an image tag or a local template."""

    name: str
    """The tag a run refers to it by (``crucible/task:...`` or ``local/task:...``)."""
    kind: str  # "image" | "template"
    size: int
    where: str
    """The image ID, or the template's directory."""
    keep: str | None = None
    """Why it is kept (None: it goes)."""


@dataclass
class GcReport:
    dry_run: bool
    removed: list[Item] = field(default_factory=list)
    kept: list[Item] = field(default_factory=list)
    referenced: int = 0
    layers_dropped: int = 0
    """How much the daemon's LayersSize fell across the removals (0 in a dry run)."""

    @property
    def freed(self) -> int:
        images = sum(item.size for item in self.removed if item.kind == "image")
        templates = sum(item.size for item in self.removed if item.kind == "template")
        return max(images, self.layers_dropped) + templates


def referenced_tags(store: Store) -> set[str]:
    """Every image tag a stored run refers to (the spool is ingested first, so runs that are
    recorded but not yet in the database count too)."""
    _, rows = store.query(
        "SELECT DISTINCT image_tag FROM runs WHERE image_tag IS NOT NULL UNION "
        "SELECT DISTINCT spec->'agent_image'->>'tag' FROM runs "
        "WHERE spec->'agent_image'->>'tag' IS NOT NULL"
    )
    return {row[0] for row in rows}


# ---------------------------------------------------------------- docker images
def image_items(
    usage: dict[str, Any], referenced: set[str], match: str, min_age: float = 0.0, store: str | None = None
) -> list[Item]:
    """The unreferenced ``crucible/task`` tags matching ``match``, each kept or to go.
    ``usage`` is the daemon's ``df``: images with their unique sizes, and the containers.
    ``store``: this store's path; an image labelled with another store's is not touched."""
    users: dict[str, list[str]] = {}  # image ID -> names of the containers using it
    for container in usage.get("Containers") or []:
        users.setdefault(container["ImageID"], []).append((container.get("Names") or ["?"])[0].lstrip("/"))
    images = usage.get("Images") or []
    items = []
    # Setup layers first: each is a child of the image under it, which goes only after it.
    for image in sorted(
        images, key=lambda i: not any(fnmatch.fnmatchcase(t, SETUP_LAYERS) for t in i.get("RepoTags") or [])
    ):
        tags = image.get("RepoTags") or []
        unreferenced = [
            t
            for t in tags
            if t not in referenced
            and (
                _candidate(t, TASK_IMAGES, match)
                or _candidate(t, AGENT_LAYERS, match)
                or _candidate(t, SETUP_LAYERS, match)
            )
        ]
        if not unreferenced:
            continue
        others = [t for t in tags if t not in unreferenced and t != "<none>:<none>"]
        shared = image.get("SharedSize", -1)
        unique = image["Size"] - shared if shared >= 0 else image["Size"]
        for tag in unreferenced:
            item = Item(name=tag, kind="image", size=0 if others else unique, where=image["Id"])
            labels = image.get("Labels") or {}
            if labels.get("crucible.purpose") == BASE_PURPOSE:
                item.keep = "the base image"
            elif store is not None and labels.get(STORE_LABEL) not in (None, store):
                item.keep = f"{NOT_OURS} ({labels[STORE_LABEL]})"
            elif time.time() - float(image.get("Created") or 0) < min_age:
                item.keep = f"younger than {min_age:.0f} s (--min-age): a run may be about to use it"
            elif users.get(image["Id"]):
                item.keep = "in use by container " + ", ".join(sorted(users[image["Id"]])[:3])
            items.append(item)
            unique = 0  # an image's bytes go with its last tag; count them once
    return items


def remove_image(client: docker.DockerClient, item: Item) -> None:
    """Remove one tag (the image goes with its last tag). Never forced: Docker refuses for an
    image a container uses, and that refusal is reported, not overridden."""
    try:
        client.api.remove_image(item.name, force=False)
    except docker.errors.ImageNotFound:
        item.size = 0  # removed meanwhile by someone else: nothing freed by us
    except docker.errors.APIError as exc:
        item.keep = f"Docker refused: {exc.explanation or exc}"
    except requests.RequestException as exc:
        raise BuildError(f"cannot remove {item.name}: Docker engine unreachable ({type(exc).__name__})") from exc


# ---------------------------------------------------------------- local templates
def templates_dir() -> Path:
    return paths.home() / "local" / "templates"


def template_items(referenced: set[str], match: str, min_age: float = 0.0) -> list[Item]:
    """The unreferenced local templates matching ``match`` (by their ``local/task:`` name)."""
    root = templates_dir()
    if not root.is_dir():
        return []
    wanted = {tag[len(LOCAL_PREFIX) :] for tag in referenced if tag.startswith(LOCAL_PREFIX)}
    items = []
    for path in sorted(root.iterdir()):
        name = LOCAL_PREFIX + path.name[:24]
        if path.name.startswith(".") or not path.is_dir() or path.name[:24] in wanted:
            continue
        if _candidate(name, LOCAL_PREFIX + "*", match):
            item = Item(name=name, kind="template", size=_tree_size(path), where=str(path))
            if time.time() - path.stat().st_mtime < min_age:
                item.keep = f"younger than {min_age:.0f} s (--min-age): a run may be about to use it"
            items.append(item)
    return items


def remove_template(item: Item) -> None:
    path = Path(item.where)
    # The build lock of ensure_template: a template is never removed while it is being made.
    with file_lock(f"local-template-{path.name}"):
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            item.size = 0
        except OSError as exc:
            item.keep = f"cannot remove {path}: {exc}"


def _tree_size(top: Path) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


# ---------------------------------------------------------------- the collection
def _candidate(name: str, family: str, match: str) -> bool:
    return fnmatch.fnmatchcase(name, family) and fnmatch.fnmatchcase(name, match)


def collect(
    store: Store, client: docker.DockerClient | None, *, dry_run: bool = False, match: str = "*", min_age: float = 0.0
) -> GcReport:
    """Remove (with ``dry_run``: only list) what no run in ``store`` refers to, among the names
    matching ``match`` (a glob over ``crucible/task:...`` and ``local/task:...``).
    ``client`` None: no Docker engine, templates only."""
    referenced = referenced_tags(store)
    usage = _disk_usage(client) if client is not None else {}
    items = image_items(usage, referenced, match, min_age, str(getattr(store, "path", "")) or None) + template_items(
        referenced, match, min_age
    )
    report = GcReport(dry_run=dry_run, referenced=len(referenced))
    for item in items:
        if item.keep is None and not dry_run:
            if item.kind == "image":
                remove_image(client, item)
            else:
                remove_template(item)
        (report.kept if item.keep else report.removed).append(item)
    if client is not None and not dry_run and any(item.kind == "image" for item in report.removed):
        report.layers_dropped = max(0, usage.get("LayersSize", 0) - _disk_usage(client).get("LayersSize", 0))
    return report


def _disk_usage(client: docker.DockerClient) -> dict[str, Any]:
    try:
        usage: dict[str, Any] = client.df()
        return usage
    except (docker.errors.APIError, requests.RequestException) as exc:
        raise BuildError(f"cannot list images: Docker engine unreachable or failing ({exc})") from exc


def render(report: GcReport) -> list[str]:
    verb = "would remove" if report.dry_run else "removed"
    lines = [f"{verb:12}  {item.name}  {_human(item.size)}  ({_short(item)})" for item in report.removed]
    lines += [f"{'kept':12}  {item.name}  {item.keep}" for item in report.kept]
    images = sum(item.kind == "image" for item in report.removed)
    summary = (
        f"{verb} {images} image tag(s) and {len(report.removed) - images} local template(s), "
        f"{'would free at least' if report.dry_run else 'freed'} {report.freed} bytes ({_human(report.freed)}); "
        f"{report.referenced} image tag(s) referenced by stored runs are kept"
    )
    foreign = sum(1 for item in report.kept if item.keep and item.keep.startswith(NOT_OURS))
    if foreign:
        summary += f"; {foreign} image tag(s) built by another store are not touched (gc of that store collects them)"
    lines.append(summary + ("; nothing was removed (--dry-run)" if report.dry_run else ""))
    return lines


def _short(item: Item) -> str:
    return item.where.removeprefix("sha256:")[:12] if item.kind == "image" else item.where


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


def collect_terminals(store: DuckDBStore, *, dry_run: bool) -> list[str]:
    """Terminals past their retention window (``closes_at``): closed, their periodic snapshots
    removed and their final ones kept; with ``dry_run`` only counted."""
    if dry_run:
        now = datetime.now(UTC)
        due = [
            t
            for t in store.terminals()
            if t.state != "running" and t.closes_at and datetime.fromisoformat(t.closes_at) <= now
        ]
        return [f"would close {len(due)} terminal(s) past their retention window"] if due else []
    stale, closed = store.housekeep_terminals()
    if not (stale or closed):
        return []
    return [
        f"terminals: {len(stale)} marked stale (their run ended without ending them), {len(closed)} closed "
        "past their retention window (periodic snapshots removed, final snapshots kept)"
    ]


def run_gc(*, dry_run: bool, match: str = "*", min_age: float = 3600.0, echo: Callable[[str], object] = print) -> int:

    from engine.run.session import housekeeping, open_store
    from engine.runtimes.docker.daemon import ensure_engine

    store = open_store()
    housekeeping(store, terminals=False)  # orphaned runs first: their terminals are stale now
    for line in collect_terminals(store, dry_run=dry_run):
        echo(line)
    report = collect(store, ensure_engine(), dry_run=dry_run, match=match, min_age=min_age)
    for line in render(report):
        echo(line)
    return 0
