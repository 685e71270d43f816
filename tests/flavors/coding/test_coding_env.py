"""The coding env's repo lifecycle and grader, on real containers from a real task image.

The image is built from Dockerfile.hud (tests/coding_task.py): /app at the baseline with
no .git, the history in the root-only vault, and NOT the golden or test branches. Each
test provisions what it needs; a grading workspace is always a fresh container.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import coding_task as ct
import pytest

from engine.errors import GradeError
from engine.models import CapturedSubmission
from envs.coding import canary
from envs.coding.flavor import CodingFlavor, hidden_files
from envs.coding.gitops import VAULT
from envs.coding.grader import grade
from envs.coding.hidden import HiddenFile
from envs.coding.judging import regrade, verdict_from_test_result
from envs.coding.repo import capture_diff, setup_repo
from envs.integrity import patch

ROOT_GIT = ["git", f"--git-dir={ct.WORKDIR}/.git", f"--work-tree={ct.WORKDIR}"]


async def sh(ws, script: str, user: int = 0):
    return await ws.exec(["bash", "-c", script], user=user, cwd=ct.WORKDIR)


golden_diff = ct.golden_diff


# ----------------------------------------------------------------------- setup


@pytest.mark.slow
@pytest.mark.docker
def test_fresh_repo_has_one_commit_no_reflog_no_remote_and_no_answer_key(workspace, run, repo):
    ws = workspace()
    run(setup_repo(ws, ct.task(repo), ct.integrity("strict")))

    commits = run(ws.exec([*ROOT_GIT, "log", "--all", "--format=%H"])).stdout.split()
    assert len(commits) == 1
    every = run(ws.exec([*ROOT_GIT, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"])).stdout.split()
    listing = run(ws.exec([*ROOT_GIT, "rev-list", "--objects", "--all"])).stdout
    reachable = {line.split()[0] for line in listing.splitlines()}
    assert set(every) == reachable and commits[0] in reachable
    reflog = run(ws.exec([*ROOT_GIT, "reflog", "show", "--all"]))
    assert reflog.ok and reflog.stdout == b"", reflog.text()
    assert run(ws.exec([*ROOT_GIT, "remote"])).stdout == b""
    assert run(ws.exec([*ROOT_GIT, "for-each-ref", "--format=%(refname)"])).stdout == b"refs/heads/main\n"
    assert run(ws.exec(["test", "-e", f"{ct.WORKDIR}/.git/logs"])).exit_code == 1

    # The agent's own git works on it, shows a clean tree, and the vault is out of its reach.
    status = run(sh(ws, "git status --porcelain && git log --oneline | wc -l", user=1000))
    assert status.ok and status.stdout == b"1\n", status.text()
    assert run(ws.exec(["ls", VAULT], user=1000)).exit_code != 0

    # Nothing of the answer key anywhere (searched as root, one pass over every file); the
    # same pass finds the baseline's buggy line, so the search does look where it should.
    control = "echo $(( $1 - $2 ))"
    search = (
        'for d in /*; do case "$d" in /proc|/sys|/dev) continue;; esac; '
        'grep -rsohF -e "$1" -e "$2" -e "$3" -- "$d"; done | sort -u; true'
    )
    found = run(ws.exec(["bash", "-c", search, "search", control, ct.GOLDEN_MARKER, ct.HIDDEN_MARKER])).stdout
    assert found.decode().splitlines() == [control]
    for sha in (repo.golden, repo.test):
        for git_dir in (VAULT, f"{ct.WORKDIR}/.git"):
            assert run(ws.exec(["git", f"--git-dir={git_dir}", "cat-file", "-e", sha])).exit_code != 0


@pytest.mark.docker
def test_without_vault_the_agent_gets_history_as_cloned_and_the_vault_stays(workspace, run, repo):
    ws = workspace()
    run(setup_repo(ws, ct.task(repo), ct.integrity("none")))
    log = run(sh(ws, "git log --format=%H && git status --porcelain"))  # as root, the agent of mode none
    assert log.ok, log.text()
    assert log.stdout.split()[0] == repo.baseline.encode() and len(log.stdout.split()) == 2
    assert run(ws.exec(["git", f"--git-dir={VAULT}", "rev-parse", "HEAD"])).stdout.strip() == repo.baseline.encode()


# ----------------------------------------------------------------------- capture

AGENT_WORK = r"""
set -e
printf 'add() { echo $(( $1 + $2 )); }\n' > calc.sh
mkdir -p newdir && printf 'new\n' > newdir/new.txt
rm obsolete.txt
mkdir -p moved && mv old_name.txt moved/name.txt
printf '\000\001\002\377binary' > blob.bin
chmod +x scripts/tool.sh
printf '@echo off\r\necho changed\r\n' > w.bat
# protected paths (strict drops them): the hidden test, the runner, test-runner config
printf 'test_ok() { :; }\n' > tests/test_calc.sh
printf 'exit 0\n' >> tests/runner.sh
printf 'x\n' > conftest.py && mkdir -p sub && printf '[pytest]\n' > sub/pytest.ini && printf 'import os\n' > evil.pth
# repos inside the tree (an empty one would fail a plain `git add -A`): left out of the capture
git init -q "vendor/empty repo" && git init -q vendor/full && printf 'v\n' > vendor/full/v.txt
git -C vendor/full add -A && git -C vendor/full -c user.name=a -c user.email=a@b commit -qm v
"""

TAMPER = r"""
set -e
mkdir -p .git/evil
for name in pre-commit post-index-change fsmonitor ext clean; do
  printf '#!/bin/sh\ntouch /tmp/pwned-%s\ncat\n' "$name" > ".git/evil/$name"; chmod +x ".git/evil/$name"
done
cp .git/evil/pre-commit .git/hooks/pre-commit; cp .git/evil/post-index-change .git/hooks/post-index-change
git config core.hooksPath "$PWD/.git/evil"
git config core.fsmonitor "$PWD/.git/evil/fsmonitor"
git config diff.external "$PWD/.git/evil/ext"
git config filter.evil.clean "$PWD/.git/evil/clean"
printf '* filter=evil\n' > .git/info/attributes
printf '*\n' > .git/info/exclude
git add -A && git commit -qm 'agent commit'
printf 'garbage' > .git/index
"""


@pytest.mark.docker
def test_capture_carries_every_kind_of_change_and_ignores_the_agents_git(workspace, run, repo):
    ws = workspace()
    task = ct.task(repo)
    run(setup_repo(ws, task, ct.integrity("strict")))
    for script in (AGENT_WORK, TAMPER):
        done = run(sh(ws, script, user=1000))
        assert done.ok, done.text()
    pwned = lambda: run(ws.exec(["bash", "-c", "ls /tmp/pwned-* 2>/dev/null; true"])).stdout  # noqa: E731
    assert b"pwned-pre-commit" in pwned()  # the traps are live: the agent's own commit sprang one
    run(ws.exec(["bash", "-c", "rm -f /tmp/pwned-*"]))

    sub = run(capture_diff(ws, task, ct.integrity("strict")))

    assert pwned() == b""
    protected = ["conftest.py", "evil.pth", "sub/pytest.ini", "tests/runner.sh", "tests/test_calc.sh"]
    assert sub.violations == protected
    assert sub.files_changed == sorted(
        [
            "blob.bin",
            "calc.sh",
            "moved/name.txt",
            "newdir/new.txt",
            "obsolete.txt",
            "old_name.txt",
            "scripts/tool.sh",
            "w.bat",
            *protected,
        ]
    )
    chunks = {c.new_path: c.data.decode() for c in patch.parse_chunks(sub.diff.encode())}
    assert set(chunks) == {
        "blob.bin",
        "calc.sh",
        "moved/name.txt",
        "newdir/new.txt",
        "obsolete.txt",
        "scripts/tool.sh",
        "w.bat",
    }
    assert "new file mode 100644" in chunks["newdir/new.txt"]
    assert "deleted file mode 100644" in chunks["obsolete.txt"]
    assert "rename from old_name.txt\nrename to moved/name.txt" in chunks["moved/name.txt"]
    assert "GIT binary patch" in chunks["blob.bin"]
    assert "old mode 100644\nnew mode 100755" in chunks["scripts/tool.sh"]
    assert "+echo changed\n" in chunks["w.bat"]  # eol=crlf: captured in git's form, as the baseline's attributes say

    # The captured diff applies to the pristine baseline (host side, outside any container).
    check = subprocess.run(
        ["git", "-C", str(repo.path), "apply", "--check", "--cached", "--binary", "-"],
        input=sub.diff.encode(),
        capture_output=True,
    )
    assert check.returncode == 0, check.stderr.decode()


@pytest.mark.docker
def test_capture_of_an_untouched_repo_is_empty(workspace, run, repo):
    ws = workspace()
    task = ct.task(repo)
    run(setup_repo(ws, task, ct.integrity("vault")))
    # Without the uid wall the agent is root in uid 1000's tree: its git still works there.
    status = run(sh(ws, "git status --porcelain && git log --oneline | wc -l"))
    assert status.ok and status.stdout == b"1\n", status.text()
    sub = run(capture_diff(ws, task, ct.integrity("vault")))
    assert (sub.diff, sub.files_changed, sub.violations) == ("", [], [])


# ----------------------------------------------------------------------- grade


@pytest.mark.docker
def test_agent_edit_to_hidden_test_is_lost(workspace, run, repo):
    task, integrity = ct.task(repo), ct.integrity("none")  # none: nothing dropped at capture
    ws = workspace()
    run(setup_repo(ws, task, integrity))
    # Had this file survived, the run would pass: it defines one passing test and no others.
    run(sh(ws, "printf 'test_ok() { :; }\\n' > tests/test_calc.sh"))
    sub = run(capture_diff(ws, task, integrity, hidden_paths=[ct.HIDDEN]))
    assert "tests/test_calc.sh" in sub.diff and sub.violations == []

    verdict = run(grade(workspace("grade"), task, integrity, sub, hidden_files(task), timeout=120))
    assert verdict.reward == 0.0 and verdict.raw["reason"] == "tests failed"
    assert "FAILED test_add" in verdict.raw["test"]["output_tail"]


@pytest.mark.docker
def test_golden_diff_scores_one_and_regrades_from_raw(workspace, run, repo):
    task, integrity = ct.task(repo), ct.integrity("strict")
    ws = workspace("grade")
    submission = CapturedSubmission(diff=golden_diff(repo))
    verdict = run(grade(ws, task, integrity, submission, hidden_files(task), timeout=120))
    assert verdict.reward == 1.0, verdict.raw
    # What grading staged from the diff belongs to the uid the tests ran as; the hidden test
    # stays root's, read-only to it, in a directory made root's and sticky (nothing the tests
    # run can rewrite, rename or remove it; pytest can still create its __pycache__ there).
    staged = ["lib", "lib/helper.sh", "data/blob.bin", "renamed", "renamed/name.txt", "calc.sh"]
    owners = run(ws.exec(["stat", "-c", "%u", "--", *staged], cwd=ct.WORKDIR)).stdout.split()
    assert owners == [b"1000"] * len(staged)
    hidden_dir = ct.HIDDEN.rsplit("/", 1)[0]
    modes = run(ws.exec(["stat", "-c", "%u %a", "--", ct.HIDDEN, hidden_dir], cwd=ct.WORKDIR)).stdout.split(b"\n")
    assert modes[:2] == [b"0 644", b"0 1777"], modes
    assert verdict.raw["reason"] == "tests passed" and verdict.raw["test"]["user"] == 1000
    assert verdict.raw["hidden_files"] == [ct.HIDDEN]
    assert set(verdict.raw["durations"]) == {"stage", "hidden", "scan", "test"}
    assert regrade(verdict.raw) == verdict


@pytest.mark.docker
def test_a_deletion_in_the_hidden_change_never_removes_what_the_change_writes(workspace, run, repo):
    """tests/fx/a.txt deleted where tests/fx becomes a file (the change sorts the file first):
    the deletion finds no directory there and leaves the written file alone."""
    task = ct.task(repo, hidden_tests=[], test_command="grep -qx fx tests/fx && echo '1 passed'")
    change = [HiddenFile("tests/fx", "644", b"fx\n"), HiddenFile("tests/fx/a.txt", "del"), HiddenFile(ct.HIDDEN, "del")]
    verdict = run(
        grade(
            workspace("grade"),
            task,
            ct.integrity("strict"),
            CapturedSubmission(diff=golden_diff(repo)),
            change,
            timeout=120,
        )
    )
    assert verdict.raw["hidden_deleted"] == ["tests/fx/a.txt", ct.HIDDEN]
    assert (verdict.reward, verdict.raw["reason"]) == (1.0, "tests passed"), verdict.raw["test"]["output_tail"]


@pytest.mark.docker
def test_a_diff_that_does_not_apply_scores_zero_with_the_reason(workspace, run, repo):
    task, integrity = ct.task(repo), ct.integrity("strict")
    stale = golden_diff(repo).replace("-add() { echo $(( $1 - $2 )); }", "-add() { echo nothing; }")
    verdict = run(
        grade(workspace("grade"), task, integrity, CapturedSubmission(diff=stale), hidden_files(task), timeout=120)
    )
    assert verdict.reward == 0.0 and verdict.raw["reason"] == "diff does not apply"
    assert "calc.sh" in verdict.raw["apply"]["attempts"][0]["output"]
    assert "test" not in verdict.raw


@pytest.mark.docker
def test_a_passing_exit_without_tests_run_scores_zero(workspace, run, repo):
    task = ct.task(repo, test_command="bash tests/runner.sh")  # no test files: "0 passed"
    verdict = run(
        grade(
            workspace("grade"),
            task,
            ct.integrity("strict"),
            CapturedSubmission(diff=golden_diff(repo)),
            hidden_files(task),
            timeout=120,
        )
    )
    assert verdict.raw["test"]["exit_code"] == 0
    assert verdict.reward == 0.0 and verdict.raw["reason"] == "no tests ran"


@pytest.mark.docker
def test_a_diff_with_crlf_line_ends_and_no_final_newline_still_applies(workspace, run, repo):
    task = ct.task(repo)
    calc_only = subprocess.run(
        ["git", "-C", str(repo.path), "diff", repo.baseline, repo.golden, "--", "calc.sh"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    mangled = calc_only.replace("\n", "\r\n").rstrip("\r\n")  # as a Windows tool might hand it back
    verdict = run(
        grade(
            workspace("grade"),
            task,
            ct.integrity("strict"),
            CapturedSubmission(diff=mangled),
            hidden_files(task),
            timeout=120,
        )
    )
    attempts = verdict.raw["apply"]["attempts"]
    outcomes = [(a["variant"], a["exit_code"] == 0) for a in attempts]
    assert outcomes == [("as-captured", False), ("crlf-normalised", True)]
    assert "test_add" not in verdict.raw["test"]["output_tail"]  # the fix applied: test_add passes
    assert verdict.raw["reason"] == "tests failed"  # the rest of the golden is missing


@pytest.mark.docker
def test_grading_without_the_vault_raises_grade_error(workspace, run, repo):
    task = ct.task(repo)
    ws = workspace("grade")
    run(ws.exec(["rm", "-rf", VAULT]))
    with pytest.raises(GradeError, match="vault"):
        run(
            grade(
                ws,
                task,
                ct.integrity("strict"),
                CapturedSubmission(diff=golden_diff(repo)),
                hidden_files(task),
                timeout=120,
            )
        )


@pytest.mark.slow
@pytest.mark.docker
def test_golden_staged_through_derived_validation_and_the_flavor_scores_one(workspace, run, repo):
    from envs.coding.validation import derive_validation

    spec = ct.spec(ct.task(repo), "strict", "timeouts.setup=120", "timeouts.grade=300")
    flavor = CodingFlavor()
    ws = workspace()
    run(flavor.setup(ws, spec))
    tools = flavor.tools(ws, spec)
    assert tools.user == 1000
    for step in derive_validation(repo.path, repo.baseline, repo.golden, ct.WORKDIR):
        text, is_error = run(tools.call(step["name"], step["arguments"]))
        assert not is_error, (step, text)
    submission = run(flavor.capture(ws, spec))
    assert submission.violations == []
    # latin1.txt is not UTF-8: carried as a binary patch so the diff stays valid text.
    assert "diff --git a/latin1.txt b/latin1.txt" in submission.diff

    verdict = run(flavor.grade(workspace("grade"), spec, submission))
    assert verdict.reward == 1.0, verdict.raw
    assert verdict.raw["test"]["output_tail"].endswith("11 passed, 0 failed\n")


# ----------------------------------------------------------------------- pure parts (no container)


@pytest.mark.parametrize(
    "applied, code, timed_out, tail, reason",
    [
        (True, 0, False, "3 passed in 0.1s", "tests passed"),
        (False, None, False, "", "diff does not apply"),
        (True, 124, True, "1 passed", "test timeout"),
        (True, 1, False, "1 failed, 2 passed", "tests failed"),
        (True, 0, False, "no tests ran in 0.01s", "no tests ran"),
        (True, 0, False, "0 passed", "no tests ran"),
    ],
)
def test_verdict_is_a_pure_function_of_captured_outputs(applied, code, timed_out, tail, reason):
    verdict = verdict_from_test_result(applied=applied, test_exit_code=code, timed_out=timed_out, output_tail=tail)
    assert verdict.raw["reason"] == reason
    assert verdict.reward == (1.0 if reason == "tests passed" else 0.0) == verdict.subscores["tests"]


CANARY = {"nodeid": "tests/test_0123456789abcdef.py::test_c0ffee"}
CANARY_FAILED = "FAILED tests/test_0123456789abcdef.py::test_c0ffee - AssertionError: 9f3a\n"


@pytest.mark.parametrize(
    "code, tail, reason",
    [
        # honest: the canary is the only failure, so the hidden tests' own result is a pass
        (1, "..F\n" + CANARY_FAILED + "1 failed, 7 passed in 0.10s\n", "tests passed"),
        (1, CANARY_FAILED + "==== 1 failed, 7 passed, 1 warning in 0.1s ====\n", "tests passed"),
        # a hidden test failed as well
        (1, "FAILED tests/test_h.py::test_a\n" + CANARY_FAILED + "2 failed, 6 passed in 0.1s\n", "tests failed"),
        # everything reported passed, or a forged summary and exit 0: the canary did not fail
        (0, "8 passed in 0.10s\n", canary.TAMPERED),
        (0, "7 passed in 0.01s\n", canary.TAMPERED),
        # one failure, but not the canary's (the canary was made to pass, a hidden test fails)
        (1, "FAILED tests/test_h.py::test_a - assert 2 == 3\n1 failed, 7 passed in 0.1s\n", "tests failed"),
        # the canary failed and the rest were skipped: the task's tests_ran_regex still judges
        (1, CANARY_FAILED + "1 failed, 7 skipped in 0.1s\n", "no tests ran"),
        (2, "ERROR tests/test_h.py\n1 error in 0.1s\n", "tests failed"),
    ],
)
def test_a_canary_is_judged_as_if_it_had_not_run_and_a_run_that_passes_it_scores_zero(code, tail, reason):
    verdict = verdict_from_test_result(
        applied=True, test_exit_code=code, timed_out=False, output_tail=tail, canary=CANARY
    )
    assert verdict.raw["reason"] == reason
    assert verdict.reward == (1.0 if reason == "tests passed" else 0.0)
    # the same captured outputs without a canary (vault, none) are judged as they stand
    plain = verdict_from_test_result(applied=True, test_exit_code=code, timed_out=False, output_tail=tail)
    assert plain.raw["reason"] != canary.TAMPERED


def test_a_canary_is_fresh_each_grading_and_only_for_pytest_over_the_test_files():
    first, second = canary.make(["tests/test_hidden.py"]), canary.make(["tests/test_hidden.py"])
    assert first.rel != second.rel and first.nodeid != second.nodeid and first.body != second.body
    assert first.rel.startswith("tests/test_") and first.nodeid.startswith(first.rel + "::test_")
    assert canary.wanted("python3 -m pytest -q {test_files}")
    assert not canary.wanted("python3 -m pytest -q tests/")  # no place to add it
    assert not canary.wanted("bash tests/run.sh {test_files}")


def test_tools_follow_the_env_and_the_uid_wall(repo):
    flavor, task = CodingFlavor(), ct.task(repo)
    walled = flavor.tools(object(), ct.spec(task, "strict"))
    open_root = flavor.tools(object(), ct.spec(task, "none", "env.tools=[bash]"))
    assert (walled.user, open_root.user) == (1000, 0)
    assert [s["name"] for s in walled.specs()] == ["bash", "str_replace_based_edit_tool"]
    assert [s["name"] for s in open_root.specs()] == ["bash"]


def test_hidden_files_come_from_the_host_repo_at_the_test_sha(repo):
    assert hidden_files(ct.task(repo)) == [HiddenFile(ct.HIDDEN, "644", ct.hidden_test())]


def test_derived_validation_stages_every_change_kind(repo):
    from envs.coding.validation import derive_validation

    steps = derive_validation(Path(repo.path), repo.baseline, repo.golden, "/app")
    creates = {s["arguments"]["path"] for s in steps if s["name"] == "str_replace_based_edit_tool"}
    commands = [s["arguments"]["command"] for s in steps if s["name"] == "bash"]
    assert creates == {"/app/calc.sh", "/app/lib/helper.sh", "/app/noeol.txt", "/app/win.txt"}
    assert "rm -rf -- /app/obsolete.txt" in commands
    assert any("mv -f -- /app/old_name.txt /app/renamed/name.txt" in c for c in commands)
    assert any("base64 -d >> /app/data/blob.bin" in c for c in commands)
    assert any("base64 -d >> /app/latin1.txt" in c for c in commands)
    assert "chmod 755 -- /app/scripts/tool.sh" in commands


def test_large_binary_golden_files_are_staged_in_argument_sized_pieces(tmp_path):
    from envs.coding.validation import _binary_steps

    data = bytes(range(256)) * 800 + b"tail"  # ~200 KiB: one bash argument could not carry it
    steps = _binary_steps(str(tmp_path), "deep/dir/big.bin", data)
    assert len(steps) > 2 and all(len(s["arguments"]["command"]) < 100_000 for s in steps)
    for step in steps:
        subprocess.run(["bash", "-c", step["arguments"]["command"]], check=True, cwd=tmp_path)
    assert (tmp_path / "deep/dir/big.bin").read_bytes() == data
