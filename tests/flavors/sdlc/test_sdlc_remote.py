"""The sdlc flavor's host-side parts with real git and no Docker: the mock remote served over
a unix socket and reached by plain git through the relay (the agent's ``ext::`` origin), its
protected main, and the mock GitHub's GitHub-like errors and transcript."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs.sdlc import remote
from envs.sdlc.github import MockGitHub
from envs.sdlc.schema import IssueComment, IssueConfig

ROOT = Path(__file__).resolve().parents[3]
GIT_ENV = {
    **remote.GIT_ENV,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-c", "protocol.ext.allow=always", *args], cwd=cwd, env=GIT_ENV, capture_output=True, text=True
    )


@pytest.fixture
def source(tmp_path) -> tuple[Path, str]:
    """A task repo: two commits on main, and an answer-key branch the remote must never show."""
    repo = tmp_path / "source"
    repo.mkdir()
    assert git(repo, "init", "-q", "-b", "main").returncode == 0
    (repo / "app.py").write_text("x = 1\n")
    git(repo, "add", "-A"), git(repo, "commit", "-qm", "one")
    (repo / "app.py").write_text("x = 2\n")
    git(repo, "add", "-A"), git(repo, "commit", "-qm", "two")
    baseline = git(repo, "rev-parse", "HEAD").stdout.strip()
    git(repo, "checkout", "-qb", "t_golden")
    (repo / "app.py").write_text("x = 42  # the answer\n")
    git(repo, "commit", "-qam", "golden")
    return repo, baseline


async def _with_remote(tmp_path: Path, source: tuple[Path, str], fresh: bool, body):
    bridge = tmp_path / "bridge"
    bridge.mkdir()
    async with remote.serving(str(bridge)) as served:
        served.seed(source[0], source[1], fresh=fresh, fresh_date="2000-01-01T00:00:00+0000")
        url = f"ext::{sys.executable} {bridge / remote.RELAY_NAME} %S"
        return await body(served, url)


async def agit(cwd: Path, *args: str) -> tuple[int, str]:
    """git as the agent runs it: a subprocess, while the remote serves in this loop."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        "-c",
        "protocol.ext.allow=always",
        *args,
        cwd=cwd,
        env=GIT_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


@pytest.mark.parametrize("fresh", [True, False], ids=["vault", "history"])
def test_plain_git_clones_and_pushes_branches_through_the_relay_but_main_is_refused(tmp_path, source, fresh):
    async def body(served: remote.Remote, url: str):
        work = tmp_path / "work"
        code, out = await agit(tmp_path, "clone", "-q", url, str(work))
        assert code == 0, out
        (work / "app.py").write_text("x = 3\n")
        git(work, "commit", "-qam", "fix")
        code, out = await agit(work, "push", "-q", "origin", "HEAD:refs/heads/fix")
        assert code == 0, out
        main_before = served.head_of("main")
        code, out = await agit(work, "push", "origin", "HEAD:main")
        assert code != 0 and "main is protected" in out, out
        code, out = await agit(work, "push", "origin", "HEAD:refs/tags/v1")
        assert code != 0 and "only branches" in out, out
        code, listed = await agit(work, "ls-remote", "origin")
        log_code, history = await agit(work, "log", "--format=%s", "origin/main")
        assert served.head_of("main") == main_before == served.main
        await served.freeze()  # the agent's turn is over: the remote takes nothing more
        code, out = await agit(work, "push", "-f", "origin", "HEAD~1:refs/heads/fix")
        assert code != 0 and "the remote is not reachable" in out, out
        return served, listed, history

    served, listed, history = asyncio.run(_with_remote(tmp_path, source, fresh, body))
    refs = sorted(line.split("\t")[1] for line in listed.splitlines())
    assert refs == ["HEAD", "refs/heads/fix", "refs/heads/main"]  # no answer-key ref, ever
    assert history.split() == (["baseline"] if fresh else ["two", "one"])  # the vault hides history
    assert served.pushes and served.pushes[0]["exit_code"] == 0


def test_the_relay_refuses_any_service_but_fetch_and_push(tmp_path, source):
    async def body(served: remote.Remote, url: str):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(tmp_path / "bridge" / remote.RELAY_NAME),
            "git-upload-archive",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        return out

    assert b"ERR unknown service" in asyncio.run(_with_remote(tmp_path, source, True, body))


ISSUES = [
    IssueConfig(
        number=7,
        title="Bug",
        body="It breaks.",
        labels=["bug"],
        comments=[IssueComment(author="maintainer", body="Confirmed.")],
    )
]


def test_the_mock_github_errors_like_github_and_records_every_call(tmp_path, source):
    async def body(served: remote.Remote, url: str):
        github = MockGitHub(ISSUES, served)
        work = tmp_path / "work"
        await agit(tmp_path, "clone", "-q", url, str(work))
        results = {
            "404": await github.call("github_get_issue", {"number": 99}),
            "422": await github.call("github_create_pull_request", {"title": "t", "head": "nope"}),
        }
        (work / "app.py").write_text("x = 3\n")
        git(work, "checkout", "-qb", "fix"), git(work, "commit", "-qam", "fix #7")
        await agit(work, "push", "-q", "origin", "fix")
        results["issue"] = await github.call("github_get_issue", {"number": 7})
        results["pr"] = await github.call(
            "github_create_pull_request", {"title": "Fix #7", "body": "Fixes #7", "head": "fix"}
        )
        results["dup"] = await github.call("github_create_pull_request", {"title": "again", "head": "fix"})
        results["diff"] = await github.call("github_get_pull_request_diff", {"number": 8})
        results["file"] = await github.call("github_get_file", {"path": "app.py", "ref": "fix"})
        results["option"] = await github.call("github_get_file", {"path": "x", "ref": "--output=/tmp/x"})
        results["branches"] = await github.call("github_list_branches", {})
        results["update"] = await github.call("github_update_pull_request", {"number": 8, "state": "closed"})
        return github, results

    github, results = asyncio.run(_with_remote(tmp_path, source, True, body))
    text, is_error = results["404"]
    assert is_error and json.loads(text)["message"] == "Not Found" and json.loads(text)["status"] == "404"
    text, is_error = results["422"]
    assert is_error and json.loads(text)["status"] == "422"
    assert json.loads(text)["errors"][0]["field"] == "head" and "does not exist" in text
    issue = json.loads(results["issue"][0])
    assert issue["comments"][0]["body"] == "Confirmed." and issue["labels"] == [{"name": "bug"}]
    pull = json.loads(results["pr"][0])
    assert not results["pr"][1] and pull["number"] == 8 and pull["head"]["sha"]  # numbers follow the issues'
    assert results["dup"][1] and "already exists" in results["dup"][0]
    assert "-x = 2\n+x = 3" in results["diff"][0] and results["file"][0] == "x = 3\n"
    assert results["option"][1] and json.loads(results["option"][0])["status"] == "404"
    assert [b["name"] for b in json.loads(results["branches"][0])] == ["fix", "main"]
    assert json.loads(results["update"][0])["state"] == "closed" and github.latest_open_pull() is None
    assert [(t["seq"], t["tool"], t["is_error"]) for t in github.transcript] == [
        (0, "github_get_issue", True),
        (1, "github_create_pull_request", True),
        (2, "github_get_issue", False),
        (3, "github_create_pull_request", False),
        (4, "github_create_pull_request", True),
        (5, "github_get_pull_request_diff", False),
        (6, "github_get_file", False),
        (7, "github_get_file", True),
        (8, "github_list_branches", False),
        (9, "github_update_pull_request", False),
    ]
    assert github.transcript[3]["arguments"] == {"title": "Fix #7", "body": "Fixes #7", "head": "fix"}


def _build_dry_run(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    conf = tmp_path / "task" / "sdlcbad"
    conf.mkdir(parents=True)
    (conf / "bad.yaml").write_text(
        "defaults:\n  - override /flavor@_global_.flavor: sdlc\n  - _self_\n"
        "name: bad\nset: sdlcbad\nrepo: generated://sample\nprompt: p\n"
        "test_command: 'true'\nrefs: {baseline: last_page_baseline, "
        "test: last_page_test, golden: last_page_golden}\n" + body
    )
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "build", "task=sdlcbad/bad", "--dry-run"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "CRUCIBLE_CONFIG_PATH": str(tmp_path)},
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, words",
    [
        ("issues:\n  - {number: 1, title: t, bdy: x}\n", ["task sdlcbad/bad", "bdy"]),
        ("issues: []\n", ["task 'sdlcbad/bad'", "task.issues is empty"]),
        ("issue: 2\nissues:\n  - {number: 1, title: t}\n", ["task 'sdlcbad/bad'", "task.issue 2"]),
        ("pr_rubric: be nice\nissues:\n  - {number: 1, title: t}\n", ["task 'sdlcbad/bad'", "task.judge.model"]),
    ],
)
def test_a_bad_sdlc_task_is_one_line_naming_the_task_and_key(tmp_path, body, words):
    proc = _build_dry_run(tmp_path, body)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines
