"""The isolated verdict: a task's hidden tests judge the code under test from another process.

The canary (``envs.coding.canary``) can only catch forging it can recognise: when the hidden
tests import the agent's code into pytest's own process, that code can rewrite the verdict
around anything it can tell apart. A task with ``isolated_verdict: true`` has hidden tests
that never import the code: they call *scenarios* (``crucible_probe.isolated``), which the
grader's launcher runs in their own process in the repo and which hand back plain data.
Nothing of the agent's runs in pytest's process, so there is nothing in there to forge with.

Its files, outside the repo, written by the launcher as it starts (while the agent still works:
none of them depends on the submission, and the diff, applied in the repo, cannot reach them):

    /tmp/crucible-verdict            root, 755
        pytest.ini                   root, 644
        lib/crucible_probe.py        root, 644   what the hidden tests import
        lib/crucible_scenario.py     root, 644   the scenario side
        hidden/<the hidden tests>    the tester uid, 700: never readable by the scenario uid
        home/                        the tester uid, 700: pytest's HOME and TMPDIR

The test command is the launcher's (as root, envs/coding/verdict/launch.py): pytest as
``TESTER_UID`` and each scenario as the agent's uid under a uid wall (``strict``). It starts
when grading is prepared — pytest imported and the hidden tests collected, the scenario zygote
up — and waits for "go".
The task's own ``test_command`` is not used: pytest's options here are the grader's (no
conftest, no ini of the repo's, no cache), since the tests no longer run in the repo.

A mode that does not isolate the verdict (``none``, ``vault``) runs the same hidden tests
the ordinary way, the task's command in the repo, with the scenarios called in pytest's own
process: those modes promise nothing against code that subverts its test run.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from engine.errors import PlanError
from engine.interfaces import AGENT_UID, ROOT_UID
from engine.plan import repos
from engine.util.commit_memo import remembered
from envs.coding.hidden import HiddenFile

VERDICT_DIR = "/tmp/crucible-verdict"
TESTER_UID = 1001
"""pytest's uid under a uid wall: not the agent's, so a scenario cannot signal, trace or read it."""
SCRIPTS = Path(__file__).with_name("verdict")
PROBE_MODE = "CRUCIBLE_PROBE"
"""Set to ``in-process`` when the scenarios are to be called in pytest's own process."""
BOOT = (
    "import os, sys\nsize, code = int(sys.argv.pop(1)), b''\n"
    "while len(code) < size:\n    chunk = os.read(0, size - len(code))\n    if not chunk: break\n    code += chunk\n"
    "del chunk\nexec(compile(code, 'launch.py', 'exec'))"
)
"""``python3 -c BOOT N ...`` runs the launcher from the first N bytes of its stdin, as ``__main__``:
read from the descriptor exactly, so nothing after them (the hidden tests) is in its memory yet
when it forks the zygote (launch.py)."""


def pytest_options(verdict_dir: str = VERDICT_DIR) -> list[str]:
    """pytest's options for the hidden tests in ``verdict_dir``/hidden: nothing of the repo's
    (no conftest, no ini, no cache), and failures named in the short summary."""
    return [
        "-q",
        "-p",
        "no:cacheprovider",
        "--noconftest",
        "-rfE",
        f"--rootdir={verdict_dir}/hidden",
        "-c",
        f"{verdict_dir}/pytest.ini",
    ]


@dataclass(frozen=True)
class Plan:
    """Where a scenario task's grading files go and what runs its hidden tests."""

    separate: bool
    """True: the isolated verdict (the launcher). False: the task's test command in the repo,
    scenarios called in pytest's process (modes that do not isolate the verdict)."""
    support: Mapping[str, bytes]
    """Absolute path in the grading workspace -> content: what the stager writes after the diff
    (the scripts, for a verdict in pytest's process; the launcher writes its own)."""
    command: str
    user: int
    """The uid the test command starts as (the launcher's is root)."""
    pytest_uid: int
    scenario_uid: int
    shown: str = ""
    """The command as the record shows it (the launcher's own text named, not inlined)."""
    gates_itself: bool = False
    preamble: bytes = b""
    """What the command reads first on its stdin, written as it starts (ahead of "go"): the
    launcher's and the zygote's code, which so fill no process's argv, and the verdict dir's
    files (``launch.lay_out``)."""

    def record(self) -> dict:
        """What the raw grade keeps about where the scenarios ran."""
        if not self.separate:
            return {"separate": False, "scenarios": "in pytest's process", "pytest_uid": self.pytest_uid}
        return {"separate": True, "pytest_uid": self.pytest_uid, "scenario_uid": self.scenario_uid, "dir": VERDICT_DIR}


@functools.cache
def _script(name: str) -> bytes:
    """One of envs/coding/verdict/'s scripts (read once per process, not once per grade)."""
    return (SCRIPTS / name).read_bytes()


def plan(
    test_command: str,
    hidden: Sequence[str],
    *,
    workdir: str,
    separate: bool,
    uid_wall: bool,
    files: Sequence[HiddenFile] = (),
    preload: Sequence[str] | None = None,
) -> Plan:
    """``hidden``: the modules pytest runs; ``files``: the hidden change (the isolated
    verdict's launcher writes it under hidden/); ``preload``: the top-level modules the repo's
    code imports (``imported_modules``), of which the zygote loads its common ones ahead (None:
    all of them)."""
    lib = {f"{VERDICT_DIR}/lib/{name}": _script(name) for name in ("crucible_probe.py", "crucible_scenario.py")}
    if not separate:
        user = AGENT_UID if uid_wall else ROOT_UID
        names = " ".join(shlex.quote(p) for p in hidden)
        command = (
            f"export PYTHONPATH={VERDICT_DIR}/lib${{PYTHONPATH:+:$PYTHONPATH}} {PROBE_MODE}=in-process\n"
            + test_command.replace("{test_files}", names)
        )
        return Plan(False, lib, command, user, user, user, shown=command)
    refused = workdir_refusal(workdir)
    if refused:
        raise ValueError(refused)
    tester, scenario = (TESTER_UID, AGENT_UID) if uid_wall else (ROOT_UID, ROOT_UID)
    grader = {"pytest.ini": b"[pytest]\n", **{path.removeprefix(f"{VERDICT_DIR}/"): data for path, data in lib.items()}}
    payload = _verdict_files(grader, files)
    # The launcher starts when grading is prepared: its code, the zygote's and the verdict dir's
    # files come first on its stdin (named in the record), then "go".
    launcher, zygote = _script("launch.py"), _script("crucible_scenario.py")

    def argv(boot: str) -> list[str]:
        return [
            "python3",
            "-I",
            "-S",
            "-c",
            boot,
            str(len(launcher)),
            "--verdict",
            VERDICT_DIR,
            "--workdir",
            workdir,
            "--tester-uid",
            str(tester),
            "--scenario-uid",
            str(scenario),
            "--wait-for-go",
            "--zygote-source-bytes",
            str(len(zygote)),
            "--files-bytes",
            str(len(payload)),
            *(["--preload", ",".join(sorted(preload))] if preload is not None else []),
            "--",
            *pytest_options(),
            *hidden,
        ]

    return Plan(
        True,
        {},
        shlex.join(argv(BOOT)),
        ROOT_UID,
        tester,
        scenario,
        shown=shlex.join(argv("<envs/coding/verdict/launch.py>")),
        gates_itself=True,
        preamble=launcher + zygote + payload,
    )


def workdir_refusal(workdir: str) -> str | None:
    """Why an isolated verdict cannot be graded with this workdir (the repo would hold the
    verdict dir, and the diff could write into it), or None."""
    repo = posixpath.normpath(workdir)
    common = posixpath.commonpath([VERDICT_DIR, repo])
    if common == repo:
        return f"workdir {workdir!r} holds {VERDICT_DIR}, where the isolated verdict's own files go"
    if common == VERDICT_DIR:
        return f"workdir {workdir!r} is inside {VERDICT_DIR}, which the isolated verdict writes afresh"
    return None


def _verdict_files(grader: Mapping[str, bytes], hidden: Sequence[HiddenFile]) -> bytes:
    """The launcher's ``--files-bytes`` payload (``launch.lay_out``)."""
    entries = [("grader", "644", rel, data) for rel, data in grader.items()]
    entries += [("hidden", f.mode, f.path, f.data if f.mode != "del" else b"") for f in hidden]
    head = json.dumps([[kind, mode, rel, len(data)] for kind, mode, rel, data in entries])
    return head.encode() + b"\n" + b"".join(data for *_, data in entries)


IMPORT_LINE = r"^[[:space:]]*(import|from)[[:space:]]"
"""What ``git grep`` keeps of the repo's Python files: their import statements' first lines."""


def imported_modules(repo: str, baseline: str) -> list[str]:
    """The top-level modules the baseline's Python files import (``import a.b as c, d``: a, d;
    ``from x.y import z``: x; relative imports name none), read once per repo and commit across
    commands (engine.util.commit_memo). What the zygote may load ahead: a scenario runs the repo's
    code, which imports them. Raises what reading the repo raises (PlanError)."""
    return cast(list[str], remembered("imports", (repo, baseline), lambda: _imported_now(repo, baseline)))


def _imported_now(repo: str, baseline: str) -> list[str]:
    path = repos.resolve_repo(repo)
    found = subprocess.run(
        ["git", "-C", str(path), "grep", "-h", "-I", "-E", IMPORT_LINE, baseline, "--", "*.py"],
        capture_output=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"},
    )
    if found.returncode not in (0, 1):  # 1: no line matched
        raise PlanError(
            f"cannot read the imports of {baseline[:12]} in {path}: {found.stderr.decode(errors='replace')}"
        )
    names: set[str] = set()
    for line in found.stdout.decode("utf-8", "replace").splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] == ["from"] and len(words) > 1:
            names.add(words[1].split(".")[0])  # "" for a relative import: no name
        elif words[:1] == ["import"]:
            for each in " ".join(words[1:]).split(","):
                names.add(each.split(" as ")[0].strip().split(".")[0])
    return sorted(name for name in names if name.isidentifier())
