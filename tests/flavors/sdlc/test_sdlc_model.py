"""sdlc with models, against the stand-in for a hosted model API (none is reachable here): a
tool-calling agent works an issue end to end through the run's own tools (reads the issue,
fixes, pushes a branch, opens the PR) and scores 1.0; a ``pr_rubric`` PR check is judged by
a model through the agents' providers, and its scripted score is the PR subscore."""

from __future__ import annotations

import json

import pytest
from sdlc_runs import golden_parts, planned, real_run
from standin import StandIn, answer, call, reply

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = "sdlc/last_page"
KEY_ENV = "CRUCIBLE_TEST_STANDIN_KEY"
RUBRIC = "The PR explains the cause of the bug and references the issue it fixes."
VERDICT = "Names the off-by-one and references #7, but says nothing of tests.\nSCORE: 0.5"


@pytest.fixture(scope="module")
def runs(docker_client, base_image, tmp_path_factory):
    _, edits, (push, open_pr) = golden_parts(TASK)

    def script(turn):
        if "# Rubric" in turn.prompt:  # the PR judge: no tools, one answer
            return answer(VERDICT)
        steps = [
            reply("Reading the tracker.", call("github_list_issues"), call("github_get_issue", number=7)),
            reply("Fixing the page count.", *(call(e["name"], **e["arguments"]) for e in edits)),
            reply("Pushing a branch.", call(push["name"], **push["arguments"])),
            reply("Opening the pull request.", call(open_pr["name"], **open_pr["arguments"])),
        ]
        return steps[turn.turn] if turn.turn < len(steps) else answer("Opened a pull request that fixes #7.")

    with pytest.MonkeyPatch.context() as mp, StandIn(script) as api:
        mp.setenv(KEY_ENV, "sk-standin-sdlc")
        agent = real_run(
            tmp_path_factory.mktemp("run"),
            TASK,
            "agent=tool_calling",
            "model=openai-compatible/standin",
            f"agent.base_url={api.base_url}",
            f"agent.api_key_env={KEY_ENV}",
        )

        def judged_by_the_standin(task):
            task.pr_rubric, task.judge.model, task.judge.base_url = RUBRIC, "openai-compatible/judge", api.base_url

        rubric = real_run(tmp_path_factory.mktemp("run"), TASK, "agent=integration_test", change=judged_by_the_standin)
        judged = [e for e in api.exchanges if "# Rubric" in json.dumps(e.request)]
        return {"agent": agent, "rubric": rubric, "judged": judged}


def test_a_tool_calling_agent_reads_the_issue_fixes_pushes_opens_the_pr_and_scores_1(runs):
    record = runs["agent"]
    assert (record.status, record.stop_reason) == ("completed", "done"), record.error
    calls = [(s.tool, s.is_error) for s in record.steps if s.kind == "tool_call"]
    assert calls[:2] == [("github_list_issues", False), ("github_get_issue", False)]
    assert calls[-2:] == [("bash", False), ("github_create_pull_request", False)]
    assert all(not error for _, error in calls), calls
    assert record.reward == 1.0 and record.subscores["tests"] == 1.0 and record.subscores["pr_check"] == 1.0
    assert [t["tool"] for t in record.raw_grade["transcript"]] == [
        "github_list_issues",
        "github_get_issue",
        "github_create_pull_request",
    ]


def test_a_pr_rubric_is_judged_by_the_configured_model_and_gives_its_scripted_subscore(runs):
    from envs.sdlc.flavor import SdlcFlavor

    record = runs["rubric"]
    assert record.status == "completed", record.error
    assert record.subscores["pr_check"] == 0.5 and record.subscores["tests"] == 1.0
    assert record.reward == pytest.approx(0.8 + 0.2 * 0.5)
    check = record.raw_grade["pr_check"]
    assert check["kind"] == "rubric" and check["model"] == "openai-compatible/judge" and check["reply"] == VERDICT
    assert len(runs["judged"]) == 1  # one judge call, and it saw the rubric, the issue and the PR
    sent = json.dumps(runs["judged"][0].request)
    assert RUBRIC in sent and "Report loses the rows" in sent and "Fixes #7" in sent
    # Pure regrade from the stored raw grade: no model is asked again.
    spec = planned(TASK, "agent=integration_test")[1].spec
    assert SdlcFlavor().regrade(spec, record.raw_grade).reward == record.reward
    assert len(runs["judged"]) == 1
