"""Real sdlc runs (Docker, real git, the real MCP server, the real store) of what the
deliverable is: the latest open PR's head as the remote holds it when the agent is done.
A push without a PR scores 0; a force-push after opening is graded at the new head; under
strict the agent sees no ref but main and its own, and its push to main is refused and
changes nothing; the github_* transcript is queryable in SQL and shown by ``crucible show``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sdlc_runs import bash, golden_parts, real_run

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "sdlc/last_page"
ROOT = Path(__file__).resolve().parents[3]
WRONG = bash("git checkout -q -b fix && echo '# a start' >> README.md && git commit -qam wip && git push -q origin fix")
FORCE = bash(
    "git checkout -q main -- README.md && git add -A && git commit -q --amend -m 'Fix #7' && git push -q -f origin fix"
)
PR = {
    "name": "github_create_pull_request",
    "arguments": {"title": "Fix #7: page the last rows", "body": "Fixes #7.", "head": "fix", "base": "main"},
}
PROBE = [
    bash("git rev-parse HEAD origin/main"),
    bash("git ls-remote origin"),
    bash("ls -A /run/crucible"),
    bash("git commit -qam 'fix on main' && git push origin HEAD:main"),
    {"name": "github_get_issue", "arguments": {"number": 99}},
    {"name": "github_create_pull_request", "arguments": {"title": "t", "body": "b", "head": "never-pushed"}},
]


@pytest.fixture(scope="module")
def runs(docker_client, base_image, tmp_path_factory):
    read, edits, push_and_pr = golden_parts(TASK)
    push_only = push_and_pr[:1]

    def run(*overrides: str, validation: list[dict]):
        return real_run(
            tmp_path_factory.mktemp("run"), TASK, "agent=integration_test", *overrides, validation=validation
        )

    return {
        "no_pr": run(validation=[*read, *edits, *push_only]),
        "force_push": run(validation=[*read, WRONG, PR, *edits, FORCE]),
        "strict_probe": run("integrity=strict", validation=[*edits, *PROBE]),
    }


def step_results(record) -> list[tuple[str, bool, str]]:
    return [(s.tool, s.is_error, s.result or "") for s in record.steps]


def test_a_golden_that_pushes_but_opens_no_pr_scores_0_with_the_reason(runs):
    record = runs["no_pr"]
    assert record.status == "completed", record.error
    assert [s.is_error for s in record.steps] == [False] * len(record.steps)  # the push itself worked
    assert record.reward == 0.0 and record.raw_grade["reason"] == "no open pull request"
    assert record.subscores == {"tests": 0.0, "pr_check": 0.0}


def test_a_pr_force_pushed_after_opening_is_graded_at_the_head_the_remote_holds(runs):
    record = runs["force_push"]
    assert record.status == "completed", record.error
    opened = json.loads(next(s.result for s in record.steps if s.tool == "github_create_pull_request"))
    graded = record.raw_grade["pull_request"]
    assert opened["head"]["sha"] != graded["head_sha"]  # the PR was opened on the wrong commit ...
    assert record.reward == 1.0 and record.subscores["tests"] == 1.0  # ... and graded at the fix
    assert "stockroom/report.py" in record.diff and "README.md" not in record.diff
    pushes = record.raw_grade["pushes"]  # every push the remote took, and where it left the branches
    assert [p["exit_code"] for p in pushes] == [0, 0] and pushes[-1]["branches"]["fix"] == graded["head_sha"]


def test_under_strict_the_agent_sees_only_main_and_its_push_to_main_changes_nothing(runs):
    record = runs["strict_probe"]
    assert record.status == "completed" and record.integrity_obtained == "strict", record.error
    results = step_results(record)
    heads, ls_remote, bridge, push_main, issue_404, pr_422 = results[-6:]
    # origin/main is the very commit the agent's fresh repo starts from (no history behind it):
    assert heads[2].split() == [record.raw_grade["main"]] * 2, heads
    refs = sorted(line.split("\t")[1] for line in ls_remote[2].splitlines() if "\t" in line)
    assert refs == ["HEAD", "refs/heads/main"], ls_remote  # no answer-key ref, no other state
    assert sorted(bridge[2].split()) == ["git-relay.py", "git.sock", "mcp.sock"], bridge
    assert push_main[1] and "main is protected" in push_main[2], push_main
    pushes = record.raw_grade["pushes"]  # the attempt is recorded, and main is where it was
    assert len(pushes) == 1 and pushes[0]["branches"] == {"main": record.raw_grade["main"]}
    assert issue_404[1] and json.loads(issue_404[2])["status"] == "404"
    assert pr_422[1] and json.loads(pr_422[2])["status"] == "422"
    # The fix sat on the agent's main, and the refused push left the remote's main as it was:
    assert record.reward == 0.0 and record.raw_grade["reason"] == "no open pull request"


def test_the_action_transcript_is_queryable_in_sql_and_shown_by_crucible_show(runs):
    from engine.store.duckdb import DuckDBStore

    record = runs["force_push"]
    store = DuckDBStore()
    _, rows = store.query(
        f"SELECT tool FROM steps WHERE run_id = '{record.run_id}' AND tool LIKE 'github_%' ORDER BY position"
    )
    assert [r[0] for r in rows] == ["github_get_issue", "github_create_pull_request"]
    # The mock's own record, kept host-side whatever the agent reports of itself:
    _, rows = store.query(
        f"SELECT j.value->>'tool', (j.value->>'is_error')::BOOLEAN FROM runs r, "
        f"json_each(r.raw_grade->'transcript') j WHERE r.run_id = '{record.run_id}' "
        f"ORDER BY (j.value->>'seq')::INT"
    )
    assert rows == [("github_get_issue", False), ("github_create_pull_request", False)]
    shown = subprocess.run(
        [sys.executable, "-m", "engine.cli", "show", record.run_id],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if "mcp:github_" in line]
    assert [line.split()[2].split("  ")[0] for line in lines] == [
        "mcp:github_get_issue",
        "mcp:github_create_pull_request",
    ], shown.stdout
    # ... and the mock's transcript, through the flavor's explanation of the verdict:
    text = [line.strip() for line in shown.stdout.splitlines()]
    at = text.index("github calls (2):")
    assert text[at + 1] == '0 ok  github_get_issue {"number": 7}', text[at : at + 3]
    assert text[at + 2].startswith("1 ok  github_create_pull_request"), text[at : at + 3]
