"""Manifests that name what Node or mocha loads (package.json, .mocharc, .npmrc): a file they
name that the diff writes and that is no JavaScript by its name is ``unread-code``.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Iterator

from envs.integrity.scan.javascript import NOT_CODE_SUFFIXES

MANIFEST = re.compile(r"(?:^|/)(?:package\.json|\.mocharc\.(?:[cm]?js|jsonc?|ya?ml)|\.npmrc)$")
"""Files that name what Node or mocha loads into the tests' process with no ``require`` the scan
reads: a package's entry points (a test's ``require('../src/lib')`` of a directory loads its
``main``), its ``imports`` map, mocha's ``require``/``file``/``spec`` options, npm's
``node-options`` (``--require``), a script's preload. A ``.mocharc.js`` is also read as JavaScript:
its ``require: './setup.txt'`` is no ``require(`` call."""
ENTRY_FIELDS = ("main", "module", "browser", "exports", "imports")
"""package.json's fields that name a file an import of the package (or one of its ``#names``)
loads. Not ``bin``: npm links a bin script to run as a program of its own, never loaded into the
runner's process by a require, and an extensionless one with a ``node`` shebang is the usual
form; not ``types``, which no run loads."""
LOADING_KEYS = frozenset({*ENTRY_FIELDS, "require", "import", "node", "default", "file", "spec"})
"""Where a package.json is read line by line (a modified one: the field a line sits under is not
known), the keys whose string names a file that is loaded: the entry fields, Node's usual export
conditions, mocha's options; a subpath (``"./helpers": ...``) or an import map's ``#name`` too."""
MOCHA_INERT_KEYS = frozenset({"ignore", "watch-files", "watch-ignore", "extension", "reporter-option"})
"""mocha's options whose files are never loaded; a ``.mocharc``'s other values may name one."""
_TOKEN = re.compile(r"""(["'])((?:(?!\1)[^\\\n]|\\.)*+)\1?|([^\s"'\[\]{},:#]++)""")
"""A config line's quoted strings (JSON's, YAML's) and bare words, in one pass: one left open runs
to the line's end."""
_KEY_END = re.compile(r"\s*+:")
_PRELOAD = re.compile(
    r"""(?<![\w-])(?P<option>--require|--import|--(?:experimental-)?loader|--file|-r)(?:\s*+=\s*+|\s++)"""
    r"""(?:\\?["'])?(?P<file>[^\s"'\\;,|&)\]]{1,300}+)"""
)
"""A preload on a command line or in ``node-options``: Node's ``--require``/``--import``/
``--loader``, mocha's ``--file``."""


def manifest_findings(
    path: str, added: Iterable[tuple[int, str]], created: bool = False, written: frozenset[str] = frozenset()
) -> list[tuple[str, int, str]]:
    """``unread-code`` (rule, line, what) for each added line of a ``MANIFEST`` file that names a
    file the diff writes that is no JavaScript by its name (``"main": "notes.txt"``, an
    extensionless ``"./helpers"``): Node loads it as JavaScript the scan never reads, as it does a
    ``require`` of one (``findings``). A created package.json is the added lines whole, read as
    JSON, every entry field however nested; a modified one (or one that does not parse) line by
    line, by ``LOADING_KEYS``."""
    lines = list(added)
    name = posixpath.basename(path)
    named: list[tuple[int, str, str | None, str]] = []  # (line, field or option, the subpath it answers to, file)
    for number, text in lines:
        named += [(number, preload.group("option"), None, preload.group("file")) for preload in _PRELOAD.finditer(text)]
    entries = _package_entries("\n".join(text for _, text in lines)) if name == "package.json" and created else None
    if entries is not None:  # each found at the first line that holds its string
        first_line: dict[str, int] = {}
        for number, text in lines:
            for _, value in _pairs(text, keyless=True):
                first_line.setdefault(value, number)
        named += [(first_line.get(spec, lines[0][0]), field, key, spec) for field, key, spec in entries]
    elif name == "package.json":
        named += [
            (number, key, key, value)
            for number, text in lines
            for key, value in _pairs(text)
            if key is not None and (key in LOADING_KEYS or key.startswith((".", "#")))
        ]
    elif name.startswith(".mocharc"):
        named += [
            (number, key or "mocha", key, value)
            for number, text in lines
            for key, value in _pairs(text, keyless=True)
            if key not in MOCHA_INERT_KEYS
        ]
    base = posixpath.dirname(path)
    return sorted(
        {
            ("unread-code", number, f"{field} names {spec}, which the diff writes: no JavaScript by its name"[:80])
            for number, field, key, spec in named
            if _loads_unread(base, key, spec, written)
        }
    )


def _package_entries(text: str) -> list[tuple[str, str, str]] | None:
    """(field, the subpath or ``#name`` it answers to, the file named) for each string under a
    created package.json's entry fields and mocha's options, walked without recursion (a crafted
    nesting is deep); None where the text is no JSON object."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    mocha = data.get("mocha")
    if not isinstance(mocha, dict):
        mocha = {}
    stack = [(field, ".", data.get(field)) for field in ENTRY_FIELDS]
    stack += [(f"mocha.{option}", ".", mocha.get(option)) for option in ("require", "file", "spec")]
    found = []
    while stack:
        field, key, value = stack.pop()
        if isinstance(value, str):
            found.append((field, key, value))
        elif isinstance(value, list):
            stack += [(field, key, item) for item in value]
        elif isinstance(value, dict):  # conditions keep the subpath above them
            stack += [(field, k if k.startswith((".", "#")) else key, item) for k, item in value.items()]
    return found


def _pairs(text: str, keyless: bool = False) -> Iterator[tuple[str | None, str]]:
    """(key, value) for each value on a JSON or YAML line, its key the last one before it on the
    line (``"require": ["./a", "./b"]``); with ``keyless``, a value with none on its line too (a
    list's item) under None. Escapes are read (``".\\/notes.txt"``)."""
    key = None
    for token in _TOKEN.finditer(text):
        value = _unescape(token.group(2)) if token.group(1) else token.group(3)
        if _KEY_END.match(text, token.end()):
            key = value
        elif key is not None or keyless:
            yield key, value


def _unescape(raw: str) -> str:
    try:
        return raw.replace("\\/", "/").encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return raw


def _loads_unread(base: str, key: str | None, spec: str, written: frozenset[str]) -> bool:
    """The file ``spec`` names from the directory ``base`` is one the diff writes and no JavaScript
    by its name. Node tries the name as written before adding ``.js``, so an extensionless
    ``./helpers`` the diff writes is what loads (were it ``helpers.js``, the scan reads it). A
    pattern (``./lib/*``) or a directory names no one file, and a subpath named with the file's own
    suffix (``"./style.css": "./dist/style.css"``) is an asset: only an import that names it loads
    it, and that import is read where it is written."""
    if "*" in spec or spec.endswith("/") or spec.startswith("/") or ":" in spec:
        return False
    target = posixpath.normpath(posixpath.join(base, spec))
    suffix = posixpath.splitext(target)[1]
    return (
        target in written
        and not target.endswith(NOT_CODE_SUFFIXES)
        and not (suffix and posixpath.splitext(key or "")[1] == suffix)
    )
