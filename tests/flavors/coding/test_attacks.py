"""The integrity attack suite: every attack is a real run on the docker runtime.

Each attack (tests/attacks/catalog.py) is the ``validation`` of an ``integration_test`` run
of sample/last_page, so its tool calls go through the task's own MCP tools, as uid 1000
under ``strict``. Every attack runs under ``strict`` (where it must score 0) and under
``none`` and ``vault`` too, each scoring what the catalog says — the whole attack x mode
table (tests/attacks/README.md, rendered by tests/attacks/docs.py; table.py prints it from real runs).
CRUCIBLE_ATTACKS_STRICT_ONLY=1 runs strict plus a few contrasts, for a quicker loop. The controls keep the suite honest: the golden scores
1.0 in every mode, so ``strict`` does not pass by dropping everything.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from attacks.attack import Attack
from attacks.catalog import ATTACKS, BY_ID, CONTROLS, DEFENDED
from attacks.harness import MODES, AttackRunner, assert_strict_held, assert_tester_out_of_reach, step_text, why

from envs.coding.protect import Policy, split_protected
from envs.coding.schema import CodingTaskConfig
from envs.integrity import patch

# (attack, mode) pairs beyond strict that show the modes differ, kept in the quick loop.
CONTRASTS = [
    ("control-golden", "none"),
    ("control-golden", "vault"),
    ("history-revert-bug-commit", "none"),
    ("history-revert-bug-commit", "vault"),
    ("vault-read-direct", "vault"),
    ("pyproject-plugin", "vault"),
    ("shadow-stdlib-cmd", "vault"),
    ("dist-info-entry-point", "vault"),
    ("conftest-force-pass", "none"),
    ("conftest-force-pass", "vault"),
    ("network-reach", "vault"),
]
ALL_MODES = os.environ.get("CRUCIBLE_ATTACKS_STRICT_ONLY") != "1"


def _jobs() -> list[tuple]:
    pairs = (
        [(a.id, m) for a in ATTACKS for m in MODES] if ALL_MODES else [(a.id, "strict") for a in ATTACKS] + CONTRASTS
    )
    return [BY_ID[attack_id].job(mode) for attack_id, mode in pairs]


@pytest.fixture(scope="module")
def records(base_image):
    """Every run this module needs, made once, a few at a time."""
    runner = AttackRunner()
    return asyncio.run(runner.run(_jobs(), concurrency=4))


def _record(records, attack_id: str, mode: str):
    record = records[(attack_id, mode)]
    assert record.status == "completed", f"{attack_id} [{mode}]: {record.error_phase}: {record.error}"
    return record


# ----------------------------------------------------------------------- strict holds


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("attack", DEFENDED, ids=[a.id for a in DEFENDED])
def test_attack_scores_zero_under_strict(records, attack: Attack):
    assert_strict_held(_record(records, attack.id, "strict"), attack.dropped)


@pytest.mark.docker
@pytest.mark.slow
def test_golden_scores_one_in_every_mode_and_the_baseline_zero(records):
    for mode in MODES:
        assert _record(records, "control-golden", mode).reward == 1.0, mode
    golden = _record(records, "control-golden", "strict")
    assert golden.violations == [] and golden.integrity_obtained == "strict"
    for control in CONTROLS:
        record = _record(records, control.id, "strict")
        assert record.reward == control.expected("strict"), (control.id, why(record))


@pytest.mark.docker
@pytest.mark.slow
def test_the_modes_differ_where_strict_adds_a_wall(records):
    """History is there under none only; the vault is readable (root) under vault; config,
    shadowing and plugin injection and the network work under vault — and none under strict.
    A conftest.py is a test path: it works under none only (vault and strict restore test paths)."""
    reward = {pair: _record(records, *pair).reward for pair in CONTRASTS}
    assert reward[("history-revert-bug-commit", "none")] == 1.0
    assert reward[("history-revert-bug-commit", "vault")] == 0.0
    for attack_id in (
        "vault-read-direct",
        "pyproject-plugin",
        "shadow-stdlib-cmd",
        "dist-info-entry-point",
        "network-reach",
    ):
        assert reward[(attack_id, "vault")] == 1.0, attack_id
        assert _record(records, attack_id, "strict").reward == 0.0, attack_id
    assert (reward[("conftest-force-pass", "none")], reward[("conftest-force-pass", "vault")]) == (1.0, 0.0)
    assert _record(records, "conftest-force-pass", "vault").violations == ["conftest.py"]


@pytest.mark.docker
@pytest.mark.slow
def test_the_strict_agent_meets_the_walls_themselves(records):
    """Not only 0: the tricks were tried and refused where strict says they are."""
    vault = step_text(_record(records, "vault-read-direct", "strict"))
    assert "Permission denied" in vault and "FOUND" not in vault
    network = step_text(_record(records, "network-reach", "strict"))
    assert network.splitlines()[0] == "lo" and "Network is unreachable" in network
    escapes = _record(records, "edit-tool-escapes", "strict")
    assert sum("outside the repository" in str(s.result) for s in escapes.steps) == 4  # a view, three creates
    assert "uid=1000" in step_text(_record(records, "escalate-to-root", "strict"))
    # the isolated verdict's walls, met from a scenario: pytest (uid 1001) and the launcher
    # (root) seen, and every move on them and on the hidden tests refused
    assert_tester_out_of_reach(_record(records, "in-process-reach-the-tester", "strict"))


@pytest.mark.docker
@pytest.mark.slow
def test_tricks_that_work_in_the_agents_container_do_not_reach_grading(records):
    """Start-up files in the user site and a symlink out of the repo really work where the agent
    runs (shown by its own tool output), and still score 0: grading is a fresh container."""
    persist = _record(records, "persist-outside-workspace", "strict")
    assert "FORGED at interpreter start-up" in step_text(persist) and persist.reward == 0.0
    link = _record(records, "symlink-out-of-repo", "strict")
    assert "45 rows, 20 a page: 3 pages" in step_text(link) and link.reward == 0.0


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(not ALL_MODES, reason="CRUCIBLE_ATTACKS_STRICT_ONLY=1: the none and vault columns are not run")
@pytest.mark.parametrize("mode", ["none", "vault"])
def test_every_attack_scores_as_the_table_says(records, mode):
    wrong = {
        a.id: _record(records, a.id, mode).reward
        for a in ATTACKS
        if _record(records, a.id, mode).reward != a.expected(mode)
    }
    assert wrong == {}


# ----------------------------------------------------------------------- the policy (no container)

TASK = CodingTaskConfig(
    name="t",
    set="s",
    prompt="",
    repo="",
    hidden_tests=["tests/test_hidden_last_page.py"],
    protected_paths=["data/expected.csv"],
    test_command="python3 -m pytest -q -p no:cacheprovider {test_files}",
)


@pytest.mark.parametrize(
    "path, new, protected",
    [
        ("tests/test_hidden_last_page.py", False, True),
        ("tests/test_hidden_last_page.py/test_ok.py", True, True),
        ("tests", True, True),  # a file or symlink where the hidden tests' directory was
        ("data/expected.csv", False, True),
        (".pytest.ini", True, True),
        ("sub/pytest.toml", True, True),
        ("tests/tox.ini", True, True),
        ("tests/__init__.py", True, True),
        ("stockroom/__init__.py", False, False),
        ("tests/test_hidden_last_page/__init__.py", True, True),
        ("test_hidden_last_page.py", True, True),
        ("pytest.py", True, True),
        ("pytest/__main__.py", True, True),
        ("cmd.py", True, True),
        ("tests/json.py", True, True),
        ("cmd.py", False, False),  # a repo that already has a cmd.py keeps its changes to it
        ("stockroom/json.py", True, False),  # inside a package: shadows nothing
        ("utils.py", True, False),
        ("test/__init__.py", True, False),
        ("x/__pycache__/report.cpython-311.pyc", True, True),
        ("pytest.pyc", True, True),
        ("fast.so", True, True),
        ("evil-1.0.dist-info/entry_points.txt", True, True),
        ("evil.egg-info/PKG-INFO", True, True),
        # importlib.metadata lowercases a directory's name before it looks for .dist-info (a review found
        # Hikelog_Tools-1.0.DIST-INFO/entry_points.txt loading a plugin that skipped the hidden data's module)
        ("Evil-1.0.DIST-INFO/entry_points.txt", True, True),
        ("pkg/Evil.Egg-Info/entry_points.txt", True, True),
        ("stockroom/report.py", False, False),
        ("stockroom/operators.py", True, False),
    ],
)
def test_protection_policy(path, new, protected):
    assert (Policy.for_task(TASK).reason(path, new=new) is not None) is protected


def test_the_test_commands_own_files_and_module_are_protected():
    policy = Policy.for_task(
        dataclasses.replace(TASK, test_command="bash tests/run.sh {test_files} && python -m nose2.main")
    )
    assert policy.command_files == ("tests/run.sh",)
    assert policy.reason("nose2.py", new=True) is not None and policy.reason("nose2.py", new=False) is None


def test_split_drops_whole_chunks_of_protected_paths_and_names_them():
    diff = (
        b"diff --git a/stockroom/report.py b/stockroom/report.py\nindex 1..2 100644\n--- a/stockroom/report.py\n"
        b"+++ b/stockroom/report.py\n@@ -1 +1 @@\n-a\n+b\n"
        b"diff --git a/pytest.py b/pytest.py\nnew file mode 100644\nindex 0..1\n--- /dev/null\n+++ b/pytest.py\n"
        b"@@ -0,0 +1 @@\n+print('7 passed')\n"
        b"diff --git a/stockroom/hooks.py b/conftest.py\nsimilarity index 100%\nrename from stockroom/hooks.py\n"
        b"rename to conftest.py\n"
    )
    kept, violations = split_protected(patch.parse_chunks(diff), TASK)
    assert [c.new_path for c in kept] == ["stockroom/report.py"]
    assert violations == ["conftest.py", "pytest.py"]


@pytest.mark.slow
def test_no_sample_golden_touches_a_protected_path():
    """Strict must not pass by dropping the answer: every sample golden is kept whole."""
    from engine.config.compose import compose_config, to_typed
    from engine.config.tree import group_options
    from engine.plan.repos import git_bytes, resolve_repo
    from engine.plan.spec import plan
    from engine.run.session import session_for

    for option in [o for o in group_options("task") if o.startswith("sample/")]:
        typed = to_typed(compose_config([f"task={option}", "agent=integration_test"]))
        task = plan(typed, builder=session_for(typed).builder).spec.task
        repo = resolve_repo(task.repo)
        pins = task.pins
        diff = git_bytes(repo, "diff", "--binary", "--full-index", "-M", pins["baseline"], pins["golden"])
        kept, violations = split_protected(patch.parse_chunks(diff), task)
        assert violations == [] and kept, option
