"""engine/util/inputs.py: what is read while recording, and whether it is still as it was.
Real files, a real git repository and real subprocesses; the one stand-in is the image-ID
lookup (a function given to ``changed``), named so: the engine's own is exercised by
tests/cli/test_check_answers.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from git_repos import git

from engine.util.codehash import engine_version
from engine.util.inputs import not_recorded, note_file, note_image, racy, recording
from engine.util.paths import PROJECT_ROOT


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


# ---- what a review of the kept answers found unseen (each once a stale "ship")


def test_a_git_run_that_may_reach_another_repository_makes_the_answer_unrecordable(repo, tmp_path):
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    with recording() as inputs:
        git(clone, "fetch", "-q", "origin")
    assert inputs.foreign == ["git fetch: another repository's state"]


def test_a_git_run_records_the_users_git_config_which_git_reads_too(repo, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
    monkeypatch.setenv("HOME", str(home))
    with recording() as inputs:  # git as the user runs it: their HOME, their global config
        subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True)
    assert inputs.changed() is None
    (home / ".gitconfig").write_text("")
    assert inputs.changed() == f"file {home / '.gitconfig'} changed"


def test_an_edit_that_keeps_the_size_and_sets_the_mtime_back_is_a_change(tmp_path):
    path = tmp_path / "task.yaml"
    path.write_text("test: pytest -q\n")
    before = path.stat()
    with recording() as inputs:
        path.read_text()
    with open(path, "r+") as fh:  # same inode, same size
        fh.write("test: pytest -v\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert inputs.changed() == f"file {path} changed"


def test_files_noted_by_hand_are_recorded_wherever_they_are_and_bytecode_read_is_not(tmp_path):
    import sys

    installed = Path(sys.prefix) / "pyvenv.cfg"
    bytecode = tmp_path / "__pycache__" / "m.cpython-311.pyc"
    bytecode.parent.mkdir()
    bytecode.write_bytes(b"x")
    with recording() as inputs:
        note_file(installed)
        note_file(tmp_path / "not-there.pem")  # looked for: its appearing is a change
        bytecode.read_bytes()
    assert str(installed) in inputs.files and inputs.files[str(tmp_path / "not-there.pem")] is None
    assert str(bytecode) not in inputs.files


def test_the_code_hash_notes_a_plug_ins_files_each_time_it_is_asked_even_remembered():
    engine_version("toy_flavor.flavor.ToyFlavor")  # remembered by this process
    with recording() as inputs:
        engine_version("toy_flavor.flavor.ToyFlavor")
    assert str(PROJECT_ROOT / "tests" / "toy_flavor" / "flavor.py") in inputs.files
    assert str(PROJECT_ROOT / "engine" / "errors.py") in inputs.files


def test_a_dataset_hashed_through_its_memo_is_still_an_input(tmp_path):
    from swe_tasks.source import file_sha256

    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text('{"instance_id": "x"}\n')
    file_sha256(dataset, "dataset")  # the memo now spares reading it
    with recording() as inputs:
        file_sha256(dataset, "dataset")
    assert str(dataset) in inputs.files


def test_a_ca_bundle_that_appears_where_the_environment_names_one_is_a_change(tmp_path, monkeypatch):
    from engine.build.images import default_ca_bundle

    bundle = tmp_path / "ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    with recording() as inputs:
        assert default_ca_bundle() is None
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    assert inputs.changed() == f"file {bundle} changed"


def test_an_input_changed_just_now_is_racy_and_one_changed_earlier_is_not(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    st = path.stat()
    stats = {str(path): (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)}
    assert racy(stats, st.st_ctime_ns + 10**8) == str(path)  # 0.1 s later: within a coarse tick
    assert racy(stats, st.st_ctime_ns + 5 * 10**9) is None
