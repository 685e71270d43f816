"""Pure text operations of the edit tool, with Anthropic's text-editor semantics.

File bytes become ``str`` through ``surrogateescape``, so any byte sequence (non-UTF-8,
CRLF, no final newline) survives a read-edit-write round trip unchanged; ``display``
makes such text safe to show (MCP results must be valid UTF-8).
"""

from __future__ import annotations

from typing import Any

SNIPPET_CONTEXT = 4


def decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def display(text: str) -> str:
    return encode(text).decode("utf-8", "replace")


def replace_once(content: str, old: str, new: str) -> tuple[str, int]:
    """Replace the only occurrence of ``old``; (new content, 1-based line where it started)."""
    if old == "":
        raise ValueError("`old_str` must not be empty")
    count = content.count(old)
    if count == 0:
        raise ValueError(f"No replacement was performed, old_str `{display(old)}` did not appear verbatim")
    if count > 1:
        lines = _occurrence_lines(content, old)
        raise ValueError(
            f"No replacement was performed. Multiple occurrences of old_str `{display(old)}` in lines {lines}. "
            "Please ensure it is unique"
        )
    at = content.index(old)
    return content[:at] + new + content[at + len(old) :], content.count("\n", 0, at) + 1


def _occurrence_lines(content: str, old: str) -> list[int]:
    lines, start = [], content.find(old)
    while start != -1:
        lines.append(content.count("\n", 0, start) + 1)
        start = content.find(old, start + 1)
    return lines


def insert_after(content: str, insert_line: Any, text: str) -> str:
    """Insert ``text`` as new line(s) after line ``insert_line`` (0 = before the first line)."""
    lines = content.split("\n")
    if isinstance(insert_line, bool) or not isinstance(insert_line, int):
        raise ValueError("insert needs an integer `insert_line`")
    if insert_line < 0 or insert_line > len(lines):
        raise ValueError(
            f"Invalid `insert_line` parameter: {insert_line}. It should be within the range of lines "
            f"of the file: [0, {len(lines)}]"
        )
    return "\n".join(lines[:insert_line] + text.split("\n") + lines[insert_line:])


def numbered(content: str, view_range: Any = None) -> str:
    """``cat -n`` style: six-wide line numbers, a tab, the line (display-safe)."""
    lines = display(content).split("\n")
    if content.endswith("\n"):
        lines = lines[:-1]
    first, last = 1, len(lines)
    if view_range is not None:
        first, last = _check_range(view_range, len(lines))
    return "\n".join(f"{i:6}\t{line}" for i, line in enumerate(lines[first - 1 : last], start=first)) + "\n"


def _check_range(view_range: Any, count: int) -> tuple[int, int]:
    if (
        not isinstance(view_range, (list, tuple))
        or len(view_range) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in view_range)
    ):
        raise ValueError("Invalid `view_range`. It should be a list of two integers")
    first, last = view_range
    if first < 1 or first > max(count, 1):
        raise ValueError(
            f"Invalid `view_range`: {view_range}. Its first element `{first}` should be within [1, {count}]"
        )
    if last == -1:
        return first, count
    if last < first or last > count:
        raise ValueError(
            f"Invalid `view_range`: {view_range}. Its second element `{last}` should be -1 or within [{first}, {count}]"
        )
    return first, last


def edited_message(path: str, content: str, line: int, span: int) -> str:
    """What Anthropic's tool answers after an edit: a numbered snippet around the change."""
    lines = content.split("\n")
    first = max(1, line - SNIPPET_CONTEXT)
    last = min(len(lines), line + span - 1 + SNIPPET_CONTEXT)
    rows = "\n".join(f"{i:6}\t{display(text)}" for i, text in enumerate(lines[first - 1 : last], start=first))
    return (
        f"The file {display(path)} has been edited. Here's the result of running `cat -n` on a snippet of "
        f"{display(path)}:\n{rows}\nReview the changes and make sure they are as expected. "
        "Edit the file again if necessary."
    )
