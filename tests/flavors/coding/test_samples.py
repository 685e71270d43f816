"""The `sample` and `fixtures` task sets: deterministic repos whose branches do what their configs say.

No Docker: the repos are built with the sets' own generators (exactly as the engine runs
them), trees are taken out with ``git archive``, and each task's own ``test_command`` runs
on the host with this interpreter standing in for the image's ``python3``.
"""

from __future__ import annotations

import dataclasses
import io
import os
import re
import shlex
import subprocess
import sys
import tarfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from engine.config.schema import as_schema
from envs.coding.isolated import SCRIPTS as VERDICT_SCRIPTS
from envs.coding.schema import CodingTaskConfig

ROOT = Path(__file__).resolve().parents[3]
SETS = {"sample": ROOT / "conf", "fixtures": ROOT / "tests" / "conf"}
SIDES = ("baseline", "test", "golden")
SAMPLE_TASKS = sorted(p.stem for p in (SETS["sample"] / "task" / "sample").glob("*.yaml"))
# Tests that read `outcomes` share its ~14 pytest runs (5-10 s): slow, as a group.
slow = pytest.mark.slow
# (set, task, side): the pytest runs the claims below need.
RUNS = [("sample", task, side) for task in SAMPLE_TASKS for side in ("baseline", "golden")] + [
    ("fixtures", "good", "baseline"),
    ("fixtures", "good", "golden"),
    ("fixtures", "broken_golden", "golden"),
    ("fixtures", "baseline_passes", "baseline"),
    ("fixtures", "flaky", "golden"),
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def build(set_name: str, out: Path, env: dict[str, str] | None = None, umask: int = -1) -> dict[str, str]:
    """Run the set's generator as the engine does; return branch -> SHA."""
    subprocess.run(
        [sys.executable, str(ROOT / "samples" / set_name / "build_repo.py"), str(out)],
        check=True,
        capture_output=True,
        env=env,
        umask=umask,
    )
    listing = git(out, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in listing.splitlines())


def hostile_env(home: Path) -> dict[str, str]:
    """An environment that changes the SHAs or the checkout of any generator that lets it in."""
    config = home / ".gitconfig"
    config.write_text(
        "[init]\n\tdefaultBranch = trunk\n[core]\n\tautocrlf = true\n"
        "[user]\n\tname = Somebody Else\n[commit]\n\tgpgSign = true\n"
    )
    return {
        **os.environ,
        "HOME": str(home),
        "GIT_CONFIG_GLOBAL": str(config),
        "GIT_AUTHOR_NAME": "Somebody Else",
        "GIT_AUTHOR_DATE": "2001-02-03T04:05:06+09:00",
        "GIT_COMMITTER_DATE": "2001-02-03T04:05:06+09:00",
        "GIT_DIR": str(home / "elsewhere.git"),
        "TZ": "Asia/Tokyo",
    }


def checkout(repo: Path) -> dict[str, tuple[bytes, int]]:
    """The working tree outside .git: path -> (bytes, permission bits)."""
    return {
        path.relative_to(repo).as_posix(): (path.read_bytes(), path.stat().st_mode & 0o777)
        for path in sorted(repo.rglob("*"))
        if path.is_file() and ".git" not in path.relative_to(repo).parts
    }


def load_tasks(set_name: str) -> dict[str, dict]:
    """Every task config of the set, composed through Hydra (defaults list + schema) and resolved."""
    names = sorted(p.stem for p in (SETS[set_name] / "task" / set_name).glob("*.yaml"))
    overrides = [f"hydra.searchpath=[file://{SETS['fixtures']}]"]
    # Only the task group: composing the whole root config costs twice as much per task.
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        return {
            name: dataclasses.asdict(
                as_schema(CodingTaskConfig, compose(overrides=[*overrides, f"+task={set_name}/{name}"]).task, "task")
            )
            for name in names
        }


def tree(repo: Path, ref: str, dest: Path, hidden_from: Sequence[dict] = ()) -> Path:
    """``ref``'s files at ``dest``, plus the hidden tests of ``hidden_from`` taken from their test refs."""
    archive = subprocess.run(["git", "archive", ref], cwd=repo, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    for task in hidden_from:
        for path in task["hidden_tests"]:
            blob = subprocess.run(
                ["git", "show", f"{task['refs']['test']}:{path}"], cwd=repo, capture_output=True, check=True
            )
            (dest / path).write_bytes(blob.stdout)
    return dest


def run_tests(task: dict, workdir: Path, test_files: list[str]) -> tuple[int, str]:
    """The task's own test command, with this interpreter as the image's ``python3``."""
    argv = shlex.split(task["test_command"].format(test_files=shlex.join(test_files)))
    assert argv[0] == "python3", task["test_command"]
    # Plugin autoload off: this venv's pytest plugins (hydra, anyio, timeout) cost ~1 s per
    # run and the task repos need none (the image's python3-pytest has none either).
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    if task.get("isolated_verdict"):  # by hand, as a task author would: scenarios in subprocesses
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VERDICT_SCRIPTS), env.get("PYTHONPATH")]))
        env.pop("CRUCIBLE_PROBE", None)
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=workdir, env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout + done.stderr


@dataclass(frozen=True)
class Built:
    set_name: str
    repo: Path
    refs: dict[str, str]
    again: Path
    """A second, independent build: another directory, a hostile environment, umask 077."""
    refs_again: dict[str, str]
    tasks: dict[str, dict]


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Built]:
    built = {}
    for set_name in SETS:
        root = tmp_path_factory.mktemp(set_name)
        (root / "home").mkdir()
        refs = build(set_name, root / "repo")
        again = build(set_name, root / "again", hostile_env(root / "home"), umask=0o077)
        tasks = load_tasks(set_name)
        built[set_name] = Built(set_name, root / "repo", refs, root / "again", again, tasks)
    return built


@pytest.fixture(params=sorted(SETS))
def built(request, repos) -> Built:
    return repos[request.param]


@pytest.fixture(scope="module")
def outcomes(repos, tmp_path_factory) -> dict[tuple[str, str, str], tuple[int, str]]:
    """(set, task, tree) -> (exit code, output) of each pytest run below, two at a time.

    Every run is a separate interpreter (~0.7 s of CPU), so there are only as many as the
    claims need: ``baseline`` runs the hidden tests on baseline; ``golden`` runs the whole
    tests/ folder (visible suite + hidden tests) on golden; ``main`` runs every sample
    task's hidden tests at once on main's tip.
    """
    jobs = []
    root = tmp_path_factory.mktemp("trees")
    for set_name, task_name, side in RUNS:
        task = repos[set_name].tasks[task_name]
        work = tree(repos[set_name].repo, task["refs"][side], root / f"{task_name}_{side}", [task])
        files = ["tests"] if side == "golden" else task["hidden_tests"]
        jobs.append(((set_name, task_name, side), task, work, files))
    tasks = list(repos["sample"].tasks.values())
    work = tree(repos["sample"].repo, "main", root / "main", tasks)
    hidden = [path for task in tasks for path in task["hidden_tests"]]
    jobs.append((("sample", "*", "main"), tasks[0], work, hidden))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda job: run_tests(*job[1:]), jobs))
    return {job[0]: result for job, result in zip(jobs, results)}


# ------------------------------------------------------------------ repos and configs
def test_generator_gives_identical_shas_whatever_the_environment(built):
    assert built.refs == built.refs_again
    for repo in (built.repo, built.again):
        assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
        assert git(repo, "status", "--porcelain") == ""


def test_generator_checks_out_main_with_the_same_bytes_and_modes(built):
    files = checkout(built.repo)
    assert files == checkout(built.again)
    assert {mode for _, mode in files.values()} == {0o644}
    assert set(files) == set(git(built.repo, "ls-files").splitlines())


def test_generator_refuses_a_non_empty_out_dir(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "sample" / "build_repo.py"), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "empty" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_every_task_has_exactly_three_branches_off_main(built):
    task_dirs = sorted(p.name for p in (ROOT / "samples" / built.set_name / "tasks").iterdir())
    assert sorted(built.tasks) == task_dirs
    expected = {task["refs"][side] for task in built.tasks.values() for side in SIDES}
    assert set(built.refs) == {"main"} | expected
    for name, task in built.tasks.items():
        assert (task["name"], task["set"]) == (name, built.set_name)
        assert task["repo"] == f"generated://{built.set_name}"
        baseline = built.refs[task["refs"]["baseline"]]
        assert git(built.repo, "rev-parse", f"{baseline}^") == built.refs["main"]
        for side in ("test", "golden"):
            assert git(built.repo, "rev-parse", f"{built.refs[task['refs'][side]]}^") == baseline


def test_hidden_tests_exist_only_on_the_test_branch(built):
    for task in built.tasks.values():
        refs = task["refs"]
        added = git(built.repo, "diff", "--name-status", refs["baseline"], refs["test"])
        assert added.splitlines() == [f"A\t{path}" for path in task["hidden_tests"]]
        for side in ("baseline", "golden"):
            files = git(built.repo, "ls-tree", "-r", "--name-only", refs[side]).splitlines()
            assert not set(task["hidden_tests"]) & set(files), (task["name"], side)


def test_sample_goldens_include_a_two_file_fix_and_a_new_file(repos):
    sample = repos["sample"]
    changes = {
        name: git(sample.repo, "diff", "--name-status", task["refs"]["baseline"], task["refs"]["golden"]).splitlines()
        for name, task in sample.tasks.items()
    }
    assert any(len(lines) >= 2 for lines in changes.values()), changes
    assert any(line.startswith("A\t") for lines in changes.values() for line in lines), changes


# ------------------------------------------------------------------ sample: the tasks work
@slow
@pytest.mark.parametrize("task", SAMPLE_TASKS)
def test_sample_hidden_test_fails_on_baseline(outcomes, task):
    code, output = outcomes[("sample", task, "baseline")]
    assert code == 1, output  # 1 = tests ran and failed; 2+ would be a collection error


@slow
@pytest.mark.parametrize("task", SAMPLE_TASKS)
def test_sample_golden_passes_its_hidden_test_and_the_visible_suite(outcomes, task):
    code, output = outcomes[("sample", task, "golden")]
    assert code == 0 and re.search(r"\b[1-9][0-9]* passed\b", output), output


@slow
def test_sample_correct_code_is_in_mains_history(outcomes):
    """main's tip passes every hidden test, so without the vault the answer is one `git log -p` away."""
    code, output = outcomes[("sample", "*", "main")]
    assert code == 0, output


# ------------------------------------------------------------------ fixtures: each fails the gate its way
@slow
def test_fixture_good_fails_on_baseline_and_passes_on_golden(outcomes):
    assert outcomes[("fixtures", "good", "baseline")][0] == 1
    assert outcomes[("fixtures", "good", "golden")][0] == 0


@slow
def test_fixture_broken_golden_fails_on_golden(outcomes):
    code, output = outcomes[("fixtures", "broken_golden", "golden")]
    assert code == 1 and "test_median_of_even_length" in output, output


@slow
def test_fixture_baseline_passes_passes_on_baseline(outcomes):
    assert outcomes[("fixtures", "baseline_passes", "baseline")][0] == 0


@slow
def test_fixture_flaky_hidden_test_is_a_fair_coin(outcomes, repos, tmp_path):
    code, output = outcomes[("fixtures", "flaky", "golden")]
    # It ran and pytest judged it: its other tests passed, and the coin decided the exit code.
    summary = output.strip().splitlines()[-1]
    assert code in (0, 1) and re.search(r"\b[1-9][0-9]* passed\b", summary), (code, output)
    assert ("1 failed" in summary) == (code == 1), (code, output)
    # Call the coin test itself many times in one process: both outcomes must show up
    # (the chance that 200 fair flips all agree is 2**-199).
    fixtures = repos["fixtures"]
    task = fixtures.tasks["flaky"]
    work = tree(fixtures.repo, task["refs"]["golden"], tmp_path / "golden", [task])
    script = (
        "import sys; sys.path[:0] = ['.', 'tests']\n"
        "import test_hidden_flaky as t\n"
        "passed = 0\n"
        "for _ in range(200):\n"
        "    try: t.test_coin_flip(); passed += 1\n"
        "    except AssertionError: pass\n"
        "print(passed)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=work, capture_output=True, text=True, check=True)
    assert 0 < int(done.stdout) < 200
