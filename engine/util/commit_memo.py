"""Answers that are a function of git commits alone, kept on disk between commands.

A commit's SHA names its whole tree, so what is read from a repository at pinned SHAs (the
hidden change between the baseline and the test ref, the golden diff's tool calls) never
changes for the same SHAs and the same code reading them. Each command used to read them
again: a sweep's plans ran ~18 ``git`` processes before its first container (~2.5 ms each,
all on the pre-run's one core). Kept here, a later command reads one small file instead.

The key is the kind, the arguments (the repo's path among them) and the engine's version (a
content hash of the code: a change to what reads the commits is a new key). What is kept is
JSON, written atomically; one that cannot be read is computed again and replaced. Errors are
never kept: a task that cannot be planned says so every time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Callable
from typing import Any

from engine.util import paths


def remembered(kind: str, key: tuple[str, ...], compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON value for ``key`` (strings: SHAs, paths, arguments), from
    ``$CRUCIBLE_HOME/cache/commits`` when an earlier command kept it, else computed and kept."""
    from engine.util.codehash import engine_version

    name = hashlib.sha256(json.dumps([kind, engine_version(), *key]).encode()).hexdigest()[:32]
    where = paths.cache_dir() / "commits" / f"{kind}-{name}.json"
    try:
        return json.loads(where.read_bytes())
    except (OSError, ValueError):
        pass  # not kept yet, or unreadable: computed again
    value = compute()
    text = json.dumps(value).encode()
    staged = where.with_name(f".{where.name}.{uuid.uuid4().hex}")
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        staged.write_bytes(text)
        os.replace(staged, where)
    except OSError:  # a read-only or full cache: answered all the same, computed again next time
        with contextlib.suppress(OSError):
            staged.unlink()
    return json.loads(text)  # the caller's own copy, as a kept one would be
