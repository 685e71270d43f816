"""engine/util/inputs.py: what is read while recording, and whether it is still as it was.
Real files, a real git repository and real subprocesses; the one stand-in is the image-ID
lookup (a function given to ``changed``), named so: the engine's own is exercised by
tests/cli/test_check_answers.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from engine.util.inputs import not_recorded, note_image, recording


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-q", "-m", "one")
    return path


def test_a_file_read_then_changed_or_a_file_added_beside_it_is_a_change(tmp_path):
    read = tmp_path / "conf" / "read.yaml"
    read.parent.mkdir()
    read.write_text("x: 1\n")
    with recording() as inputs:
        read.read_text()
    assert inputs.changed() is None and not inputs.foreign
    (read.parent / "new.yaml").write_text("y: 2\n")
    assert "directory" in str(inputs.changed())
    with recording() as inputs:
        read.read_text()
    read.write_text("x: 2\n")
    assert inputs.changed() == f"file {read} changed"


def test_a_missing_file_looked_for_and_then_made_is_a_change(tmp_path):
    wanted = tmp_path / "lock.json"
    with recording() as inputs, pytest.raises(FileNotFoundError):
        wanted.read_text()
    assert inputs.changed() is None
    wanted.write_text("{}")
    assert inputs.changed() is not None


def test_files_written_and_chores_are_no_inputs(tmp_path):
    with recording() as inputs:
        (tmp_path / "out.txt").write_text("written\n")
        with not_recorded():
            (tmp_path / "out.txt").read_text()
    assert str(tmp_path / "out.txt") not in inputs.files


def test_a_git_run_records_its_references_and_a_moved_one_is_a_change(repo):
    with recording() as inputs:
        git(repo, "rev-parse", "main^{commit}")
    assert list(inputs.git_dirs) == [str(repo / ".git")] and not inputs.foreign
    assert inputs.changed() is None
    (repo / "a.txt").write_text("b\n")
    git(repo, "commit", "-qam", "two")  # main moves
    assert str(repo / ".git") in str(inputs.changed())


def test_a_new_branch_is_a_change_even_with_the_old_ones_unmoved(repo):
    with recording() as inputs:
        git(repo, "rev-parse", "main")
    git(repo, "branch", "other")
    assert inputs.changed() is not None


def test_a_program_other_than_git_makes_the_answer_unrecordable(tmp_path):
    with recording() as inputs:
        subprocess.run(["true"], check=True)
    assert inputs.foreign == ["ran ['true']"]


def test_an_image_that_now_has_another_id_or_no_engine_to_ask_is_a_change():
    with recording() as inputs:
        note_image("base:1", "sha256:aaa")
    assert inputs.changed(image_id={"base:1": "sha256:aaa"}.get) is None  # stand-in lookup
    assert inputs.changed(image_id={"base:1": "sha256:bbb"}.get) == "image base:1 changed"

    def unreachable(name: str) -> str:
        raise OSError("no engine")

    assert inputs.changed(image_id=unreachable) == "image base:1: no engine"
    assert inputs.changed() is not None  # nothing to ask: never assumed unchanged


def test_recordings_do_not_nest():
    with recording(), pytest.raises(RuntimeError), recording():
        pass
