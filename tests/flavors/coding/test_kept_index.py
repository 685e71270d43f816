"""The index each task image keeps of its baseline (Dockerfile.hud's last step; read by
envs/coding/sh/shadow.sh, ``shadow_read_base``), on real containers from a real task image.

git in a fresh container from the image stats each file of the tree against it where an index
read from the vault (no stat data) makes it hash every one: the grading stager's refresh and
the capture's add. Nothing it could get wrong changes what is graded or captured: a tracked
file the install step rewrote stays one git hashes (and grading resets), a change that keeps
its size and mtime is still captured (its ctime moved), where the agent is root (no uid wall)
the capture never reads the copy it could have rewritten, and the image's own git config (a
base image's autocrlf) plays no part in writing it, as it plays none in reading it.
bench/bench_kept_index.py measures what it saves on a tree of 5,000 files.
"""

from __future__ import annotations

import re
import subprocess
import uuid

import coding_task as ct
import pytest

from engine.models import CapturedSubmission
from engine.util.paths import PROJECT_ROOT
from envs.coding.flavor import hidden_files
from envs.coding.gitops import GIT_ENV, HARDEN_FLAGS, VAULT
from envs.coding.grader import grade
from envs.coding.repo import capture_diff, setup_repo

KEPT = "/var/lib/crucible/index"
REWRITES_CALC = "sed -i 's/^# calc library$/# calc library!/' calc.sh"
"""An install step that rewrites a tracked file (as a build that stamps a version does)."""


@pytest.fixture(scope="module")
def installed_image(docker_client, base_image, repo, tmp_path_factory) -> str:
    context = tmp_path_factory.mktemp("kept-index-installed-ctx")
    return ct.build_image(docker_client, base_image, repo, context, install_cmd=REWRITES_CALC)


@pytest.fixture(scope="module")
def autocrlf_image(docker_client, base_image, repo, tmp_path_factory) -> str:
    """The calc task over a base whose system git config converts line ends (core.autocrlf):
    its clone checks the text files out with CRLF, which crucible's git (no system config)
    sees as changed."""
    context = tmp_path_factory.mktemp("kept-index-crlf-base")
    (context / "Dockerfile").write_text(f"FROM {base_image}\nRUN git config --system core.autocrlf true\n")
    tag = f"crucible-test/crlf-base:{uuid.uuid4().hex[:8]}"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(context)], check=True, capture_output=True)
    try:
        yield ct.build_image(docker_client, tag, repo, tmp_path_factory.mktemp("kept-index-crlf-ctx"))
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)


def _root(run, ws, script: str) -> str:
    result = run(ws.exec(["bash", "-c", script], cwd=ct.WORKDIR, timeout=60))
    assert result.ok, result.text()
    return result.stdout.decode()


def _stat_dirty(run, ws, index: str) -> list[str]:
    """The tracked files whose stat data in ``index`` is not the tree's, to git configured as
    crucible's scripts configure it: ``diff-files`` reads no file and refreshes nothing, so it
    names every entry git would have to hash."""
    env = " ".join(f"{k}={v}" for k, v in GIT_ENV.items())
    git = f"env -i {env} GIT_INDEX_FILE={index} git {' '.join(HARDEN_FLAGS)}"
    return _root(run, ws, f"{git} --git-dir={VAULT} --work-tree={ct.WORKDIR} diff-files --name-only").split()


def test_the_index_is_written_with_the_git_environment_and_flags_the_scripts_read_it_with():
    """Dockerfile.hud cannot import envs/coding/gitops.py: its copy of GIT_ENV and HARDEN_FLAGS
    must say the same, or a file clean under one config and not the other is never hashed."""
    step = (PROJECT_ROOT / "Dockerfile.hud").read_text().split("# The baseline's index, kept")[1]
    harden = re.search(r'HARDEN="([^"]*)"', step)
    assert harden is not None and harden.group(1).split() == list(HARDEN_FLAGS)
    assert "env -i" in step
    for name, value in GIT_ENV.items():
        assert f"{name}={value} " in step, name


@pytest.mark.docker
def test_the_image_keeps_the_baselines_index_root_only_with_the_trees_stat_data(workspace, run, repo, image):
    ws = workspace("grade")
    assert _root(run, ws, f"stat -c '%a %U' {KEPT} && ls {KEPT}").split("\n")[:2] == ["700 root", repo.baseline]
    assert _stat_dirty(run, ws, f"{KEPT}/{repo.baseline}") == []
    # What the stager read before: the baseline from the vault, no stat data, every file hashed.
    _root(run, ws, f"GIT_INDEX_FILE=/tmp/fresh git --git-dir={VAULT} read-tree {repo.baseline}")
    assert "calc.sh" in _stat_dirty(run, ws, "/tmp/fresh") and len(_stat_dirty(run, ws, "/tmp/fresh")) > 10


@pytest.mark.docker
def test_a_file_the_install_step_rewrote_is_hashed_and_grading_resets_it(workspace, run, repo, installed_image):
    ws = workspace("grade", image=installed_image)
    assert _stat_dirty(run, ws, f"{KEPT}/{repo.baseline}") == ["calc.sh"]
    task, integrity = ct.task(repo), ct.integrity("strict")
    golden = ct.golden_diff(repo)
    verdict = run(grade(ws, task, integrity, CapturedSubmission(diff=golden), hidden_files(task), timeout=120))
    # The golden diff applies to the baseline's calc.sh only: the stager put it back first.
    assert verdict.reward == 1.0, verdict.raw


@pytest.mark.docker
def test_a_change_that_keeps_its_size_and_mtime_is_still_captured(workspace, run, repo, image):
    ws = workspace()
    task, integrity = ct.task(repo), ct.integrity("strict")
    run(setup_repo(ws, task, integrity))
    # Rewritten in place (the same inode), the same size, its mtime put back: only ctime moved.
    same_size = "cp -p calc.sh /tmp/was && sed 's/- \\$2/+ $2/' /tmp/was 1<> calc.sh && touch -r /tmp/was calc.sh"
    edit = run(ws.exec(["bash", "-c", same_size], user=1000, cwd=ct.WORKDIR, timeout=60))
    assert edit.ok, edit.text()
    assert _root(run, ws, "stat -c '%s %Y' calc.sh /tmp/was | uniq | wc -l").strip() == "1"
    captured = run(capture_diff(ws, task, integrity))
    assert captured.files_changed == ["calc.sh"] and "+add() { echo $(( $1 + $2 )); }" in captured.diff


@pytest.mark.docker
@pytest.mark.parametrize("mode, reads_it", [("strict", True), ("none", False)])
def test_the_capture_reads_the_kept_index_only_where_the_agent_cannot_rewrite_it(
    workspace, run, repo, image, mode, reads_it
):
    """An index whose entry for calc.sh says "assume unchanged" hides a change of calc.sh from
    git: written as root, it stands for any index the agent could plant. Behind the uid wall
    only root (the engine) can write /var/lib/crucible, and the capture reads the image's copy;
    without the wall the agent is root, and the capture reads the baseline from the vault."""
    ws = workspace()
    task, integrity = ct.task(repo), ct.integrity(mode)
    run(setup_repo(ws, task, integrity))
    git = f"GIT_INDEX_FILE={KEPT}/{repo.baseline} git --git-dir={VAULT} --work-tree={ct.WORKDIR}"
    _root(run, ws, f"{git} update-index --assume-unchanged calc.sh")
    agent = 1000 if mode == "strict" else 0
    edit = run(ws.exec(["bash", "-c", "echo '# more' >> calc.sh"], user=agent, cwd=ct.WORKDIR))
    assert edit.ok, edit.text()
    captured = run(capture_diff(ws, task, integrity))
    assert ("calc.sh" not in captured.files_changed) is reads_it


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["strict", "none"])
def test_an_image_whose_git_config_converts_line_ends_still_gets_the_agents_diff_applied(
    workspace, run, repo, autocrlf_image, mode
):
    """The clone wrote the text files with CRLF (the base's autocrlf), so the capture, whose git
    reads no system config, sees each as changed from the baseline, and grading must first put
    each back as the baseline has it for that diff to apply. Had the index been written under the
    image's config, it would vouch for them: none put back, and no hunk applies."""
    ws = workspace(image=autocrlf_image)
    task, integrity = ct.task(repo), ct.integrity(mode)
    assert "calc.sh" in _stat_dirty(run, ws, f"{KEPT}/{repo.baseline}")
    run(setup_repo(ws, task, integrity))
    agent = 1000 if mode == "strict" else 0
    edit = run(ws.exec(["bash", "-c", "echo 'one more line' >> README.md"], user=agent, cwd=ct.WORKDIR))
    assert edit.ok, edit.text()
    captured = run(capture_diff(ws, task, integrity, hidden_paths=[ct.HIDDEN]))
    assert "README.md" in captured.files_changed and "+one more line" in captured.diff
    grading = workspace("grade", image=autocrlf_image)
    verdict = run(grade(grading, task, integrity, captured, hidden_files(task), timeout=120))
    assert verdict.raw["reason"] != "diff does not apply", verdict.raw
    assert _root(run, grading, "tail -n 1 README.md") == "one more line\n"
