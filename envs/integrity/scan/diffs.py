"""Diff handling: what the agent's diff writes, file by file (the added lines, new symlinks,
binary files), which of those files the scan reads as staged, and symlinks that leave the repo.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from envs.integrity import patch
from envs.integrity.scan import payloads
from envs.integrity.scan.model import Finding


@dataclass(frozen=True)
class ChangedFile:
    path: str
    added: frozenset[int]
    """Line numbers (1-based, in the file after the diff) of the lines the diff adds."""
    symlink_target: str | None = None
    """The target of a symlink the diff makes, else None."""
    added_text: tuple[tuple[int, str], ...] = ()
    """The added lines themselves, with their numbers: what the diff says the file will hold."""
    created: bool = False
    """The diff makes the file at this path (new, or renamed or copied there)."""
    code_inside: str | None = None
    """What the file's bytes say it is, where that is code the scan cannot read whatever the
    file's name (a zip archive, a native library: ``payloads.sniff``), from its text hunks or its binary
    literal; else None."""
    binary: bool = False
    """The diff writes the file as binary (``GIT binary patch``)."""
    staged_size: int | None = None
    """For a binary file whose bytes the diff does not carry (a git delta, whose base is not in
    the diff: git writes one for a changed file where it is smaller), the size the delta says
    the file will have (-1: not said), so its bytes are read from the staged file; else None."""


def changed_files(diff: bytes) -> list[ChangedFile]:
    """What the diff adds, file by file: the new lines' numbers, and the targets of new symlinks."""
    found = []
    for chunk in patch.parse_chunks(diff):
        text = chunk.data.decode("utf-8", "replace").split("\n")
        added: set[int] = set()
        added_text: list[tuple[int, str]] = []
        symlink = any(line.startswith(("new file mode 120000", "new mode 120000")) for line in text[:8])
        created = any(line.startswith(("new file mode ", "rename from ", "copy from ")) for line in text[:8])
        target = None
        new_line = 0
        in_hunk = False
        for line in text:
            if line.startswith("@@"):
                match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
                new_line, in_hunk = (int(match.group(1)), True) if match else (0, False)
                continue
            if not in_hunk:
                continue
            if line.startswith("+"):
                added.add(new_line)
                added_text.append((new_line, line[1:]))
                if symlink and target is None:
                    target = line[1:]
                new_line += 1
            elif line.startswith(" "):
                new_line += 1
            elif line.startswith("\\"):
                continue  # "\ No newline at end of file"
        binary = any(line.startswith(("GIT binary patch", "Binary files ")) for line in text)
        if chunk.new_path != "/dev/null":
            hunk = payloads.binary_hunk(text) if binary else None
            if binary:
                content = hunk[1] if hunk is not None and hunk[0] == "literal" else None
                staged_size = None if content is not None else payloads.delta_size(hunk[1]) if hunk is not None else -1
            else:
                content, staged_size = "\n".join(t for _, t in added_text).encode("utf-8", "replace"), None
            found.append(
                ChangedFile(
                    chunk.new_path,
                    frozenset(added),
                    target if symlink else None,
                    tuple(added_text),
                    created,
                    payloads.sniff(content, whole=binary or created),
                    binary,
                    staged_size,
                )
            )
    return found


def reads_staged(changed: ChangedFile) -> bool:
    """``scan`` reads this file as staged (``contents``)."""
    if changed.symlink_target is not None:
        return False
    if changed.path.endswith(".py") and (changed.added or changed.binary):
        return True
    return changed.staged_size is not None and changed.staged_size <= payloads.BINARY_LIMIT


def staged_kind(changed: ChangedFile, data: bytes | None) -> str | None:
    """What a binary file the diff changes by a delta is, read from the staged file (``payloads.sniff``);
    one past ``payloads.BINARY_LIMIT`` is not read and cannot be cleared. None for a file not staged (it does
    not run)."""
    if changed.staged_size is None:
        return None
    if changed.staged_size > payloads.BINARY_LIMIT:
        return f"a binary file the diff changes by a delta into {changed.staged_size} bytes, past what the scan reads"
    return payloads.sniff(data, whole=True)


def symlink_findings(changed: ChangedFile, test_patterns: Sequence[str]) -> list[Finding]:
    """A symlink out of the repo, or from code to a test path (where nothing is scanned)."""
    target = changed.symlink_target or ""
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(changed.path), target))
    if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
        return [Finding("symlink-escape", changed.path, min(changed.added, default=1), f"-> {target}")]
    suffix = posixpath.splitext(changed.path)[1].lower()
    if (suffix == ".py" or suffix in payloads.UNREAD_FILES) and posixpath.splitext(resolved)[1].lower() != suffix:
        return [
            Finding(
                "unread-code",
                changed.path,
                min(changed.added, default=1),
                f"-> {target} (code under a name the scan reads, its source under one it does not)",
            )
        ]
    if not patch.is_protected(changed.path, tuple(test_patterns)) and any(
        patch.is_protected(p, tuple(test_patterns)) for p in (resolved, resolved + "/x.py")
    ):
        return [
            Finding(
                "symlink-escape",
                changed.path,
                min(changed.added, default=1),
                f"-> {target} (a test path, which is not scanned)",
            )
        ]
    return []
