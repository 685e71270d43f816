"""Run specs: frozen, pinned at plan time, content-hashed, and re-plannable to the same hash."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from omegaconf import OmegaConf

from engine.config.compose import compose_config, to_typed
from engine.config.tree import group_options
from engine.errors import ConfigError
from engine.plan import repos
from engine.plan.spec import plan, replan
from engine.util.codehash import engine_version

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def builder(docker_client, base_image):
    from engine.build.images import ContentAddressedBuilder

    return ContentAddressedBuilder(docker_client)


@pytest.fixture(scope="module")
def task():
    return [t for t in group_options("task") if t.startswith("sample/")][0]


def planned(builder, *overrides, pins=None):
    return plan(to_typed(compose_config(list(overrides))), builder=builder, pins=pins)


def test_refs_are_pinned_to_commit_shas_and_the_spec_is_frozen(builder, task):
    spec = planned(builder, f"task={task}").spec
    pins = spec.task.pins
    assert set(pins) == {"baseline", "test", "golden"}
    assert all(re.fullmatch(r"[0-9a-f]{40}", sha) for sha in pins.values()), pins
    assert spec.engine_version == engine_version()
    assert spec.image["input_hash"] and spec.image["tag"].startswith("crucible/task:")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 5  # frozen


def test_the_same_config_plans_to_the_same_hash(builder, task):
    assert planned(builder, f"task={task}").spec.spec_hash == planned(builder, f"task={task}").spec.spec_hash


def test_generated_repos_have_the_same_shas_wherever_they_are_built(builder, task, tmp_path, monkeypatch):
    first = planned(builder, f"task={task}").spec.task.pins
    monkeypatch.setenv("CRUCIBLE_HOME", str(tmp_path))  # a fresh cache: the repo is generated again
    assert planned(builder, f"task={task}").spec.task.pins == first


def test_replanning_a_saved_config_with_its_pins_gives_the_same_hash(builder, task, tmp_path):
    cfg = compose_config([f"task={task}", "agent=integration_test", "seed=7"])
    original = plan(to_typed(cfg), builder=builder)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(OmegaConf.to_yaml(cfg))
    (run_dir / "pins.json").write_text(json.dumps(original.spec.task.pins))
    assert replan(run_dir, builder=builder).spec.spec_hash == original.spec.spec_hash


def test_recorded_pins_win_over_moved_refs(builder, task, tmp_path):
    """A branch that moved after the run does not change what a re-plan of that run means."""
    spec = planned(builder, f"task={task}").spec
    moved = dict(spec.task.pins, golden=spec.task.pins["baseline"])
    replanned = planned(builder, f"task={task}", pins=moved).spec
    assert replanned.task.pins["golden"] == spec.task.pins["baseline"]
    assert replanned.spec_hash != spec.spec_hash


def test_a_pin_that_is_not_in_the_repo_is_a_clear_error(builder, task):
    spec = planned(builder, f"task={task}").spec
    with pytest.raises(ConfigError, match="not in"):
        planned(builder, f"task={task}", pins=dict(spec.task.pins, golden="0" * 40))


def test_agents_without_a_model_drop_it_so_model_sweeps_do_not_duplicate_them(builder, task):
    a = planned(builder, f"task={task}", "agent=noop", "model=openai/a").spec
    b = planned(builder, f"task={task}", "agent=noop", "model=openai/b").spec
    assert a.model is None and "model" not in a.to_dict()["agent"] and a.spec_hash == b.spec_hash


def test_attempts_and_seeds_make_distinct_specs(builder, task):
    hashes = {planned(builder, f"task={task}", f"attempt={i}").spec.spec_hash for i in range(3)}
    hashes.add(planned(builder, f"task={task}", "seed=1").spec.spec_hash)
    assert len(hashes) == 4


def test_integrity_mode_and_agent_change_the_hash(builder, task):
    base = planned(builder, f"task={task}").spec.spec_hash
    assert planned(builder, f"task={task}", "integrity=vault").spec.spec_hash != base
    assert planned(builder, f"task={task}", "agent=integration_test").spec.spec_hash != base


def test_the_baseline_bundle_carries_no_answer_key(builder, task, tmp_path):
    spec = planned(builder, f"task={task}").spec
    repo = repos.resolve_repo(spec.task.repo)
    bundle = tmp_path / "b.bundle"
    repos.baseline_bundle(repo, spec.task.refs.baseline, spec.task.pins["baseline"], bundle)
    heads = repos.git(repo, "bundle", "list-heads", str(bundle))
    assert heads.split() == [spec.task.pins["baseline"], f"refs/heads/{spec.task.refs.baseline}"]
    clone = tmp_path / "clone"
    repos.git(tmp_path, "clone", "--quiet", "--mirror", str(bundle), str(clone))
    for role in ("golden", "test"):
        assert not repos.has_commit(clone, spec.task.pins[role]), f"{role} commit leaked into the image bundle"
