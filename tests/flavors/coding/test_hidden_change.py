"""The hidden change (envs/coding/hidden.py) and the upstream-fix split (envs/coding/upstream.py),
on git repositories the tests build: no Docker."""

from __future__ import annotations

from pathlib import Path

import pytest
from git_repos import commit, git, upstream

from engine.errors import ConfigError
from engine.models import UpstreamFix
from envs.coding import hidden
from envs.coding.hidden import HiddenFile
from envs.coding.upstream import new_task


@pytest.fixture
def change_repo(tmp_path) -> tuple[Path, str, str]:
    """A baseline and a test ref whose change has every kind of entry."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(
        repo,
        {
            "src/m.py": b"x = 1\n",
            "tests/test_old.py": b"def test_old(): pass\n",
            "tests/test_move.py": b"def test_move(): pass\n",
            "tests/run.sh": b"echo hi\n",
            "tests/data.txt": b"same\n",
        },
        "base",
    )
    test = commit(
        repo,
        {
            "tests/test_old.py": None,
            "tests/test_move.py": None,
            "tests/test_moved.py": b"def test_move(): assert 1\n",
            "tests/blob.bin": bytes(range(256)),
            "tests/run.sh": b"echo hi\n",
            "tests/cases/c1.json": b"{}\n",
        },
        "test",
        executable=("tests/run.sh",),
        links={"tests/link": "data.txt"},
    )
    return repo, base, test


def test_the_hidden_change_is_every_kind_of_change_between_baseline_and_test(change_repo):
    repo, base, test = change_repo
    files = hidden.read_change(repo, base, test, [], task_id="t/x")
    assert files == [
        HiddenFile("tests/blob.bin", "644", bytes(range(256))),  # binary, byte for byte
        HiddenFile("tests/cases/c1.json", "644", b"{}\n"),  # a data file, not a test module
        HiddenFile("tests/link", "link", b"data.txt"),  # a symlink: its target
        HiddenFile("tests/run.sh", "755", b"echo hi\n"),  # a mode-only change
        HiddenFile("tests/test_move.py", "del"),  # a rename is a delete ...
        HiddenFile("tests/test_moved.py", "644", b"def test_move(): assert 1\n"),  # ... and an add
        HiddenFile("tests/test_old.py", "del"),  # a deleted test is gone in grading
    ]
    assert hidden.test_modules(files) == ["tests/test_moved.py"]  # what {test_files} names


def test_hidden_tests_filter_the_change_and_a_filter_that_selects_nothing_is_one_line(change_repo):
    repo, base, test = change_repo
    kept = hidden.read_change(repo, base, test, ["tests/cases/", "*.bin"], task_id="t/x")
    assert [f.path for f in kept] == ["tests/blob.bin", "tests/cases/c1.json"]
    with pytest.raises(ConfigError, match=r"task 't/x': hidden_tests \['nothing/\*\*'\] select nothing"):
        hidden.read_change(repo, base, test, ["nothing/**"], task_id="t/x")
    with pytest.raises(ConfigError, match="the test ref changes nothing"):
        hidden.read_change(repo, base, base, [], task_id="t/x")
    # A named file the test ref does not change would silently not run: one line instead.
    with pytest.raises(ConfigError, match=r"hidden_tests names tests/data.txt, which the test ref does not change"):
        hidden.read_change(repo, base, test, ["tests/test_moved.py", "tests/data.txt"], task_id="t/x")


def test_default_test_paths_are_tests_not_library_code_named_test():
    from envs.coding.protect import DEFAULT_TEST_PATHS
    from envs.integrity import patch

    task_paths = [
        "tests/test_x.py",
        "pkg/tests/helpers.py",
        "a/conftest.py",
        "pkg/util_test.py",
        "gomod/x_test.go",
        "pytest.ini",
        "pkg/testdata/in.txt",
    ]
    library = ["django/test/testcases.py", "numpy/testing/_private/utils.py", "src/testing.py", "pyproject.toml"]
    assert [p for p in task_paths + library if patch.is_protected(p, DEFAULT_TEST_PATHS)] == task_paths


def request(tmp_path: Path, repo: Path, fix: str, **overrides) -> UpstreamFix:
    fields = dict(
        task_id="up/add",
        repo=str(repo),
        fix=fix,
        base=None,
        tests=[],
        prompt=None,
        install="",
        packages=[],
        test_command=None,
        conf_dir=tmp_path / "conf",
        repos_dir=tmp_path / "repos",
    )
    fields.update(overrides)
    return UpstreamFix(**fields)  # type: ignore[arg-type]


def test_task_new_splits_a_fix_into_three_branches_by_test_path(tmp_path):
    repo, base, fix = upstream(tmp_path)
    yaml_path = new_task(request(tmp_path, repo, fix))
    assert yaml_path == tmp_path / "conf" / "task" / "up" / "add.yaml"
    task_repo = tmp_path / "repos" / "up" / "add"
    assert sorted(git(task_repo, "for-each-ref", "--format=%(refname:short)").split()) == [
        "add_baseline",
        "add_golden",
        "add_test",
    ]  # nothing else of upstream's refs
    assert git(task_repo, "rev-parse", "add_baseline") == base
    assert git(task_repo, "diff", "--name-status", "add_baseline", "add_test").splitlines() == [
        "M\ttests/test_calc.py",
        "D\ttests/test_legacy.py",
    ]
    assert git(task_repo, "diff", "--name-status", "add_baseline", "add_golden").splitlines() == [
        "A\tCHANGES.md",
        "M\tpkg/calc.py",
    ]
    assert git(task_repo, "rev-parse", "add_test^") == git(task_repo, "rev-parse", "add_golden^") == base
    text = yaml_path.read_text()
    assert f'repo: "{task_repo}"' in text and 'prompt: "Fix add, which subtracted\\n\\nadd(1, 1) gave 0."' in text
    # The same fix gives the same commits (dated as the fix): a task re-made is the same task.
    again = new_task(request(tmp_path, repo, fix, task_id="up/add2", repos_dir=tmp_path / "repos2"))
    assert again.name == "add2.yaml"
    assert git(tmp_path / "repos2" / "up" / "add2", "rev-parse", "add2_test^{tree}") == git(
        task_repo, "rev-parse", "add_test^{tree}"
    )


def test_task_new_refuses_a_split_with_an_empty_side_in_one_line(tmp_path):
    repo, base, _ = upstream(tmp_path)
    only_tests = commit(repo, {"tests/test_calc.py": b"def test_nothing():\n    pass\n"}, "tests only")
    with pytest.raises(
        ConfigError, match=r"every path is a test path \(tests/test_calc.py\), so the golden would be empty"
    ):
        new_task(request(tmp_path, repo, only_tests))
    only_code = commit(repo, {"pkg/calc.py": b"def add(a, b):\n    return b + a\n"}, "code only")
    with pytest.raises(ConfigError, match="no path matches the test paths .* name them with --tests GLOB"):
        new_task(request(tmp_path, repo, only_code))
    # --tests names them: a fix whose tests live where the defaults do not look splits
    checked = commit(
        repo,
        {"pkg/calc.py": b"def add(a, b):\n    return a + b\n", "pkg/check_calc.py": b"def test_add():\n    pass\n"},
        "code and its check",
    )
    yaml_path = new_task(request(tmp_path, repo, checked, tests=["pkg/check_*.py"], task_id="up/named"))
    assert 'test_paths: ["pkg/check_*.py"]' in yaml_path.read_text()
    with pytest.raises(ConfigError, match="exists: choose another name"):
        new_task(request(tmp_path, repo, checked, tests=["pkg/check_*.py"], task_id="up/named"))
    with pytest.raises(ConfigError, match="must be SET/NAME"):
        new_task(request(tmp_path, repo, checked, task_id="nameonly"))


def test_task_new_finds_a_fix_reachable_only_from_a_tag(tmp_path):
    repo, base, fix = upstream(tmp_path)
    git(repo, "tag", "v1.0.1", fix)
    git(repo, "reset", "-q", "--hard", base)  # no branch holds the fix any more, only the tag
    yaml_path = new_task(request(tmp_path, repo, "v1.0.1"))
    task_repo = tmp_path / "repos" / "up" / "add"
    assert yaml_path.is_file()
    assert sorted(git(task_repo, "for-each-ref", "--format=%(refname)").split()) == [
        "refs/heads/add_baseline",
        "refs/heads/add_golden",
        "refs/heads/add_test",
    ]  # the tag is not kept


@pytest.mark.parametrize("length", [12, 40], ids=["short_sha", "full_sha"])
def test_task_new_reads_a_bare_mirror_without_a_config_file_as_bare(tmp_path, length):
    """GitPython takes such a mirror for a work tree's .git: a short SHA came out "not found",
    a full one "owned by another user"."""
    repo, base, fix = upstream(tmp_path)
    mirror = tmp_path / "mirror.git"
    git(tmp_path, "clone", "-q", "--mirror", str(repo), str(mirror))
    (mirror / "config").unlink()
    yaml_path = new_task(request(tmp_path, mirror, fix[:length]))
    task_repo = tmp_path / "repos" / "up" / "add"
    assert git(task_repo, "rev-parse", "add_baseline") == base
    assert git(task_repo, "diff", "--name-only", "add_baseline", "add_golden").splitlines() == [
        "CHANGES.md",
        "pkg/calc.py",
    ]
    assert f"# fix {fix}, base {base}" in yaml_path.read_text()


def test_a_prompt_taken_from_the_fix_commit_is_noted_until_the_author_edits_it(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from engine.config.compose import compose_config, to_typed
    from envs.coding import advice

    repo, _, fix = upstream(tmp_path)
    yaml_path = new_task(request(tmp_path, repo, fix))
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(tmp_path / "conf"))

    def notes() -> list[str]:
        task = to_typed(compose_config(["task=up/add"])).task
        return advice.notes(SimpleNamespace(task=task, task_id=task.id), {})  # type: ignore[arg-type]

    assert notes() == [
        "prompt is still the fix's commit message, which usually names the fix: write the task's "
        "own `prompt:` in its YAML (an issue's words)"
    ]
    text = yaml_path.read_text()
    yaml_path.write_text(text.replace('prompt: "Fix add, which subtracted', 'prompt: "add(1, 1) is 0; it should be 2.'))
    assert notes() == []  # the marker stays in the YAML, but no longer matches the prompt
    # A prompt the author gave is no commit message: no marker at all.
    given = new_task(
        request(tmp_path, repo, fix, task_id="up/given", repos_dir=tmp_path / "repos2", prompt="add(1, 1) is 0.")
    )
    assert "prompt_from_commit" not in given.read_text() and "prompt_from_commit" in text


def test_a_key_that_never_changes_a_verdict_stays_out_of_the_spec_while_empty():
    """prompt_from_commit is marked so: every task without it keeps the spec hash it had."""
    import dataclasses

    from engine.agents.noop import NoopAgentConfig
    from engine.config.schema import EnvConfig, FlavorConfig, IntegrityConfig, Timeouts
    from engine.models import RunSpec
    from engine.runtimes.docker.runtime import DockerRuntimeConfig
    from envs.coding.schema import CodingTaskConfig

    task = CodingTaskConfig(name="t", set="s", prompt="p", repo="r", test_command="pytest", id="s/t")
    spec = RunSpec(
        engine_version="0",
        task=task,
        env=EnvConfig(),
        flavor=FlavorConfig(),
        agent=NoopAgentConfig(),
        model=None,
        integrity=IntegrityConfig(),
        runtime=DockerRuntimeConfig(),
        image={},
        timeouts=Timeouts(),
        seed=0,
        attempt=0,
    )
    assert "prompt_from_commit" not in spec.to_dict()["task"] and "test_command" in spec.to_dict()["task"]
    marked = dataclasses.replace(spec, task=dataclasses.replace(task, prompt_from_commit="ab" * 32))
    assert marked.to_dict()["task"]["prompt_from_commit"] == "ab" * 32
    assert marked.spec_hash != spec.spec_hash
