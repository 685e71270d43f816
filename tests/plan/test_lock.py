"""``crucible lock``, lock files in planning, and ``crucible task new``, end to end (Docker).

The task repo is generated here: a tiny project whose suite has everything a real one has
besides the bug's tests — a test the fix makes pass, tests that pass either way, a skip, an
xfail, a coin flip, and a stale test the test change deletes. Counted by hand, its lock is:
F2P = test_add_two; P2P = test_zero, test_negate; flaky = test_coin; the skip and the xfail
in neither list.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from git_repos import commit, git, upstream

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SUITE = b"""import os

import pytest

from calc import add, negate


def test_zero():
    assert add(0, 0) == 0


def test_negate():
    assert negate(2) == -2


@pytest.mark.skip(reason="not yet")
def test_later():
    assert False


@pytest.mark.xfail(reason="known")
def test_known_bug():
    assert negate(0) == 1


def test_coin():
    assert os.urandom(1)[0] < 128
"""
F2P = ["tests/test_calc.py::test_add_two"]
P2P = ["tests/test_calc.py::test_negate", "tests/test_calc.py::test_zero"]
FLAKY = ["tests/test_calc.py::test_coin"]


STEADY_SUITE = SUITE[: SUITE.index(b"\n\ndef test_coin")] + b"\n"
"""The suite without its coin flip: nothing in it can pass on one side by chance."""


def task_repo(where: Path, suite: bytes = SUITE) -> Path:
    repo = where / "lockrepo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(
        repo,
        {
            "calc.py": b"def add(a, b):\n    return a - b\n\n\ndef negate(a):\n    return -a\n",
            "tests/test_calc.py": suite,
            "tests/test_legacy.py": b"from calc import add\n\n\ndef test_old():\n    assert add(2, 1) == 1\n",
        },
        "baseline",
    )
    git(repo, "branch", "calc_baseline")
    commit(
        repo,
        {
            "tests/test_calc.py": suite + b"\n\ndef test_add_two():\n    assert add(1, 1) == 2\n",
            "tests/test_legacy.py": None,
        },
        "the test change",
    )
    git(repo, "branch", "calc_test")
    git(repo, "checkout", "-q", "--detach", "calc_baseline")
    commit(repo, {"calc.py": b"def add(a, b):\n    return a + b\n\n\ndef negate(a):\n    return -a\n"}, "the fix")
    git(repo, "branch", "calc_golden")
    return repo


@pytest.fixture(scope="module")
def conf(tmp_path_factory, docker_client, base_image) -> Path:
    where = tmp_path_factory.mktemp("lock")
    repo = task_repo(where)
    conf = where / "conf"
    (conf / "task" / "lk").mkdir(parents=True)
    (conf / "task" / "lk" / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\n"
        "test_command: python3 -m pytest -q -p no:cacheprovider tests\n"
        "prompt: add(1, 1) is 0. Please fix add.\nsystem_packages: [python3, python3-pytest]\n"
    )
    return conf


def crucible(conf: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRUCIBLE_CONFIG_PATH": str(conf)}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
    )


def spec_of(conf: Path, monkeypatch):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(conf))
    typed = to_typed(compose_config(["task=lk/calc"]))
    return plan(typed, builder=session_for(typed).builder).spec


@pytest.fixture(scope="module")
def locked(conf) -> subprocess.CompletedProcess:
    # 6 runs a side: the coin agrees with itself on all of them with probability 2**-5 per
    # side, so it is named flaky unless both sides come out constant (about 1 in 1000).
    return crucible(conf, "lock", "task=lk/calc", "--check", "5")


def test_lock_writes_the_hand_counted_lists_and_names_the_flaky_test(conf, locked):
    assert locked.returncode == 0, locked.stdout + locked.stderr
    data = json.loads((conf / "task" / "lk" / "calc.lock").read_text())
    assert (data["fail_to_pass"], data["pass_to_pass"], data["flaky"]) == (F2P, P2P, FLAKY)
    assert data["repeats"] == 6 and set(data["pins"]) == {"baseline", "test", "golden"}
    assert (
        "flaky lk/calc: tests/test_calc.py::test_coin (status differs across repeats; in neither list)" in locked.stdout
    )


def test_the_locked_task_ships_and_the_spec_hash_follows_the_lock(conf, locked, monkeypatch, tmp_path):
    lock_file = conf / "task" / "lk" / "calc.lock"
    with_lock = spec_of(conf, monkeypatch)
    assert (with_lock.task.fail_to_pass, with_lock.task.pass_to_pass) == (F2P, P2P)
    # A suite with a skip, an xfail and a coin flip ships on its lists (and the coin cannot sink it).
    proc = crucible(conf, "check", "task=lk/calc", "--check", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    saved = lock_file.read_text()
    try:
        lock_file.rename(tmp_path / "calc.lock")
        unlocked = spec_of(conf, monkeypatch)
        (tmp_path / "calc.lock").rename(lock_file)
        data = json.loads(saved)
        data["pass_to_pass"] = data["pass_to_pass"][:1]
        lock_file.write_text(json.dumps(data))
        edited = spec_of(conf, monkeypatch)
        # A rerun of a locked run is planned on the lists it was graded on, not the edited lock's.
        from engine.store.duckdb import DuckDBStore

        run_id = DuckDBStore().query(
            "SELECT run_id FROM runs WHERE task_id = 'lk/calc' AND agent = 'integration_test' "
            "AND status = 'completed' ORDER BY started_at DESC LIMIT 1"
        )[1][0][0]
        rerun = crucible(conf, "rerun", run_id)
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    finally:
        lock_file.write_text(saved)
    assert unlocked.task.fail_to_pass == [] and len({unlocked.spec_hash, with_lock.spec_hash, edited.spec_hash}) == 3


def test_a_stale_lock_is_one_line_before_anything_runs(conf, locked, tmp_path):
    stale = tmp_path / "conf"
    subprocess.run(["cp", "-r", str(conf), str(stale)], check=True)
    data = json.loads((stale / "task" / "lk" / "calc.lock").read_text())
    data["pins"]["golden"] = "0" * 40  # the golden ref has moved since the lock was written
    (stale / "task" / "lk" / "calc.lock").write_text(json.dumps(data))
    proc = crucible(stale, "check", "task=lk/calc")
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "lock" in proc.stderr and "is stale: golden moved from 000000000000 to" in proc.stderr
    assert "run `crucible lock task=lk/calc`" in proc.stderr


def test_a_task_whose_change_makes_no_test_pass_is_not_shippable(tmp_path, docker_client, base_image):
    repo = task_repo(tmp_path, STEADY_SUITE)  # one run a side: a coin could "pass" on the golden
    git(repo, "branch", "-f", "calc_golden", "calc_baseline")  # a "fix" that fixes nothing
    conf = tmp_path / "conf"
    (conf / "task" / "lk").mkdir(parents=True)
    (conf / "task" / "lk" / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\ntest_command: python3 -m pytest -q -p no:cacheprovider tests\n"
        "prompt: p\nsystem_packages: [python3, python3-pytest]\n"
    )
    proc = crucible(conf, "lock", "task=lk/calc")
    assert proc.returncode == 1
    assert "FAIL lk/calc: not shippable: no test fails on the baseline and passes on the golden" in proc.stdout
    assert not (conf / "task" / "lk" / "calc.lock").exists()


def test_task_new_makes_a_shipping_locked_task_from_an_upstream_fix(tmp_path, docker_client, base_image):
    repo, base, fix = upstream(tmp_path)
    conf = tmp_path / "conf"
    conf.mkdir()
    proc = crucible(conf, "task", "new", "up/add", "--repo", str(repo), "--fix", fix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 1 task(s) ship: golden 1, baseline 0" in proc.stdout
    data = json.loads((conf / "task" / "up" / "add.lock").read_text())
    # Hand count: the fix's new test fails before and passes after; the deleted legacy test is gone.
    assert data["fail_to_pass"] == ["tests/test_calc.py::test_two"] and data["pass_to_pass"] == []
    assert data["pins"]["baseline"] == base
    yaml_path = conf / "task" / "up" / "add.yaml"
    # No --prompt-file: the prompt is the commit message, which names the fix; said when the
    # task is written and noted by check. The default test command names no {test_files},
    # so under strict (the default) the task has no canary: noted too, with why.
    prompt_note = "note up/add: prompt is still the fix's commit message"
    canary_note = (
        "note up/add: no canary (raw_grade.canary.skipped): the test command has no {test_files}, "
        "where the grader adds its canary test to pytest's arguments"
    )
    assert (
        f"note: the prompt is the fix's commit message, which usually names the fix: write the task's own "
        f"in {yaml_path}" in proc.stdout
    )
    assert prompt_note in proc.stdout and canary_note in proc.stdout
    yaml_path.write_text(
        yaml_path.read_text().replace('prompt: "Fix add, which subtracted', 'prompt: "add(1, 1) gives 0, not 2.')
    )
    edited = crucible(conf, "check", "task=up/add")
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert prompt_note not in edited.stdout and canary_note in edited.stdout
    # A fix that cannot be split is one line, nothing run.
    only_tests = commit(repo, {"tests/test_calc.py": b"def test_nothing():\n    pass\n"}, "tests only")
    refused = crucible(conf, "task", "new", "up/tests_only", "--repo", str(repo), "--fix", only_tests)
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1
    assert "so the golden would be empty" in refused.stderr


def test_a_hand_written_task_whose_suite_skips_fails_the_gate_naming_the_lock_command(
    tmp_path, docker_client, base_image
):
    repo = task_repo(tmp_path, STEADY_SUITE)  # a skip and an xfail, and no lock
    conf = tmp_path / "conf"
    (conf / "task" / "lk").mkdir(parents=True)
    (conf / "task" / "lk" / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\ntest_command: python3 -m pytest -q -p no:cacheprovider tests\n"
        "prompt: p\nsystem_packages: [python3, python3-pytest]\n"
    )
    proc = crucible(conf, "check", "task=lk/calc")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    fail = [line for line in proc.stdout.splitlines() if line.startswith("FAIL lk/calc (golden")]
    assert fail == [
        "FAIL lk/calc (golden, agent integration_test): reward 0.0 (expected 1.0); run "
        "`crucible lock task=lk/calc` to list the task's tests (fail_to_pass/pass_to_pass)"
    ], proc.stdout
    assert "tests skipped (a task whose tests skip or xfail" in proc.stdout  # the reason, on the raw grade's line


def test_lists_on_a_task_that_reads_no_named_results_are_one_line(tmp_path, docker_client, base_image):
    repo = task_repo(tmp_path, STEADY_SUITE)
    conf = tmp_path / "conf"
    (conf / "task" / "lk").mkdir(parents=True)
    (conf / "task" / "lk" / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\ntest_command: make test\nprompt: p\n"
        "fail_to_pass: [tests/test_calc.py::test_add_two]\nsystem_packages: [python3, python3-pytest]\n"
    )
    proc = crucible(conf, "check", "task=lk/calc")
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "task 'lk/calc' lists fail_to_pass/pass_to_pass but reads no named test results" in proc.stderr


@pytest.mark.parametrize("task", ["sample/last_page", "sample/query_ops"])
def test_lock_on_a_sample_task_says_in_one_line_that_it_reads_no_named_results(task, tmp_path):
    # The sample tasks' verdicts are isolated: refused before anything is built or run.
    proc = crucible(tmp_path, "lock", f"task={task}", timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"task '{task}' reads no named test results (isolated_verdict: true under integrity=strict" in proc.stderr
    assert "`crucible check` gates it as it is" in proc.stderr and not proc.stdout
    assert not (ROOT / "conf" / "task" / f"{task}.lock").exists()


def test_lock_on_a_task_with_no_results_format_names_the_setting(tmp_path):
    conf = tmp_path / "conf"
    (conf / "task" / "lk").mkdir(parents=True)
    repo = task_repo(tmp_path, STEADY_SUITE)
    (conf / "task" / "lk" / "calc.yaml").write_text(
        f"name: calc\nset: lk\nrepo: {repo}\ntest_command: make test\nprompt: p\n"
        "system_packages: [python3, python3-pytest]\n"
    )
    proc = crucible(conf, "lock", "task=lk/calc", "integrity=vault", timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert (
        "task 'lk/calc' reads no named test results (results.format 'auto' for `make test`), so there are no "
        "tests to lock: set results.format (pytest, go, parser)"
    ) in proc.stderr
