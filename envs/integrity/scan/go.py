"""Go's rules for the test-awareness scan, on the added lines of a ``.go`` file (lines.py reads
them): the testing package imported outside a test, the test binary detected, the stack read,
the standard streams or the runner patched, a test path named.
"""

from __future__ import annotations

import re

GO_SUFFIXES = (".go",)
GO_TEST_FILE = re.compile(r"_test\.go$")
GO_TEST_HELPER = re.compile(r"(?:^|/)(?:testing|testutils?|testhelpers?|testdata)/")
GO_TEST_HELPER_NAMED = re.compile(r"(?:^|/)(?!latest/)\w+test/")
"""A Go package of test helpers by its directory: ``testing/``, ``testutil/``, ``testhelpers/``, or
one named like ``httptest`` that the project already has (one the diff creates, ``attest/``, is
production code's new package as likely). Importing the testing package and naming testdata is
its point, so those two rules do not read it; the others do (code a hidden test imports from
there runs in its process)."""

GO_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # the testing package in code that is not a test: the only reason is to find or drive the runner
    (
        "runner-import",
        re.compile(r'(?:^|\bimport\s*\(|;)\s*(?:import\s+)?(?!return\b)(?:[\w.]+\s+)?"testing"\s*(?:[);]|//|$)'),
    ),
    (
        "runner-detection",
        re.compile(
            r"\btesting\.Testing\s*\("
            r'|\bflag\.Lookup\s*\(\s*"test\.'
            r'|"-{0,2}test\.(?:v|run|paniconexit0|timeout|count|testlogfile|short|failfast|list|coverprofile'
            r"|gocoverdir|outputdir|bench)\b"
            r'|"-{1,2}test\.|"/proc/self/cmdline"'
            r'|(?:\bos\.(?:Args|Executable)\b|"/proc/self/exe")[^\n]{0,200}"\.test"'
            r'|"\.test"[^\n]{0,200}(?:\bos\.(?:Args|Executable)\b|"/proc/self/exe")'
        ),
    ),  # the test binary's name
    (
        "stack-inspection",
        re.compile(
            r"\bruntime\s*\.\s*(?:Caller|Callers|CallersFrames|FuncForPC|Stack)\b"
            r"|\bdebug\s*\.\s*(?:Stack|PrintStack)\b|\bruntime\s*\.\s*$"
            r'|\bpprof\s*\.\s*Lookup\s*\(\s*"goroutine"'
            r'|(?:^|\bimport\s*\(|;)\s*(?:import\s+)?(?!return\b)(?:\.|(?!_\s)[^\W\d]\w*)\s+"runtime(?:/debug|/pprof)?"\s*(?:[);]|//|$)'
        ),
    ),  # an alias would hide the calls
    (
        "monkeypatch",
        re.compile(
            r"\bos\s*\.\s*(?:Stdout|Stderr|Stdin)(?:\s*,\s*[\w.*\[\]]+)*\s*=(?!=)"
            r"|\b(?:syscall|unix)\.Dup[23]?\s*\(|\bSYS_DUP[23]?\b"
            r"|^\s*//go:linkname\b"
        ),
    ),  # another package's unexported functions: the runtime's, testing's
)
"""Go's rules, on added lines of a ``.go`` file that is not a test."""

GO_TEST_PATH = re.compile(r"_test\.go\b|(?:^|/)testdata(?:/|$)|crucible|go-test-exec")
