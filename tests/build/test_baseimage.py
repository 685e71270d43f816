"""The offline base image's recipe-derived tag, and `crucible doctor`.

The bootstrap itself (debootstrap + import, ~1 min) runs once per machine through the
``base_image`` fixture; these tests reuse it and never rebuild it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.build.baseimage import BaseRecipe, base_image_status, ensure_base_image
from engine.cli.doctor import run_doctor
from engine.errors import BuildError, UserError
from engine.util import paths

UNREACHABLE = "unix:///nonexistent/crucible-test-docker.sock"


def test_base_tag_is_derived_from_the_recipe_not_the_rootfs():
    recipe = BaseRecipe()
    assert recipe.tag == BaseRecipe().tag
    assert recipe.tag.startswith("crucible-base:") and len(recipe.tag.split(":")[1]) == 16
    assert dataclasses.replace(recipe, include=("git",)).tag != recipe.tag
    assert dataclasses.replace(recipe, changes=("ENV LANG=C",)).tag != recipe.tag
    assert recipe.ref().input_hash == recipe.input_hash and recipe.ref().purpose == "base"


@pytest.mark.docker
def test_present_base_image_is_returned_after_one_inspect(docker_client, base_image, monkeypatch):
    from engine.build import baseimage

    asked = []
    monkeypatch.setattr(baseimage, "_bootstrap_and_import", lambda *a: asked.append("bootstrap"))
    inspect = baseimage.image_info
    monkeypatch.setattr(baseimage, "image_info", lambda client, tag: asked.append(tag) or inspect(client, tag))
    ref = ensure_base_image(docker_client)
    assert asked == [base_image]  # one inspect, no lock taken, nothing bootstrapped
    assert ref.tag == base_image == BaseRecipe().tag
    assert base_image_status(docker_client) == "present"
    assert base_image_status(docker_client, BaseRecipe(suite="crucible-test-no-such-suite")) == "missing"


@pytest.mark.docker
def test_missing_base_without_debootstrap_is_one_user_error_line(docker_client, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no debootstrap on it
    with pytest.raises(UserError) as caught:
        ensure_base_image(docker_client, BaseRecipe(suite="crucible-test-no-such-suite"))
    message = str(caught.value)
    assert "\n" not in message and "crucible doctor --fix" in message and "debootstrap" in message


@pytest.mark.docker
def test_failed_bootstrap_is_a_build_error_naming_the_log_and_leaves_no_rootfs(docker_client):
    recipe = BaseRecipe(suite="crucible-test-no-such-suite")
    with pytest.raises(BuildError, match=r"debootstrap failed .*log: .*base-") as caught:
        ensure_base_image(docker_client, recipe)
    log_path = str(caught.value).rsplit("log: ", 1)[1]
    assert "crucible-test-no-such-suite" in Path(log_path).read_text()
    assert not list(paths.cache_dir().glob("rootfs-*"))
    assert base_image_status(docker_client, recipe) == "missing"


@pytest.mark.docker
def test_doctor_fix_on_a_healthy_host_changes_nothing_and_says_ok(base_image):
    for fix in (False, True):
        lines: list[str] = []
        assert run_doctor(fix=fix, echo=lines.append) == 0
        assert [line.split()[:2] for line in lines] == [
            ["ok", "engine"],
            ["ok", "debootstrap"],
            ["ok", "base-image"],
            ["ok", "store"],
        ]
        assert base_image in lines[2]


def test_doctor_without_engine_says_how_to_fix_and_fails(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", UNREACHABLE)
    lines: list[str] = []
    assert run_doctor(fix=False, echo=lines.append) != 0
    engine_line = lines[0]
    assert engine_line.startswith("FAIL") and "unreachable" in engine_line and "crucible doctor --fix" in engine_line
    assert lines[2].split()[:2] == ["FAIL", "base-image"] and "no Docker engine" in lines[2]


def test_doctor_fix_never_starts_a_local_dockerd_for_a_remote_docker_host(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    lines: list[str] = []
    assert run_doctor(fix=True, echo=lines.append) != 0
    assert lines[0].startswith("FAIL") and "is not local" in lines[0]
