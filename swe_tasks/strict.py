"""crucible-strict: the integrity defences on the SWE-bench Pro replay, and what decides which.

Under ``integrity=none`` (and ``vault``, whose grading flags are off) grading IS the official
evaluator's steps (``evaluator: official``): nothing here runs. Under ``strict`` the same steps
run with these defences (``evaluator: crucible-strict``, ``raw_grade.defences`` lists them):

- ``test-files-dropped``: the patch's chunks on the instance's test paths (``test_patterns``: the
  usual test paths, the instance's test files and their trees) are left out before it is applied
  (``graded_patch``; the raw grade's ``test_files_dropped`` names them), as the coding flavor's
  ``strict`` drops an agent's test files: code of the agent's that the runner loads beside the
  hidden tests (a conftest, a helper) can rewrite what it prints and reports in its process;
- ``written-diff``: right after ``git apply``, git's own diff of what it wrote (as the image's git
  reads the patch) is the raw grade's ``written`` step: the scan reads added lines from it, the
  trust below touched paths, the chown its paths; a verbatim patch that names its files as git
  does not (a header's ``x/test/a.js``, which git writes to ``test/a.js``), swaps names between
  chunks, or whose hunks' line numbers are off is read as git applied it (``written_diff``);
- ``uid-wall``: run_script.sh runs as uid 1000 (the official one runs as root), its HOME a fresh
  directory of its own; the instance's test files (those ``before_repo_set_cmd`` restores and
  ``selected_test_files_to_run``) root's and read-only, with the ``__init__.py`` and
  ``conftest.py`` beside them, and every directory from them up to the workdir root's and sticky:
  the tested code can read a hidden test but not rewrite, rename or remove it (sh/replay.sh);
  what git apply wrote for the patch (root's) is that uid's again first, and a
  hidden file with a symlinked directory on its path is not locked, so not trusted;
  where the script runs ``npm install``, that HOME starts with a copy of root's npm cache and
  config, which the official run (as root) falls back to offline (``home_from_root``);
  a hidden test file the run script itself removes (``rm``) before a runner whose own results
  confirm the listed tests stays unlocked, and so untrusted, as the official run removes it;
  where run_script.sh itself edits every test file in a ``find | while ... sed -i`` loop
  (NodeBB's), root makes that edit (``sed --sandbox``) of each locked file the lock names itself
  (never one below a directory it names: the patch chose that name, which goes into sed's
  script) before the run and the script's own call answers with no write (swe_tasks/edits.py);
  the helpers the listed names name by the loop's ``FILE::`` are locked too
  (``described_test_files``);
- ``end-marker``: run_script.sh's stdout and stderr reach root-only files through FIFOs; when it
  exits a one-time token ends both, every uid-1000 process is killed, then the files close. The
  official parser reads only what came before the marker; what came after is kept in
  ``run_script.after_end`` and never parsed;
- ``worst-status``: a name the parser reports with two statuses counts by its worst (officially
  one PASSED line is enough, so a printed PASSED line beside the real FAILED one wins);
- ``scan``: the test-awareness scan (envs/integrity/scan/) of the Python files the patch
  changes, as they stand after apply and before_repo_set_cmd; a finding the task does not allow
  (``allow_test_aware``) scores 0 under ``refuse_test_aware_code``;
- ``junit-confirms``: where the instance's run_script.sh runs pytest (or ``ansible-test units``),
  each pytest session writes a JUnit report of its own into a fresh directory outside the repo
  (a plugin pytest autoloads from the tests' user site-packages or PYTHONPATH); a listed test
  passes only if the parser AND those reports say so (swe_tasks/junit.py);
- ``go-json-confirms``: where it runs ``go test``, the go command writes test2json events
  (``-json`` appended to ``GOFLAGS``, or given to ``go test`` alone by a root-owned ``go`` first
  on run_script.sh's PATH where it also runs ``go list``), the parser reads the text rebuilt from them, and a listed
  test passes only if the parser AND the events' ``pass`` say so (swe_tasks/gojson.py);
- ``js-results-confirms``: where it runs jest or mocha, a root-owned hook (``NODE_OPTIONS=--require``,
  and a root-owned ``node`` first on PATH that puts it back where a script replaced NODE_OPTIONS)
  has the runner's CLI write its own results into that fresh directory (jest's ``--json``, or a
  results processor; mocha's runner events), and a listed test passes only if the parser AND
  those results say so (swe_tasks/jsresults.py). Elsewhere (tutanota's own runner, unittest,
  ansible-test, ...) the parser alone judges;
- ``differential-rerun``: the same steps again in a second fresh grading container, the selected
  test files in reverse order; the two verdicts must agree on every fail_to_pass/pass_to_pass
  name (and on resolved), or the run scores 0 as tampered; both are recorded.

Pure functions of the recorded raw grade where they judge, so a stored run regrades.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.interfaces import AGENT_UID
from engine.models import TestResult
from envs.coding import rerun
from envs.coding.protect import DEFAULT_TEST_PATHS
from envs.coding.testrun import RESULTS_ROOT
from envs.integrity import patch as patches
from envs.integrity.scan import model, scanner
from envs.integrity.sources.base import merge_worst
from swe_tasks import defences as swe_defences
from swe_tasks import edits, jsresults

OFFICIAL = "official"
STRICT = "crucible-strict"
TEST_UID = AGENT_UID
TAMPERED_RERUN = (
    "tampered: the differential re-run (a second fresh grading container, the test files "
    "in another order) disagrees on the listed tests"
)


def applies(integrity: Any) -> bool:
    """Whether grading under ``integrity`` is crucible-strict (any grading defence on), not the
    official evaluator."""
    return bool(
        integrity.uid_wall
        or integrity.named_results_only
        or integrity.refuse_test_aware_code
        or integrity.differential_rerun
    )


def defences(integrity: Any) -> list[str]:
    """What a crucible-strict grading applies, by name (recorded in the raw grade): the
    catalogue's grading defences on under ``integrity`` (swe_tasks/defences.py)."""
    return swe_defences.grading(integrity) if applies(integrity) else []


@dataclass(frozen=True)
class Plan:
    """One crucible-strict grading's inputs to sh/replay.sh."""

    token: str
    """The end marker's one-time token: on the script's stdin, never in an argv or environment."""
    lock: tuple[str, ...]
    scan: tuple[str, ...]
    reverse: bool = False
    """The differential re-run: the selected test files in reverse order."""
    results_dir: str = ""
    """A fresh directory outside the repo, named at random, for the runners' own results
    (swe_tasks/junit.py, jsresults.py)."""
    unlocked: tuple[str, ...] = ()
    """Hidden test files left unlocked because the run script removes them itself before its
    runner starts (``rm``, swe_tasks/edits.py ``removals``), on a runner whose own results
    confirm the listed tests: locked, such a file would outlive the ``rm`` that the official run
    makes, without the helpers beside it; unlocked, it is not trusted (``trusted_test_files``),
    so nothing in it answers for a hidden test."""
    edit: edits.Loop | None = None
    """run_script.sh's own edit of every test file (swe_tasks/edits.py), made by root on the
    locked ones: read once here, for the lock (the helpers its names name) and for the replay."""

    def args(self) -> list[str]:
        return ["strict", "\n".join(self.lock), "\n".join(self.scan), str(TEST_UID), self.results_dir]


def plan(task: Any, patch: str, *, reverse: bool = False, run_script: bytes = b"") -> Plan:
    named = hidden_test_files(task)
    hidden = named + [alike for rel in named for alike in _pattern_alikes(rel) if alike not in named]
    edit = edits.loop(run_script)
    if edit is not None:
        hidden += [rel for rel in described_test_files(task) if rel not in hidden]
    last_runner = jsresults.last_runner_line(run_script)
    removes = [r for r in edits.removals(run_script) if r.line < last_runner]
    lock = [rel for rel in hidden if not edits.removed(removes, rel)]
    return Plan(
        secrets.token_hex(16),
        tuple(lock),
        tuple(scan_paths(task, patch)),
        reverse,
        f"{RESULTS_ROOT}-{secrets.token_hex(8)}",
        tuple(rel for rel in named if rel not in lock),
        edit,
    )


_NPM_INSTALL = re.compile(rb"(?<![\w-])npm[ \t]+(?:[^\n;|&]*[ \t])?(?:install|i|ci|add)(?![\w-])")


def home_from_root(run_script: bytes) -> list[str]:
    """What of root's HOME the tests' fresh HOME gets a copy of: npm's cache and config where
    run_script.sh runs ``npm install`` (or ``i``, ``ci``, ``add``) on a line that is not a comment.
    The official run, as root, has the cache the image's build filled: offline, npm falls back to
    it (11 of NodeBB's scripts ``npm install lodash underscore async`` at test time); a fresh HOME
    has none, and npm fails (``EAI_AGAIN``)."""
    lines = [line for line in run_script.splitlines() if not line.lstrip().startswith(b"#")]
    return [".npm", ".npmrc"] if any(_NPM_INSTALL.search(line) for line in lines) else []


def _relative_paths(found: list[str]) -> list[str]:
    kept: list[str] = []
    for rel in found:
        rel = rel.strip()
        if rel and not rel.startswith("/") and ".." not in rel.split("/") and rel not in kept and "\n" not in rel:
            kept.append(rel)
    return kept


def restored_test_files(task: Any) -> list[str]:
    """The paths the last line of ``before_repo_set_cmd`` checks out (``git checkout SHA -- PATHS``):
    their content is the benchmark's whatever the patch did."""
    line = str(task.before_repo_set_cmd).strip().split("\n")[-1] if task.before_repo_set_cmd else ""
    try:
        words = shlex.split(line)
    except ValueError:
        words = []
    return _relative_paths(words[words.index("--") + 1 :] if "--" in words else [])


def hidden_test_files(task: Any) -> list[str]:
    """The instance's test files: the paths the last line of ``before_repo_set_cmd`` checks out
    (``git checkout SHA -- PATHS``) and ``selected_test_files_to_run``, relative, in order."""
    return _relative_paths([*restored_test_files(task), *(str(f) for f in task.selected_test_files_to_run)])


def described_test_files(task: Any) -> list[str]:
    """The files the listed names name (``FILE | test``) that are not the instance's test files:
    where run_script.sh puts ``FILE::`` before every describe title (swe_tasks/edits.py), NodeBB's
    parser names a describe a helper holds by the helper (7 instances: ``test/user/emails.js``,
    required by the selected ``test/user.js``). Locked, and trusted where the patch leaves them
    alone, so the helper such a name names is the benchmark's. Which describe carries that
    ``FILE::`` is mocha's record, made in the process the patch's code runs in: code there can
    make a describe with the same title (NodeBB's test/user.js loads its helpers through the
    patch's ``src/file.js``), as it can write mocha's results outright (the in-process limit,
    docs/swebench_pro.md)."""
    named = hidden_test_files(task)
    files = [
        str(name).partition(" | ")[0].strip() for name in [*task.fail_to_pass, *task.pass_to_pass] if " | " in str(name)
    ]
    return [rel for rel in _relative_paths(files) if rel not in named and not rel.endswith("/")]


def _pattern_alikes(rel: str) -> list[str]:
    """The files a selected test path also names as a JavaScript runner's path pattern: element-hq
    selects ``x-test.ts`` for ``x-test.tsx`` (jest matches the pattern anywhere in the path)."""
    return [rel + "x"] if rel.endswith((".ts", ".js")) else []


def trusted_test_files(task: Any, patch: str, locked: Collection[str], written: str = "") -> list[str]:
    """The hidden test files whose content is the benchmark's, absolute: those ``before_repo_set_cmd``
    restores, and the selected ones (and their ``_pattern_alikes``, and ``described_test_files``)
    the patch does not touch;
    of those, only the files the lock made root's (``locked``, relative: they existed, and
    nothing of the tests' uid can change or replace them). A selected path may name no file at
    base (protonmail's are relative to a workspace): a file the patch, or anything at run time,
    puts there is not the benchmark's and never answers for a hidden test. A patch that cannot
    be read leaves the restored files alone. ``written``: git's own diff of what it wrote for the
    patch (the ``written`` step), whose paths count as touched beside the patch's own reading:
    a verbatim patch can name ``x/test/a.js`` where git writes ``test/a.js``."""
    restored = restored_test_files(task)
    try:
        touched: set[str] | None = {
            path
            for text in (patch, written)
            for chunk in patches.parse_chunks(patch_bytes(text))
            for path in chunk.paths
        }
    except ValueError:
        touched = None
    selected = [
        alike
        for rel in _relative_paths([str(f) for f in task.selected_test_files_to_run])
        for alike in (rel, *_pattern_alikes(rel))
    ] + described_test_files(task)
    kept = [*restored, *(rel for rel in selected if touched is not None and rel not in touched and rel not in restored)]
    root = str(task.workdir).rstrip("/")
    return [f"{root}/{rel}" for rel in dict.fromkeys(kept) if rel in locked]


def test_patterns(task: Any) -> tuple[str, ...]:
    """Where tests live (read as tests: importing the runner is their point), the instance's test
    files and the trees they lie in (``test_trees``) beside the usual test paths."""
    hidden = hidden_test_files(task)
    return (*DEFAULT_TEST_PATHS, *hidden, *test_trees(hidden))


def test_trees(files: Sequence[str]) -> list[str]:
    """The test trees of an instance's test files under a directory named ``test`` (which the
    usual test paths leave out: django/test/ is library code): ansible's hidden tests lie in
    ``test/units/...``, where the helpers beside them (``test/units/mock/procenv.py``) import
    unittest as tests do. The directory below ``test`` names the tree (``test/units/**``, not
    ``test/lib/``, where ansible-test's own code is), or ``test/**`` for a file right in it."""
    trees: list[str] = []
    for rel in files:
        parts = rel.split("/")
        if "test" not in parts[:-1]:
            continue
        at = parts.index("test")
        trees.append("/".join(parts[: at + 2] if at + 2 < len(parts) else parts[: at + 1]) + "/**")
    return list(dict.fromkeys(trees))


def patch_bytes(patch: str) -> bytes:
    return patches.ensure_trailing_newline(patch.encode("utf-8", "surrogateescape")) if patch.strip() else b""


def graded_patch(task: Any, patch: str) -> tuple[str, list[str]]:
    """(the patch crucible-strict applies, the paths it leaves out): the patch less each file's
    chunk that touches the instance's test paths (``test_patterns``), as the coding flavor's
    ``strict`` drops an agent's test files. The agent's own test files (a ``conftest.py``, a test
    package's ``__init__.py``, a helper, a new test module) run in the runner's process beside the
    hidden tests, where code can rewrite what the runner prints and the report it writes, in the
    same process and before its end, with no name the scan reads (a review's attack: a conftest
    that wraps the terminal writer's ``write`` and rewrites every JUnit report in
    ``pytest_unconfigure`` made a failing listed test PASSED in the parser's reading and in
    crucible's report). The hidden tests come from the benchmark, with the test files they need;
    what the agent wrote among them is not graded.

    Read as git apply reads it: text before the first ``diff --git`` (a mail's headers and
    message, as ``git format-patch`` writes them) is kept and ignored, header lines may end in
    CR (a patch saved with CRLF line ends), and a copy names the path it writes. A patch that
    cannot be read so (no ``diff --git`` at all, a preamble git could read as a patch of its
    own, a chunk that names no path) is applied as it is: ``git apply`` is the judge of it, as
    under ``none``, and a test path git then writes is refused (``test_paths_written``)."""
    if not patch.strip():
        return patch, []
    data = patch_bytes(patch)
    start = 0 if data.startswith(patches.HEADER) else data.find(b"\n" + patches.HEADER) + 1
    if (start == 0 and not data.startswith(patches.HEADER)) or _READS_AS_A_PATCH.search(data[:start]):
        return patch, []
    patterns = test_patterns(task)
    kept, dropped = [data[:start]], []
    for chunk in patches.split_chunks(data[start:]):
        names = _named_paths(chunk)
        if not names:
            return patch, []
        named = [path for path in names if patches.is_protected(path, patterns)]
        if named:
            dropped += [path for path in named if not path.startswith(("a/", "b/"))] or named
        else:
            kept.append(chunk)
    if not dropped:
        return patch, []
    return b"".join(kept).decode("utf-8", "surrogateescape"), list(dict.fromkeys(dropped))


_READS_AS_A_PATCH = re.compile(rb"(?m)^(?:--- |\+\+\+ |@@ |\*\*\* |Index: |diff )")
"""A line before the first ``diff --git`` that git apply (or patch) could take for part of a
patch of its own (a traditional unified or context diff)."""
_NAMING = ("rename from ", "rename to ", "copy from ", "copy to ")


def _named_paths(chunk: bytes) -> list[str]:
    """Every path a chunk's text names: its ``diff --git`` line's, its rename and copy lines',
    and its ``---``/``+++`` lines' as written and with the one leading component git apply
    strips (which git goes by: a header can name ``calc.py`` while those lines write
    ``tests/conftest.py``), each line less a CR at its end, as git reads it. What git then
    wrote is checked too (``test_paths_written``)."""
    header: list[str] = []
    for line in chunk.decode("utf-8", "surrogateescape").split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        if header and line.startswith(("@@", "GIT binary patch")):
            break
        header.append(line)
    try:
        found = [
            path
            for path in patches.chunk_paths("\n".join(header).encode("utf-8", "surrogateescape")).paths
            if path != "/dev/null"
        ]
    except ValueError:  # a copy's header names two paths; its copy lines name them
        found = []
    for line in header[1:]:
        if line.startswith(("--- ", "+++ ")):
            name = patches.path_field(line[4:].split("\t")[0])
            if name != "/dev/null":
                found += [name, name.split("/", 1)[-1]]
        for word in _NAMING:
            if line.startswith(word):
                found.append(patches.path_field(line[len(word) :]))
    return list(dict.fromkeys(found))


def test_paths_written(raw: Mapping[str, Any], task: Any) -> list[str]:
    """The paths under the instance's test paths that git wrote for the graded patch (its own diff,
    the ``written`` step): none unless git read a name otherwise than ``graded_patch`` did."""
    written = raw.get("written") or {}
    if written.get("exit_code") != 0 or not str(written.get("output") or "").strip():
        return []
    try:
        chunks = patches.parse_chunks(patch_bytes(str(written["output"])))
    except ValueError:
        return []
    patterns = test_patterns(task)
    return [
        path for chunk in chunks for path in chunk.paths if path != "/dev/null" and patches.is_protected(path, patterns)
    ]


def scan_paths(task: Any, patch: str) -> list[str]:
    try:
        # Python files only: the evaluator strips binary hunks (the shell also sends back each
        # Python file git wrote; one past its count is unscannable in the scan)
        return [p for p in scanner.paths_to_read(patch_bytes(patch), test_patterns(task)) if p.endswith(".py")][:200]
    except ValueError:
        return []


def written_diff(raw: Mapping[str, Any], patch: str) -> str:
    """What the scan reads added lines from: git's own diff of what it wrote for the patch (the
    raw grade's ``written`` step), so a verbatim patch that swaps names between chunks or whose
    hunks' line numbers are off is read as git applied it; the patch itself for a raw grade
    recorded before that step existed."""
    written = raw.get("written")
    return str(written.get("output", "")) if written is not None and written.get("exit_code") == 0 else patch


def scan(task: Any, patch: str, contents: Mapping[str, bytes], refuse: bool) -> dict[str, Any]:
    """The scan's record (the coding flavor's shape): findings on the lines ``patch`` adds (pass
    ``written_diff``). The agent's own test files run here, so ``runner-output`` reads them too,
    and the language rules as tests (a Python one for runner plugins, a JavaScript one for
    patching): only the files ``before_repo_set_cmd`` restores are left to the benchmark."""
    try:
        findings = scanner.scan(
            patch_bytes(patch), dict(contents), test_patterns(task), runner_output_skips=restored_test_files(task)
        )
    except ValueError as exc:
        return {"refuse": refuse, "findings": [], "error": f"patch not read: {exc}"}
    return {"refuse": refuse, "findings": [f.to_dict() for f in findings]}


def split_end(data: bytes | None, token: str) -> tuple[bytes | None, bytes, bool]:
    """(what came before the end marker, what came after it, whether it was there)."""
    if data is None:
        return None, b"", False
    marker = f"\n{token} end ".encode()
    at = data.find(marker)
    if at < 0:
        return data, b"", False
    line_end = data.find(b"\n", at + len(marker))
    return data[:at], data[line_end + 1 :] if line_end >= 0 else b"", True


def statuses(raw: Mapping[str, Any]) -> list[TestResult]:
    """The parser's statuses, one per name, the worst where a name is reported more than once."""
    entries = (raw.get("parser") or {}).get("tests") or []
    return merge_worst(
        TestResult(str(e["name"]), str(e["status"]))
        for e in entries
        if isinstance(e, dict)
        and isinstance(e.get("name"), str)
        and e.get("status") in ("PASSED", "FAILED", "SKIPPED", "ERROR")
    )


def reads_printed_results(raw: Mapping[str, Any], listed: Sequence[Mapping[str, Any]]) -> bool:
    """Whether this grading's verdict still rests on result lines the code under test can print:
    a listed test judged by the parser alone (no runner result confirms it: tutanota's runner),
    or a go command that framed nothing (older than Go 1.20). Only there does a ``runner-output``
    finding refuse: elsewhere a printed pass line passes nothing, and the finding is recorded."""
    return (raw.get("go_json") or {}).get("framed") is False or any(
        list(entry.get("judged_by") or []) == ["parser"] for entry in listed
    )


def refusal(raw: Mapping[str, Any], task: Any, listed: Sequence[Mapping[str, Any]]) -> str | None:
    """Why a crucible-strict grading is 0 whatever the parser says, or None. ``listed``: the
    listed tests as confirmed (who judged each), for ``reads_printed_results``."""
    run = raw.get("run_script") or {}
    end = run.get("end") or {}
    if end and not (end.get("stdout") and end.get("stderr")):
        return "no end marker after run_script.sh: its output cannot be told from what came after"
    written = raw.get("written")
    if written is not None and written.get("exit_code") != 0:
        return f"what the patch wrote could not be read back (git: {str(written.get('output', ''))[:300]})"
    sneaked = test_paths_written(raw, task) if "test-files-dropped" in (raw.get("defences") or []) else []
    if sneaked:
        return (
            f"tampered: git wrote {sneaked[0]}, under the instance's test paths, for a chunk whose text "
            "named no test path (the agent's test files are not graded)"
        )
    found = raw.get("scan") or {}
    if found.get("refuse"):
        findings = [
            f
            for f in found.get("findings") or []
            if f.get("rule") != "runner-output" or reads_printed_results(raw, listed)
        ]
        refused, _ = model.judge(findings, allowances(task))
        if refused:
            first = model.Finding(**refused[0]).describe()
            more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
            return f"test-aware code: {first}{more}"
    return None


def allowances(task: Any) -> list[model.Allowance]:
    return [model.Allowance(a.rule, a.path, a.reason) for a in getattr(task, "allow_test_aware", None) or []]


def differences(first: Mapping[str, Any], second: Mapping[str, Any], listed: Sequence[str]) -> list[str]:
    """Where the two gradings disagree on the listed tests (and on resolved)."""
    return rerun.differences(
        1.0 if first.get("resolved") else 0.0,
        statuses(first),
        1.0 if second.get("resolved") else 0.0,
        statuses(second),
        judged=set(listed),
    )
