"""What a task's commits alone decide is read from git once, and kept across commands
(engine/util/commit_memo.py): the hidden change and the golden diff's tool calls. A later
command (here: the in-process memo cleared) reads the kept answer with no git at all; what
cannot be planned is refused every time and never kept; a kept answer that cannot be read is
computed again."""

from __future__ import annotations

import pytest
from git_repos import commit, git

from engine.errors import ConfigError
from envs.coding import hidden, validation


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path / "home"))
    hidden._read_change.cache_clear()
    validation._derived.cache_clear()
    yield tmp_path / "home" / "cache" / "commits"
    hidden._read_change.cache_clear()
    validation._derived.cache_clear()


@pytest.fixture
def task_repo(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    base = commit(repo, {"src/m.py": b"x = 1\n", "tests/test_old.py": b"def test_old(): pass\n"}, "base")
    golden = commit(repo, {"src/m.py": b"x = 2\n", "src/blob.bin": bytes(range(256))}, "golden")
    git(repo, "checkout", "-q", base)
    test = commit(
        repo,
        {"tests/test_old.py": None, "tests/test_new.py": b"def test_new(): assert 1\n", "tests/data.bin": b"\0\xff"},
        "test",
        executable=("tests/test_new.py",),
        links={"tests/link": "data.bin"},
    )
    return repo, base, golden, test


def no_git(*args, **kwargs):
    raise AssertionError("git was run for an answer that was kept")


def test_the_hidden_change_is_read_once_and_a_later_command_runs_no_git(home, task_repo, monkeypatch):
    repo, base, _, test = task_repo
    first = hidden.read_change(repo, base, test, [], task_id="t/x")
    assert [f.path for f in first] == ["tests/data.bin", "tests/link", "tests/test_new.py", "tests/test_old.py"]
    assert [f.mode for f in first] == ["644", "link", "755", "del"]
    assert len(list(home.glob("hidden-change-*.json"))) == 1

    hidden._read_change.cache_clear()  # as a new command's process has it
    monkeypatch.setattr(hidden, "_git", no_git)
    again = hidden.read_change(repo, base, test, [], task_id="t/x")
    assert again == first  # bytes and all: the binary file, the link's target
    assert next(f for f in again if f.path == "tests/data.bin").data == b"\0\xff"

    # other filters are another answer, read from git
    hidden._read_change.cache_clear()
    with pytest.raises(AssertionError, match="git was run"):
        hidden.read_change(repo, base, test, ["tests/*.py"], task_id="t/x")


def test_a_change_that_cannot_be_graded_is_refused_every_time_and_never_kept(home, task_repo):
    repo, base, _, test = task_repo
    for _ in range(2):
        hidden._read_change.cache_clear()
        with pytest.raises(ConfigError, match="select nothing"):
            hidden.read_change(repo, base, test, ["nothing/**"], task_id="t/x")
    assert not list(home.glob("hidden-change-*.json"))


def test_the_golden_diffs_tool_calls_are_derived_once_and_an_unreadable_kept_one_is_derived_again(
    home, task_repo, monkeypatch
):
    repo, base, golden, _ = task_repo
    first = validation.derive_validation(repo, base, golden, "/app")
    assert any("x = 2" in str(step) for step in first)
    (kept,) = home.glob("validation-*.json")

    validation._derived.cache_clear()
    monkeypatch.setattr(validation, "git_bytes", no_git)
    assert validation.derive_validation(repo, base, golden, "/app") == first
    with pytest.raises(AssertionError, match="git was run"):  # another workdir: another answer
        validation._derived.cache_clear()
        validation.derive_validation(repo, base, golden, "/work")

    monkeypatch.undo()
    monkeypatch.setenv("CRUCIBLE_HOME", str(home.parent.parent))
    kept.write_text('[{"name": "bash", "arg')  # cut short
    validation._derived.cache_clear()
    assert validation.derive_validation(repo, base, golden, "/app") == first
    assert kept.read_text().startswith("[") and kept.read_text().endswith("]")


def test_the_modules_a_baseline_imports_are_its_top_level_names_read_once(home, tmp_path, monkeypatch):
    from envs.coding import isolated

    repo = tmp_path / "imports"
    repo.mkdir()
    git(repo, "init", "-q")
    source = (
        b"import os.path as p, json\n"
        b"from collections import abc  # a comment\n"
        b"from . import sibling\n"
        b"from .near import thing\n"
        b"def f():\n"
        b"    import decimal\n"
        b"    from xml.etree import ElementTree\n"
        b"text = 'import nothing_in_a_string'\n"
    )
    base = commit(repo, {"pkg/m.py": source, "pkg/notes.txt": b"import not_python\n"}, "base")
    later = commit(repo, {"pkg/m.py": b"import csv\n"}, "later")
    assert isolated.imported_modules(str(repo), base) == ["collections", "decimal", "json", "os", "xml"]
    assert isolated.imported_modules(str(repo), later) == ["csv"]
    monkeypatch.setattr(isolated.subprocess, "run", no_git)  # kept: a later command reads no repo
    assert isolated.imported_modules(str(repo), base) == ["collections", "decimal", "json", "os", "xml"]
