"""crucible-strict's second source of named results on pytest instances: pytest's JUnit reports.

The official verdict is parser.py reading run_script.sh's output, text the tested code can
write (print a test's PASSED line and end the process before pytest reports it). Under
``strict``, when the instance's run_script.sh runs pytest (``runs_pytest``: a line of the
official asset, not a comment, names ``pytest`` or ``ansible-test units``; never "whether a
report turned up", which the tested code decides by ending pytest early), sh/replay.sh puts a
root-owned pytest plugin (py/crucible_junit.py, ``plugin_program``) where every pytest of the
tests' uid autoloads it, the tests' user site-packages and PYTHONPATH, and each pytest session
writes a JUnit report (xunit1, which names each case's file) of its own into a fresh randomly
named directory outside the repo, ``r/pytest-<pid>-<us>.xml``. Not ``--junitxml`` in
``PYTEST_ADDOPTS``: a run script that runs pytest once per test file kept only the last report,
and ansible-test runs pytest in an environment rebuilt from HOME and PATH alone (the SWE-bench Pro
instances that run ``ansible-test units``: golden patches were unresolved under ``strict``).
The reports are read after run_script.sh ended and every process of the tests was killed, only
regular files, not symlinks, and merged: a test in several reports counts by its worst status.

A listed test (fail_to_pass / pass_to_pass) then passes only if the parser says PASSED AND the
reports say passed for the same test. Names are mapped (``map_name``) from the parser's
pytest node ids to the reports' (the ``junit`` result source, envs/integrity/sources/junit.py): exactly, or where
pytest's rootdir differs from the parser's base, by the one report id whose file path ends with
"/" + the name's (or the other way round) and whose part after the first ``::`` is the same;
anything else is recorded as unmapped and counts as not passed. A pytest instance without a
readable report is unresolved, the reason recorded.
Pure functions of the recorded raw grade, so a stored run regrades.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import GradeError
from engine.models import TestResult
from envs.integrity import sources
from envs.integrity.sources.base import MAX_REPORT_BYTES, merge_worst

REPORTS = "r"
"""The reports' directory inside the grading's results directory (that one root's, ``r/`` the tests')."""
MAX_FILES = 200
"""Reports read back at most (one per pytest session; sh/replay.sh's send_reports enforces it, for
the JavaScript runners' results too); past that the run is refused, not cut short."""
PLUGIN_MODULE = "crucible_junit"
_PYTEST = re.compile(rb"(?<![\w.-])(pytest(?![\w-])|ansible-test\s+units\b)")


def runs_pytest(run_script: bytes) -> bool:
    """Whether the official run_script.sh runs pytest: a line that is not a comment names it, or
    names ``ansible-test units`` (which runs pytest)."""
    return any(_PYTEST.search(line) for line in run_script.splitlines() if not line.lstrip().startswith(b"#"))


def plugin_program(results_dir: str) -> str:
    """The plugin (py/crucible_junit.py) with the reports' directory in it, which sh/replay.sh
    writes root's into the grading's work directory with the entry point that autoloads it."""
    text = (Path(__file__).parent / "py" / f"{PLUGIN_MODULE}.py").read_text(encoding="utf-8")
    marker = '\nRESULTS = ""\n'
    assert marker in text, "py/crucible_junit.py lost its RESULTS line"
    return text.replace(marker, f"\nRESULTS = {json.dumps(f'{results_dir}/{REPORTS}')}\n", 1)


def shown(work: str) -> str:
    """What the recorded run_script command shows for the environment added."""
    return (
        f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{work}/pyresults" '
        f"(and {work}/pyresults named by a .pth in HOME's user site-packages and each venv's on PATH) "
    )


STATES = {
    "absent": "pytest wrote no JUnit report (it did not run, was stopped before its end, "
    "or did not load crucible's plugin)",
    "symlink": "a JUnit report's path is a symlink, refused",
    "not-a-file": "a JUnit report's path is not a regular file, refused",
    "too-large": f"the JUnit reports are over {MAX_REPORT_BYTES} bytes, refused",
    "too-many": f"pytest wrote over {MAX_FILES} JUnit reports, refused",
    "unreadable": "the JUnit reports could not be read (no mkdir, cat or wc in the image?)",
}


MAX_PYTHONS = 64
"""Interpreters recorded at most (sh/replay.sh lists each python on run_script.sh's PATH)."""


def pythons(listing: str) -> list[dict[str, str]]:
    """sh/replay.sh's ``pythons`` lines (``PYTHON<TAB>VENV<TAB>SITE``) as records: each python
    run_script.sh may start (on its PATH, a pytest's ``#!`` interpreter, a ``bin/`` the script
    names), the venv it belongs to (empty: none, so the user site-packages and PYTHONPATH carry
    the plugin) and the venv's site-packages whose .pth names the plugin's directory, or why not (``!...``)."""
    found = []
    for line in listing.splitlines()[:MAX_PYTHONS]:
        python, _, rest = line.partition("\t")
        venv, _, site = rest.partition("\t")
        entry = {"python": python, "venv": venv}
        if site.startswith("!"):
            entry["not_placed"] = site[1:]
        elif site:
            entry["site"] = site
        found.append(entry)
    return found


def _where_placed(found: Sequence[Mapping[str, str]]) -> str:
    """The interpreters the plugin was put in reach of, for a run whose pytest wrote no report."""
    venvs = [
        f"{p['python']} (venv {p['venv']}: {p.get('site') or 'not placed, ' + p.get('not_placed', '')})"
        for p in found
        if p.get("venv")
    ]
    plain = sorted({p["python"] for p in found if not p.get("venv")})
    said = venvs + ([f"{', '.join(plain)} (user site-packages, PYTHONPATH)"] if plain else [])
    return (
        (
            "; the plugin was put where these interpreters load it: "
            + "; ".join(said)
            + ", so the tests ran under another python, or one started with -I/-s or a PYTHONNOUSERSITE"
        )
        if said
        else "; no python was found on run_script.sh's PATH"
    )


def record(
    expected: bool,
    reports: Sequence[tuple[str, bytes | None]],
    results_dir: str,
    found_pythons: Sequence[Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """The raw grade's ``junit``: whether this instance's tests are pytest (so a report is
    required), where the reports were written, the interpreters the plugin was put in reach of
    (``pythons``), and their tests (merged: the worst status of a test named by more than one)
    or why there are none."""
    found: dict[str, Any] = {
        "expected": expected,
        "path": f"{results_dir}/{REPORTS}/pytest-*.xml",
        "reports": len(reports),
    }
    if found_pythons is not None:
        found["pythons"] = [dict(p) for p in found_pythons]
    bad = [state for state, data in reports if state != "file" or data is None]
    if bad or not reports:
        state = bad[0] if bad else "absent"
        error = STATES.get(state, f"the JUnit reports were not read ({state})")
        if state == "absent" and found_pythons is not None:
            error += _where_placed(found_pythons)
        return {**found, "state": state, "error": error}
    tests: list[TestResult] = []
    digests = []
    for _, data in reports:
        assert data is not None
        digests.append(hashlib.sha256(data).hexdigest())
        try:
            tests += sources.get("junit").parse(data)
        except GradeError as exc:
            return {**found, "state": "file", "error": str(exc)}
    return {
        **found,
        "state": "file",
        "sha256": digests,
        "tests": [{"name": t.name, "status": t.status} for t in merge_worst(tests)],
    }


def map_name(name: str, report: Sequence[str]) -> tuple[str | None, str]:
    """(the report's id for the parser's ``name``, how it was mapped) or (None, why not)."""
    if name in report:
        return name, "exact"
    found = [r for r in report if _same_test_other_root(name, r)]
    if len(found) == 1:
        return found[0], "path-suffix"
    if found:
        return None, f"unmapped: {len(found)} report ids end alike ({', '.join(sorted(found)[:3])})"
    return None, "unmapped: not in the JUnit report"


def _same_test_other_root(name: str, node_id: str) -> bool:
    """The same file path below a different root (one path ends with "/" + the other), the same
    classes, function and parameters after the first ``::``."""
    path, sep, rest = name.partition("::")
    other, other_sep, other_rest = node_id.partition("::")
    if not (sep and other_sep and rest == other_rest and path.endswith(".py") and other.endswith(".py")):
        return False
    return path.endswith("/" + other) or other.endswith("/" + path)


def confirm(junit: Mapping[str, Any] | None, parser: Mapping[str, str], listed: Sequence[str]) -> dict[str, Any]:
    """Each listed test judged by the parser's (worst) status and, on a pytest instance, the
    report's: ``{"listed": [{name, parser, junit, junit_name, mapped, judged_by}], "passed":
    [names], "error": why no report (pytest instances only)}``. Without a ``junit`` record (a
    run graded before it existed) or on an instance that is not pytest, the parser alone."""
    expected = bool(junit and junit.get("expected"))
    error = str(junit.get("error")) if expected and junit and junit.get("error") else None
    report = (
        {
            str(t["name"]): str(t["status"])
            for t in (junit or {}).get("tests") or []
            if isinstance(t, Mapping) and "name" in t and "status" in t
        }
        if expected and not error
        else {}
    )
    entries, passed = [], []
    for name in listed:
        entry: dict[str, Any] = {"name": name, "parser": parser.get(name)}
        ok = entry["parser"] == "PASSED"
        if expected:
            entry["judged_by"] = ["parser", "junit"]
            mapped, how = (None, "no report") if error else map_name(name, list(report))
            entry.update(junit=report.get(mapped) if mapped else None, junit_name=mapped, mapped=how)
            ok = ok and entry["junit"] == "PASSED"
        else:
            entry["judged_by"] = ["parser"]
        entries.append(entry)
        if ok:
            passed.append(name)
    found: dict[str, Any] = {"listed": entries, "passed": passed}
    return {**found, "error": error} if error else found


def reason(confirmed: Mapping[str, Any]) -> str | None:
    """Why the report keeps a run unresolved that the parser alone would pass, or None."""
    if confirmed.get("error"):
        return f"no named results: {confirmed['error']} (run_script.sh runs pytest, so its report is required)"
    denied = [e for e in confirmed["listed"] if e["parser"] == "PASSED" and "junit" in e and e["junit"] != "PASSED"]
    if not denied:
        return None
    first = denied[0]
    said = first["junit"] if first["junit"] else first["mapped"]
    return (
        f"{len(denied)} listed test(s) PASSED by the parser but not by pytest's JUnit report, "
        f"e.g. {first['name']!r} ({said})"
    )
