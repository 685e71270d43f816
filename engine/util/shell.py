"""Shell that runs in a workspace lives in ``.sh`` files, not in Python strings.

A module that runs a script keeps it in ``sh/`` beside itself, where shellcheck sees it
(tests/test_shell_scripts.py). The file opens with a comment header saying who runs it
and with which arguments (and any shellcheck directives); the script passed to ``bash -c``
is the text after that header, so the header costs nothing in any process's argv.
"""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache
def script(module_file: str, name: str) -> str:
    """The script ``sh/<name>`` beside ``module_file`` (pass ``__file__``), less its header.
    Read once per process. Raises ``FileNotFoundError`` for a script that is not there."""
    text = (Path(module_file).parent / "sh" / name).read_text(encoding="utf-8")
    return body(text)


def body(text: str) -> str:
    """``text`` without its leading comment and blank lines (the header)."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].lstrip().startswith("#")):
        start += 1
    return "".join(lines[start:])
