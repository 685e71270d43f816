"""crucible-strict's second source of named results on Go instances: the go command's test2json events.

The official verdict is parser.py reading run_script.sh's output for ``--- PASS: TestX (...)``
lines: text the tested code can print itself (and then end the test binary before the real
line). Since Go 1.20, ``go test -json`` runs the test binary with ``-test.v=test2json``: the
testing package frames its own result lines with ``^V`` and the go command turns only those into
``pass``/``fail``/``skip`` events; a ``--- PASS`` line printed by the code under test becomes an
``output`` event, never a result.

Under ``strict``, where the instance's run_script.sh runs ``go test`` (``how``: a line of the
official asset, not a comment, names it; decided from the pinned asset, never from whether events
turned up, which the tested code decides by ending the run early):

- ``added``: sh/replay.sh appends ``-json -exec=<root's copy of sh/go_test_exec.sh>`` to
  ``GOFLAGS`` (after the image's own value) for run_script.sh. The -exec program is needed
  because run_script.sh's own ``-v`` reaches the test binary after ``-json``'s
  ``-test.v=test2json`` and wins (``-test.v=true``: no framing, and the go command then reads
  result lines from plain text again, printed ones included); it turns that one argument back,
  where the go command asked for framing itself (before Go 1.20 none is asked for, and the events
  are made from plain text: printed lines count there, as under ``none``).
  The official parser then reads the text rebuilt from the stream (``reconstruct`` in
  envs/integrity/sources/gojson.py, beside ``named_results``: each event's ``Output`` in order,
  lines that are no event kept verbatim), so it sees what it would have seen (with one
  difference: under ``-json`` the test binary is always verbose, as with ``-v``);
- ``own``: run_script.sh passes ``-json`` itself (its parser reads events): only the -exec
  program is added (a ``-v`` beside its ``-json`` would unframe the binary's lines too; ``go
  list`` does not know ``-exec``), nothing rebuilt, the events read as they are;
- ``wrapped``: run_script.sh also runs a go command that would take ``-json`` from ``GOFLAGS``
  too and print something else (``go list`` prints JSON objects instead of import paths): only
  the -exec program goes into ``GOFLAGS`` (``go list`` does not know ``-exec``), and ``-json`` is
  given to ``go test`` alone by a root-owned ``go`` put first on run_script.sh's PATH
  (sh/go_wrap.sh), which runs every other go command as given. The text is rebuilt as for
  ``added``. A run_script.sh that finds another go first (an absolute path, its own PATH) gets no
  events, and is then unresolved like any other without them.

A listed test then passes only if the parser says PASSED AND the events say pass (``confirm``);
a name seen in more than one package counts by its worst status; where the events were expected
and none named a test, the run is unresolved (``reason``). Events are read from run_script.sh's
stdout only (the go command writes them there). Pure functions of the recorded raw grade where
they judge, so a stored run regrades.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from engine.util import shell
from envs.integrity.sources.gojson import named_results

_GO_TEST = re.compile(rb"(?<![\w.-])go\s+test(?![\w-])")
_JSON_FLAG = re.compile(rb"(?<![\w-])--?json(?![\w-])")
_OTHER_JSON_COMMANDS = re.compile(rb"(?<![\w.-])go\s+(list|vet|build|install|mod|work|env|version)(?![\w-])")
"""go subcommands that know ``-json`` too: GOFLAGS applies a flag to every command that knows it."""


def _code_lines(run_script: bytes) -> list[bytes]:
    return [line for line in run_script.splitlines() if not line.lstrip().startswith(b"#")]


def how(run_script: bytes) -> str:
    """How the official run_script.sh gets its test2json events under ``strict``: ``added``,
    ``own``, ``wrapped`` (see the module docstring), or ``""`` where it runs no ``go test``."""
    lines = _code_lines(run_script)
    if not any(_GO_TEST.search(line) for line in lines):
        return ""
    if any(_JSON_FLAG.search(line) for line in lines if _GO_TEST.search(line)):
        return "own"
    if any(_OTHER_JSON_COMMANDS.search(line) for line in lines):
        return "wrapped"
    return "added"


EXPECTED = ("added", "own", "wrapped")
"""The ways of ``how`` under which events are asked for, so required."""
REBUILT = ("added", "wrapped")
"""The ways under which ``-json`` is crucible's: the parser reads the text rebuilt from the events."""


def goflags_shown(mode: str, work: str) -> str:
    """What the recorded run_script command shows for the environment added under ``mode``."""
    if mode not in EXPECTED:
        return ""
    added = "-json " if mode == "added" else ""
    path = f'PATH="{work}/go-wrap:$PATH" ' if mode == "wrapped" else ""
    return f'{path}GOFLAGS="${{GOFLAGS:+$GOFLAGS }}{added}-exec={work}/go-test-exec" '


def exec_program() -> str:
    """go test's ``-exec`` program (sh/go_test_exec.sh, its comments left out), which sh/replay.sh
    writes root's into the grading's work directory."""
    return "#!/bin/bash\n" + shell.script(__file__, "go_test_exec.sh")


def wrap_program() -> str:
    """The ``go`` put first on run_script.sh's PATH under ``wrapped`` (sh/go_wrap.sh, its comments
    left out), which sh/replay.sh writes root's into the grading's work directory."""
    return "#!/bin/bash\n" + shell.script(__file__, "go_wrap.sh")


def record(mode: str, stdout: bytes | None) -> dict[str, Any]:
    """The raw grade's ``go_json``: whether events were expected (``EXPECTED``), how, the tests
    they named or why there are none, and ``framed``: whether the go command was one that frames
    the binary's result lines (Go 1.20 and later, known by its ``start`` events). Unframed, a
    result line the code under test prints counts as the testing package's: the events confirm
    no more than the text, and only the scan (``runner-output``) stands in the way."""
    expected = mode in EXPECTED
    found: dict[str, Any] = {"expected": expected, "how": mode or "not go test"}
    if not expected:
        return found
    if stdout is None:
        return {**found, "error": "run_script.sh left no stdout"}
    tests, events, framed = named_results(stdout)
    found.update(
        events=events,
        sha256=hashlib.sha256(stdout).hexdigest(),
        framed=framed,
        tests=[{"name": t.name, "status": t.status} for t in tests],
    )
    if not tests:
        found["error"] = (
            f"the go command wrote no test2json result event naming a test ({events} event(s): "
            "it did not run, was stopped, or the binary ended before any test finished)"
        )
    return found


def confirm(go_json: Mapping[str, Any] | None, confirmed: Mapping[str, Any]) -> dict[str, Any]:
    """``confirmed`` (swe_tasks/junit.py's ``confirm``: ``listed`` entries and ``passed``) with
    the events' say added where they were expected: each entry's ``go_json`` status and
    ``judged_by`` + ``go-json``; a test stays passed only if the events say PASSED too; without
    events, ``go_json_error`` says why. Without a ``go_json`` record (a run graded before it
    existed, or no go test) ``confirmed`` unchanged."""
    if not (go_json and go_json.get("expected")):
        return dict(confirmed)
    error = str(go_json["error"]) if go_json.get("error") else None
    events = (
        {}
        if error
        else {
            str(t["name"]): str(t["status"])
            for t in go_json.get("tests") or []
            if isinstance(t, Mapping) and "name" in t and "status" in t
        }
    )
    passed = set(confirmed["passed"])
    entries = []
    for entry in confirmed["listed"]:
        said = events.get(entry["name"])
        entries.append({**entry, "go_json": said, "judged_by": [*entry["judged_by"], "go-json"]})
        if said != "PASSED":
            passed.discard(entry["name"])
    found = {**confirmed, "listed": entries, "passed": [e["name"] for e in entries if e["name"] in passed]}
    return {**found, "go_json_error": error} if error else found


def reason(confirmed: Mapping[str, Any]) -> str | None:
    """Why the events keep a run unresolved that the parser alone would pass, or None."""
    if confirmed.get("go_json_error"):
        return (
            f"no named results: {confirmed['go_json_error']} (run_script.sh runs go test, so its events are required)"
        )
    denied = [e for e in confirmed["listed"] if e["parser"] == "PASSED" and "go_json" in e and e["go_json"] != "PASSED"]
    if not denied:
        return None
    first = denied[0]
    return (
        f"{len(denied)} listed test(s) PASSED by the parser but not by the go command's test2json events, "
        f"e.g. {first['name']!r} ({first['go_json'] or 'no result event'})"
    )
