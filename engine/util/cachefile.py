"""A cache file written whole or not at all, where failing to write it costs only the next
reader's recomputing (the evaluation cache, the commit memo): no fsync, nothing raised."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def keep(target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` through a temporary file renamed over it, so a reader sees
    the old file or the whole new one; whether it was kept (a read-only or full cache is not
    written, and its temporary file not left)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(target)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
