"""A workspace no agent acts on, captured once per image: a baseline run starts no agent container.

An agent that declares it works alone (``needs_workspace = False`` and no capabilities: ``noop``)
is given nothing to act through: no tools are served to it, and it is never handed the workspace
(not in the run that captures one either). Its capture is then the capture of an untouched
workspace, a pure function of the image that workspace starts from and of the flavor's capture,
which names everything it reads in its key (``CapturesUntouched.untouched_key``). The first such run of an image captures a real workspace and
keeps the answer here, under ``$CRUCIBLE_HOME/cache/untouched``; a later one starts no agent
workspace at all, which saves a container's start and removal (in a sweep of a golden and a
baseline per task, a quarter of its containers). Its grading is unchanged: a fresh container,
the submission laid down in it, the hidden tests run. An image rebuilt under the same tag has a
new image ID, and so another key.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from engine.models import CapturedSubmission, RunSpec
from engine.store.files import atomic_write_json
from engine.util import paths

log = logging.getLogger(__name__)


@runtime_checkable
class CapturesUntouched(Protocol):
    """A flavor whose capture of a workspace no agent acted on depends only on what its key names. Optional."""

    def untouched_key(self, spec: RunSpec, image_id: str, script_done: bool) -> str | None:
        """A digest of everything the capture of an untouched workspace of ``spec`` reads: the
        image it starts from (``image_id``, the engine's content ID), the setup that runs in it
        (only what the layer did not, where ``script_done``), the capture itself and what it
        drops. None: this spec's capture is not a function of those alone (never cached)."""


def works_alone(agent: object) -> bool:
    """Whether ``agent`` acts on nothing the run gives it: it declares it needs no workspace, and
    no capabilities (so none is served to it)."""
    return getattr(agent, "needs_workspace", True) is False and not tuple(getattr(agent, "capabilities", ("?",)))


class UntouchedCaptures:
    """The kept captures of untouched workspaces, one JSON file per key."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root

    @property
    def root(self) -> Path:
        """Where they are kept: ``root``, else ``$CRUCIBLE_HOME/cache/untouched`` (as it is now)."""
        return self._root if self._root is not None else paths.home() / "cache" / "untouched"

    def lookup(self, key: str) -> CapturedSubmission | None:
        """The capture kept for ``key``; None when there is none, or it cannot be read as one
        (then the run captures afresh, and keeps that)."""
        try:
            data = json.loads((self.root / f"{key}.json").read_text(encoding="utf-8"))
            return _submission(data)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("kept capture %s is unreadable (%s): capturing afresh", key, exc)
            return None

    def keep(self, key: str, submission: CapturedSubmission) -> None:
        """Keep ``submission`` under ``key``, whole or not at all (``atomic_write_json``); a failure
        costs only a later run its shortcut."""
        document = dataclasses.asdict(submission)
        try:
            json.dumps(document)  # what JSON cannot hold is not kept (the writer would stringify it)
            atomic_write_json(self.root / f"{key}.json", document)
        except (OSError, TypeError, ValueError) as exc:  # a disk that says no, data that is no JSON
            log.warning("could not keep the capture of an untouched workspace (%s: %s)", type(exc).__name__, exc)


def _submission(data: Any) -> CapturedSubmission:
    if not isinstance(data, dict):
        raise ValueError("not an object")
    fields = {f.name for f in dataclasses.fields(CapturedSubmission)}
    if set(data) != fields:
        raise ValueError(f"fields {sorted(data)} are not {sorted(fields)}")
    submission = CapturedSubmission(**data)
    if not isinstance(submission.diff, str) or not isinstance(submission.files_changed, list):
        raise ValueError("diff or files_changed of the wrong type")
    return submission


def untouched_key(
    flavor: object, agent: object, runtime: object, image_tag: str, spec: RunSpec, script_done: bool
) -> str | None:
    """The key of this run's untouched capture, or None where the run must capture a workspace:
    an agent that does not work alone, a flavor that cannot say (``CapturesUntouched``), a
    runtime that names no image by its content (``image_id``)."""
    if not works_alone(agent) or not isinstance(flavor, CapturesUntouched):
        return None
    image_id = getattr(runtime, "image_id", None)
    content_id = image_id(image_tag) if image_id is not None else None
    if not content_id:
        return None
    return flavor.untouched_key(spec, content_id, script_done)
