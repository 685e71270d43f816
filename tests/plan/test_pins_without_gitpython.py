"""Planning pins refs and reads the hidden change with the git CLI (one process per call), not
GitPython, whose import alone was ~0.05-0.1 s of a check answered from the store: the answers
must be the very ones GitPython gave, and a wrong ref must still be named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from git_repos import commit, git

from engine.errors import ConfigError
from engine.plan import repos


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pins") / "r"
    path.mkdir()
    git(path, "init", "-q")
    commit(path, {"a.py": b"x = 1\n"}, "base")
    git(path, "branch", "baseline")
    git(path, "tag", "-a", "v1", "-m", "an annotated tag: peeled to its commit")
    commit(path, {"a.py": b"x = 2\n"}, "fix")
    git(path, "branch", "golden")
    return path


def test_one_git_call_pins_every_ref_as_gitpython_does(repo):
    refs = {"baseline": "baseline", "golden": "golden", "test": "v1"}
    pinned = repos.pin_all(repo, refs, task_id="t")
    assert pinned == {role: repos._commit_sha(repo, ref) for role, ref in refs.items()}
    assert pinned["test"] == pinned["baseline"]  # the tag's commit, not the tag object


def test_a_ref_not_in_the_repo_is_named_as_before(repo):
    with pytest.raises(ConfigError, match="golden ref 'nope' not found"):
        repos.pin_all(repo, {"baseline": "baseline", "golden": "nope"}, task_id="t")


def test_recorded_pins_are_checked_in_one_call_and_a_missing_one_is_told(repo):
    sha = repos.pin(repo, "golden", task_id="t", role="golden")
    assert repos.has_commits(repo, [sha, repos.pin(repo, "baseline", task_id="t", role="baseline")])
    assert not repos.has_commits(repo, [sha, "0" * 40])


def test_planning_a_coding_task_imports_neither_gitpython_nor_omegaconf():
    code = (
        "import sys; import envs.coding.flavor, envs.coding.hidden, engine.plan.repos; "
        "print(sorted(m for m in ('git', 'omegaconf') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_schemas_missing_marker_is_omegaconfs():
    import omegaconf

    from engine.config.schema import MISSING

    assert MISSING == omegaconf.MISSING


def test_within_a_sweep_each_repositorys_refs_are_resolved_once_and_the_next_sweep_resolves_afresh(repo, monkeypatch):
    """``repos.pinned_once`` (a sweep's): the jobs of one task pin the same refs, so git is asked
    once; a ref moved meanwhile is not seen there (every job runs the same commits), and is seen
    by the next sweep, and outside any sweep."""
    asked: list[list[str]] = []
    rev_parse = repos._rev_parse_commits

    def counted(path, revs):
        asked.append(list(revs))
        return rev_parse(path, revs)

    monkeypatch.setattr(repos, "_rev_parse_commits", counted)
    refs = {"baseline": "baseline", "golden": "golden"}
    with repos.pinned_once({}):
        first = repos.pin_all(repo, refs, task_id="t")
        git(repo, "branch", "-f", "golden", "baseline")  # moved while the sweep runs
        try:
            assert repos.pin_all(repo, refs, task_id="t") == first
            assert repos.pin_all(repo, {"baseline": "baseline"}, task_id="t") == {"baseline": first["baseline"]}
            assert len(asked) == 2  # the second set of refs is another question
            with repos.pinned_once({}):  # the next sweep
                assert repos.pin_all(repo, refs, task_id="t")["golden"] == first["baseline"]
            assert repos.pin_all(repo, refs, task_id="t") == first
        finally:
            git(repo, "branch", "-f", "golden", first["golden"])
    assert repos.pin_all(repo, refs, task_id="t") == first and len(asked) == 4
