"""Pure helpers over git's patch format: split a diff per file, name its paths, protect paths.

A ``git diff`` is a sequence of per-file chunks, each starting with a ``diff --git`` line
at column 0. Content lines inside a chunk always start with ' ', '+', '-', '\\' or '@',
and binary hunks use base85 (no spaces), so a column-0 ``diff --git `` line is always a
header: splitting there is exact.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

HEADER = b"diff --git "

PYTEST_PROTECTED: tuple[str, ...] = (
    # Test-runner configuration: each can add options (-p plugin, -k deselection, --co).
    # pytest looks for these in the tests' directory and every parent, so at any depth.
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    # pyproject.toml carries [tool.pytest.ini_options]; it cannot be split, so all of it.
    "pyproject.toml",
    # Interpreter start-up: run before any test by the site module (when on a site dir).
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    # Code the diff's readable source does not show: bytecode is used instead of (or, as an
    # unchecked hash-based .pyc, whatever) its .py, and an extension module beats a .py of
    # the same name in the same directory.
    "*.pyc",
    "*.pyo",
    "__pycache__/",
    "*.so",
    "*.pyd",
    # Distribution metadata on sys.path: entry points make pytest autoload a plugin.
    "*.dist-info/",
    "*.egg-info/",
    "*.egg-link",
)
"""Test-runner configuration, start-up files, bytecode and package metadata: paths an agent
could use to change what the hidden tests do. Patterns without a '/' match the file name at
any depth; a pattern ending in '/' matches a directory name at any depth (all below it)."""
ANY_CASE = frozenset({"*.dist-info/", "*.egg-info/"})
"""Patterns matched whatever the case: importlib.metadata lowercases a directory's name before it
looks for ``.dist-info`` (``X.DIST-INFO/entry_points.txt`` registers a pytest plugin as well)."""


@dataclass(frozen=True)
class FileChunk:
    data: bytes
    old_path: str
    new_path: str

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.old_path,) if self.old_path == self.new_path else (self.old_path, self.new_path)


def split_chunks(diff: bytes) -> list[bytes]:
    """The per-file chunks of ``diff``, each still ending in its newline."""
    if not diff:
        return []
    starts = [0] if diff.startswith(HEADER) else []
    pos = diff.find(b"\n" + HEADER)
    while pos != -1:
        starts.append(pos + 1)
        pos = diff.find(b"\n" + HEADER, pos + 1)
    if not starts or starts[0] != 0:
        raise ValueError("not a git diff: it does not start with 'diff --git'")
    return [diff[a:b] for a, b in zip(starts, starts[1:] + [len(diff)])]


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote(text: str) -> tuple[str, str]:
    """Parse one git C-quoted string at the start of ``text``: (value, rest)."""
    assert text.startswith('"')
    out, i = bytearray(), 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", "replace"), text[i + 1 :]
        if ch == "\\":
            nxt = text[i + 1]
            if nxt in "01234567":
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        out += ch.encode()
        i += 1
    raise ValueError(f"unterminated quoted path: {text[:80]!r}")


def path_field(value: str) -> str:
    """A path as a diff line writes it: C-quoted where git quoted it, else as it stands."""
    return unquote(value)[0] if value.startswith('"') else value


def _strip_prefix(path: str, prefix: str) -> str:
    return path[len(prefix) :] if path.startswith(prefix) else path


def chunk_paths(chunk: bytes) -> FileChunk:
    """Old and new path of one chunk (equal unless it is a rename)."""
    lines = chunk.decode("utf-8", "replace").split("\n")
    rename_from = rename_to = None
    for line in lines[1:]:
        if line.startswith(("@@", "GIT binary patch", "--- ", "+++ ")):
            break
        if line.startswith("rename from "):
            rename_from = path_field(line[len("rename from ") :])
        elif line.startswith("rename to "):
            rename_to = path_field(line[len("rename to ") :])
    if rename_from is not None and rename_to is not None:
        return FileChunk(chunk, rename_from, rename_to)
    rest = lines[0][len("diff --git ") :]
    if rest.startswith('"'):
        old, rest = unquote(rest)
        return FileChunk(chunk, _strip_prefix(old, "a/"), _strip_prefix(path_field(rest.lstrip(" ")), "b/"))
    # Not a rename: "a/P b/P" with the same P twice, so P's length is fixed by the line's.
    size = (len(rest) - 5) // 2
    path = rest[2 : 2 + size]
    if rest != f"a/{path} b/{path}":
        raise ValueError(f"cannot parse diff header: {lines[0][:200]!r}")
    return FileChunk(chunk, path, path)


def parse_chunks(diff: bytes) -> list[FileChunk]:
    return [chunk_paths(chunk) for chunk in split_chunks(diff)]


def is_protected(path: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Whether ``path`` matches a pattern: exact path, glob on the path, for a pattern without
    '/' a glob on the file name at any depth, for ``NAME/`` a glob on any directory name on
    the path (like .gitignore), and ``DIR/**`` anything below DIR."""
    parts = path.split("/")
    name, dirs = parts[-1], parts[:-1]
    for pattern in patterns:
        pattern = pattern.lstrip("/")
        if path == pattern or fnmatch.fnmatchcase(path, pattern):
            return True
        if "/" not in pattern and fnmatch.fnmatchcase(name, pattern):
            return True
        directory = pattern[:-1] if pattern.endswith("/") and "/" not in pattern[:-1] else None
        fold = str.lower if pattern in ANY_CASE else str
        if directory and any(fnmatch.fnmatchcase(fold(d), directory) for d in dirs):
            return True
        if pattern.endswith("/**") and path.startswith(pattern[:-2]):
            return True
    return False


def protected_patterns(hidden_tests: list[str], extra: list[str]) -> list[str]:
    """The hidden test files always, the task's own globs, and test-runner configuration."""
    return [*hidden_tests, *extra, *PYTEST_PROTECTED]


def ensure_trailing_newline(patch: bytes) -> bytes:
    return patch if not patch or patch.endswith(b"\n") else patch + b"\n"
