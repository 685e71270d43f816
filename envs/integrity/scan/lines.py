"""Go and JavaScript/TypeScript read line by line, under the rules of go.py and javascript.py.

SWE-bench Pro's Go and JavaScript instances (and a coding task in those languages) run the
code under test in the test runner's own process, as Python's do, and code that knows it is
tested can pass there without being right: a Go ``Add`` that asks ``runtime.Caller`` whether
its caller is ``TestAdd``, a JavaScript function that searches ``new Error().stack`` for the
test file's name, a module that replaces ``process.stdout.write`` or ``assert.strictEqual``.
Honest runner results report those passes, so only the scan can stop them.

Python is read as a syntax tree (python_visitor.py); these two are read as the added lines' text,
with the same rule names, so a finding reads, is recorded and is allowed per task the same
way. A line is matched as written (comments aside), so a name the code builds at run time
(``process["std" + "out"]``, a reflect call) is past it: the documented limit, as for
Python's ``getattr`` with a computed name. Each pattern names what a bug fix has no business
doing; the false positives on real projects' commits are measured by bench/bench_scanner.py
(bench/README.md).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from envs.integrity.scan.go import (
    GO_RULES,
    GO_SUFFIXES,
    GO_TEST_FILE,
    GO_TEST_HELPER,
    GO_TEST_HELPER_NAMED,
    GO_TEST_PATH,
)
from envs.integrity.scan.javascript import (
    _RELATIVE,
    HELPER_RULES,
    JS_RULES,
    JS_RUNNER_CONFIG,
    JS_SUFFIXES,
    JS_TEST_FILE,
    JS_TEST_PATH,
    JS_TEST_RULES,
    JS_UNREAD_MORE,
    JS_UNREAD_WORDS,
    NOT_CODE_SUFFIXES,
)

STRING = re.compile(r'"((?:[^"\\\n]|\\(?:.|$))*+)(?:"|$)|\'((?:[^\'\\\n]|\\(?:.|$))*+)(?:\'|$)|`([^`\n]*+)(?:`|$)')
"""One line's string literals (Go's and JavaScript's quotes, a template or raw string), their
text in a group: one left open runs to the line's end (a template or raw string goes on), which
also keeps the read linear (no quote is tried twice)."""

TEST_FILE_NAME = re.compile(r"\.(?:test|spec)\.[cm]?[jt]sx?\b|__tests__|_test\.go\b|\.mocharc")
"""The names no honest code spells but a test's, read in the whole line too: a quote in a regular
expression (``/"/``) can shift which text the literals' reader pairs."""


_CALL_OPEN = re.compile(r"\s*\($")


def language(path: str) -> str | None:
    """ "go", "js" or None (not read by these rules)."""
    if path.endswith(GO_SUFFIXES):
        return "go"
    if path.endswith(JS_SUFFIXES):
        return "js"
    return None


def is_test_file(path: str, lang: str) -> bool:
    return bool((GO_TEST_FILE if lang == "go" else JS_TEST_FILE).search(path))


def findings(
    path: str,
    lang: str,
    added: Iterable[tuple[int, str]],
    created: bool = False,
    a_test: bool = False,
    written: frozenset[str] = frozenset(),
) -> list[tuple[str, int, str]]:
    """(rule, line, what matched) for each added line of a file in ``lang``: one finding per rule
    and line. ``created``: the diff makes the file; ``a_test``: a test file of the agent's that
    runs in the grading (SWE-bench Pro's), read for ``JS_TEST_RULES``; ``written``: the paths the
    diff writes (a module required from one of them that is not JavaScript by its name, notes.txt
    or an extensionless file, is JavaScript to Node, and source the scan never reads)."""
    if a_test and lang == "go":
        return []
    helper = (
        GO_TEST_HELPER.search(path) or not created and GO_TEST_HELPER_NAMED.search(path)
        if lang == "go"
        else JS_RUNNER_CONFIG.search(path)
    )
    rules = [
        (rule, pattern)
        for rule, pattern in (GO_RULES if lang == "go" else JS_RULES)
        if (rule in JS_TEST_RULES if a_test else not (helper and rule in HELPER_RULES))
    ]
    test_path = None if a_test or helper else GO_TEST_PATH if lang == "go" else JS_TEST_PATH
    found: list[tuple[str, int, str]] = []
    for number, text in added:
        code = _code(text)
        if code is None:
            continue
        for rule, pattern in rules:
            match = pattern.search(code)
            if (
                match is None
                and rule == "unread-code"
                and lang == "js"
                and any(word in code for word in JS_UNREAD_WORDS)
            ):
                match = JS_UNREAD_MORE.search(code)
            if match:
                detail = _CALL_OPEN.sub("()", match.group(0).strip())  # a call reads as one: runtime.Caller()
                found.append((rule, number, detail[:80]))
        if lang == "js" and not a_test:
            for required in _RELATIVE.finditer(code):
                rel = required.group(1) or required.group(2)
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), rel))
                if target in written and not target.endswith(NOT_CODE_SUFFIXES):
                    found.append(
                        (
                            "unread-code",
                            number,
                            f"requires {rel}, which the diff writes: no JavaScript by its name"[:80],
                        )
                    )
        if test_path is None:
            continue
        for literal in STRING.finditer(code):
            if test_path.search(next(text for text in literal.groups() if text is not None)):
                found.append(("test-path", number, literal.group(0)[:80]))
                break
        else:
            named = TEST_FILE_NAME.search(code)
            if named:
                found.append(("test-path", number, named.group(0)))
    return found


def _code(line: str) -> str | None:
    """The line as code, or None for a ``//`` comment line. One that holds a backtick or ``${`` is
    read: inside a raw string or a template it is text, and what follows the closing backtick, or
    an interpolation, is code. Block comments are read too (a ``/*`` inside a string would
    otherwise hide the lines after it); a trailing comment as well: cutting it would need the
    literals' bounds, and naming a call there costs one allowance."""
    stripped = line.strip()
    if stripped.startswith("//go:linkname"):
        return stripped  # a directive, not a comment
    if not stripped or stripped.startswith("//") and "`" not in stripped and "${" not in stripped:
        return None
    return line
