"""The terminal's rich console, shared by whatever draws on it (a progress line, a build's steps).

One console per stream: what is printed while a progress line is live goes through the
console that draws it, so it scrolls above the line instead of tearing it. ``rich`` is
imported only when something is drawn, never by a command that prints plain text.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console


def escape(text: str) -> str:
    """Text as text, never as rich markup (Docker's (``COPY [/a, /b]`` would be a closing tag))."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


_CONSOLES: dict[int, tuple[TextIO, Console]] = {}
_CONSOLES_LOCK = threading.Lock()


def console(stream: TextIO) -> Console:
    """The one rich console of ``stream``: a build's steps printed while a progress line is
    live go through the console that draws it, so they scroll above it instead of tearing it."""
    from rich.console import Console

    with _CONSOLES_LOCK:
        known = _CONSOLES.get(id(stream))
        if known is None or known[0] is not stream:
            known = (stream, Console(file=stream, force_terminal=True, stderr=stream is sys.stderr))
            _CONSOLES[id(stream)] = known
        return known[1]


def same_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is the terminal stdout is (then stdout is printed above a live line)."""
    try:
        return sys.stdout.isatty() and os.path.samefile(
            f"/proc/self/fd/{sys.stdout.fileno()}", f"/proc/self/fd/{stream.fileno()}"
        )
    except (AttributeError, ValueError, OSError):
        return False


def is_interactive(stream: TextIO) -> bool:
    """Whether to draw on ``stream``: a terminal, and not under ``CI``."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
