"""The test-awareness scan's entry: ``scan`` a diff (each rule family reads its files), and the
files it needs as staged (``paths_to_read``). The package's docstring says what it is for.

Pure: ``scan`` is a function of the diff, the changed files' contents and the task's test
paths. Grading records the findings in the raw grade; ``model.judge`` (called by regrade) decides
from them and the task's allowlist, so a run is judged again the same way from the store.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence

from envs.integrity import patch
from envs.integrity.scan import diffs, lines, manifest, output, payloads, python
from envs.integrity.scan.model import Finding


def scan(
    diff: bytes,
    contents: Mapping[str, bytes | None],
    test_patterns: Sequence[str],
    runner_output_skips: Sequence[str] | None = None,
) -> list[Finding]:
    """Findings on the lines ``diff`` adds. ``contents``: each changed Python file as it will
    run (None: not readable, e.g. deleted); files matching ``test_patterns`` are tests, where
    importing the runner is the point, and are not scanned. ``runner_output_skips``: where a test
    file of the agent's runs in the grading and a printed result line can pass a test (SWE-bench
    Pro's), the files the grading restores, by exact path: those are left alone, and the other
    test files are read by ``runner-output`` and as tests by the Go and JavaScript rules
    (lines.py); None: the test paths are left alone."""
    findings: list[Finding] = []
    changes = diffs.changed_files(diff)
    written = frozenset(c.path for c in changes)
    for changed in changes:
        if changed.symlink_target is not None:
            findings += diffs.symlink_findings(changed, test_patterns)
            continue
        a_test = patch.is_protected(changed.path, tuple(test_patterns))
        # What runs in the grading as the agent wrote it: outside the test paths (the coding
        # flavor's strict drops those), or all but the files SWE-bench Pro's grading restores.
        runs = changed.path not in runner_output_skips if runner_output_skips is not None else not a_test
        if not runs or (changed.binary and runner_output_skips is not None):
            continue  # SWE-bench Pro's evaluator strips binary hunks (its strict reads git's --text diff)
        suffix = posixpath.splitext(changed.path)[1].lower()
        kind = payloads.UNREAD_FILES.get(suffix) or changed.code_inside
        if kind is None and diffs.reads_staged(changed) and changed.path not in contents:
            # to be read as staged and not sent (past the grader's count of files read):
            # nothing of it is read, so nothing of it can be cleared
            findings.append(
                Finding(
                    "unscannable",
                    changed.path,
                    min(changed.added, default=1),
                    "not read: past the number of changed files the scan reads",
                )
            )
            continue
        kind = kind or diffs.staged_kind(changed, contents.get(changed.path))
        if kind is not None:
            findings.append(Finding("unread-code", changed.path, min(changed.added, default=1), kind))
        findings += output.runner_output(changed)
        findings += _line_findings(changed, a_test, written)
        if changed.path.endswith(".py"):  # a Python test file here runs (SWE-bench Pro's, not restored): read as a test
            findings += python.findings(changed, contents.get(changed.path), a_test)
    return sorted(set(findings), key=lambda f: (f.path, f.line, f.rule, f.detail))


def _line_findings(changed: diffs.ChangedFile, a_test: bool, written: frozenset[str]) -> list[Finding]:
    """Go's and JavaScript's rules on a file in those languages (a test file that runs, a coding
    task's ``test/*.js`` or an agent's, read as one), and a manifest's entries."""
    found: list[Finding] = []
    lang = lines.language(changed.path)
    if lang is not None:
        found += [
            Finding(rule, changed.path, line, detail)
            for rule, line, detail in lines.findings(
                changed.path,
                lang,
                changed.added_text,
                created=changed.created,
                a_test=a_test or lines.is_test_file(changed.path, lang),
                written=written,
            )
        ]
    if manifest.MANIFEST.search(changed.path) and not (a_test or lines.is_test_file(changed.path, "js")):
        # package.json, .mocharc, .npmrc: a file they name is loaded as a require of it would be
        found += [
            Finding(rule, changed.path, line, detail)
            for rule, line, detail in manifest.manifest_findings(
                changed.path, changed.added_text, created=changed.created, written=written
            )
        ]
    return found


def paths_to_read(diff: bytes, test_patterns: Sequence[str]) -> list[str]:
    """The changed files ``scan`` needs the contents of, as staged: Python files (the lines the
    diff adds are read in the whole file's tree) and binary files the diff does not carry whole."""
    return [
        c.path
        for c in diffs.changed_files(diff)
        if diffs.reads_staged(c) and not patch.is_protected(c.path, tuple(test_patterns))
    ]
