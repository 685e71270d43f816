"""Answers that are a function of git commits alone, kept on disk between commands (or of
content named by its digest, as commits name theirs: the test-awareness scan's findings).

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

import hashlib
import json
from collections.abc import Callable
from typing import Any

from engine.util import cachefile, paths
from engine.util.codehash import engine_version


def remembered(
    kind: str, key: tuple[str, ...], compute: Callable[[], Any], keep_if: Callable[[Any], bool] | None = None
) -> Any:
    """``compute()``'s JSON value for ``key`` (strings: SHAs, paths, arguments), from
    ``$CRUCIBLE_HOME/cache/commits`` when an earlier command kept it, else computed and kept
    (unless ``keep_if`` says of the value that it may not be the same next time)."""
    name = hashlib.sha256(json.dumps([kind, engine_version(), *key]).encode()).hexdigest()[:32]
    where = paths.cache_dir() / "commits" / f"{kind}-{name}.json"
    try:
        return json.loads(where.read_bytes())
    except (OSError, ValueError):
        pass  # not kept yet, or unreadable: computed again
    value = compute()
    text = json.dumps(value).encode()
    if keep_if is None or keep_if(value):
        cachefile.keep(where, text)  # not kept (a read-only cache): answered all the same
    return json.loads(text)  # the caller's own copy, as a kept one would be
