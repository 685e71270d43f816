"""An agent declares what it needs in its image (``agent.image``: packages, files, an install
step): the plan gets a layer over the task image, named by those needs, the files' contents and
the task image; the agent works in the layer and grading stays on the task image.

The agents are ``tests/conf/agent/noop_with_jq.yaml`` (the noop agent with needs) and
``probe_with_jq.yaml`` (``tests/agent_probe``: it reports what its workspace holds)."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import uuid
from pathlib import Path

import pytest
from agent_probe import CAPABILITIES_SEEN

from engine.agents.integration_test import IntegrationTestAgentConfig
from engine.agents.noop import NoopAgentConfig
from engine.config.compose import compose_config, to_typed
from engine.config.schema import EnvConfig, FlavorConfig, TaskConfig, Timeouts
from engine.errors import BuildError, ConfigError
from engine.models import RunSpec
from engine.plan.spec import plan
from engine.runtimes.docker.runtime import DockerRuntimeConfig
from envs.coding.defences import CodingIntegrity

TESTS = Path(__file__).resolve().parents[1]
TASK = "sample/last_page"
HELLO = "/opt/crucible-probe/hello.txt"


@pytest.fixture(autouse=True)
def test_conf(monkeypatch):
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(TESTS / "conf"))
    monkeypatch.setenv("CRUCIBLE_PLUGIN_PACKAGES", "agent_probe")


def typed(*overrides: str):
    return to_typed(compose_config([f"task={TASK}", *overrides]))


def with_needs(cfg, **changes):
    """``cfg`` with its agent's image needs changed."""
    agent = dataclasses.replace(cfg.agent, image=dataclasses.replace(cfg.agent.image, **changes))
    return dataclasses.replace(cfg, agent=agent)


# ---------------------------------------------------------------- no Docker
def strict_as_it_was() -> CodingIntegrity:
    """What ``IntegrityConfig(mode="strict")`` held when the hashes below were computed (the
    engine's schema defaults then: vault, the uid wall, no network, protected and test paths
    dropped, the canary), as the coding flavor's integrity schema holds it now."""
    return CodingIntegrity(mode="strict", vault=True, drop_protected=True, restore_test_paths=True, canary=True)


def synthetic_spec(agent) -> RunSpec:
    return RunSpec(
        engine_version="0123456789abcdef",
        task=TaskConfig(name="t", set="s", prompt="p", id="s/t", pins={"baseline": "0" * 40}),
        env=EnvConfig(),
        flavor=FlavorConfig(_target_="envs.coding.flavor.CodingFlavor", name="coding"),
        agent=agent,
        model=None,
        integrity=strict_as_it_was(),
        runtime=DockerRuntimeConfig(),
        image={"tag": "crucible/task:abc", "input_hash": "abc"},
        timeouts=Timeouts(),
        seed=0,
        attempt=0,
    )


def test_an_agent_without_image_needs_keeps_the_spec_hash_it_had_before_agents_could_declare_any():
    """Hashes computed by the code before ``agent.image`` and ``spec.agent_image`` existed."""
    noop, replay = synthetic_spec(NoopAgentConfig()), synthetic_spec(IntegrationTestAgentConfig())
    assert noop.spec_hash == "e45d355fe1eb10ec483eb36bac0bdb0d6db17dcd3f46e449b60b076d79e7918c"
    assert replay.spec_hash == "06d1fc8e84d73cad0f923c9157e27111afa43e8e0fac1a8904654018bae0977c"
    stored = noop.to_dict()
    assert "agent_image" not in stored and "image" not in stored["agent"]


def test_declared_needs_are_part_of_the_stored_spec():
    agent = NoopAgentConfig(name="n")
    agent.image.packages = ["jq"]
    stored = dataclasses.replace(synthetic_spec(agent), agent_image={"tag": "crucible/agent:x", "input_hash": "x"})
    assert stored.to_dict()["agent"]["image"]["packages"] == ["jq"]
    assert stored.to_dict()["agent_image"] == {"tag": "crucible/agent:x", "input_hash": "x"}
    assert stored.spec_hash != synthetic_spec(NoopAgentConfig(name="n")).spec_hash


@pytest.mark.slow
@pytest.mark.parametrize("schema", ["_target_: engine.agents.noop.NoopAgent\n", "_target_: agent_probe.ProbeAgent\n"])
def test_a_misspelled_image_need_fails_at_compose_naming_the_key(schema, tmp_path, monkeypatch):
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "typo.yaml").write_text(schema + "name: typo\nimage:\n  pakages: [jq]\n")
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", f"{TESTS / 'conf'}:{tmp_path}")
    with pytest.raises(ConfigError, match=r"unknown config key 'agent\.image\.pakages'"):
        typed("agent=typo")
    with pytest.raises(ConfigError, match=r"unknown config key 'agent\.image\.pakages'"):
        typed("agent=noop_with_jq", "agent.image.pakages=[jq]")


def test_runtime_local_refuses_agent_image_needs_in_one_line():
    from engine.runtimes.local.template import LocalTemplateBuilder

    with pytest.raises(ConfigError) as info:
        plan(typed("agent=noop_with_jq", "runtime=local"), builder=LocalTemplateBuilder())
    message = str(info.value)
    assert "runtime local cannot install agent image needs" in message and "noop_with_jq" in message
    assert "\n" not in message


# ---------------------------------------------------------------- planning (Docker: base images)
@pytest.fixture(scope="module")
def builder(docker_client, base_image):
    from engine.build.images import ContentAddressedBuilder

    return ContentAddressedBuilder(docker_client)


@pytest.mark.docker
def test_needs_plan_a_layer_over_the_task_image_and_the_same_needs_plan_the_same_layer(builder):
    first = plan(typed("agent=noop_with_jq"), builder=builder)
    again = plan(typed("agent=noop_with_jq"), builder=builder)
    plain = plan(typed("agent=noop"), builder=builder)
    assert first.agent_image is not None and first.agent_image.tag.startswith("crucible/agent:")
    assert first.agent_image.tag != first.image.tag
    assert dict(first.agent_image.build_args)["BASE"] == first.image.tag
    assert (first.agent_image.tag, first.agent_image.context_dir) == (
        again.agent_image.tag,
        again.agent_image.context_dir,
    )
    assert first.spec.spec_hash == again.spec.spec_hash
    assert first.spec.image == plain.spec.image, "grading's image must not depend on the agent"
    assert first.spec.agent_image == {"tag": first.agent_image.tag, "input_hash": first.agent_image.input_hash}
    assert [ref.tag for ref in first.images] == [first.image.tag, first.agent_image.tag]
    assert plain.agent_image is None and plain.images == (plain.image,) and "agent_image" not in plain.spec.to_dict()
    context = Path(first.agent_image.context_dir)
    assert context.parent.name == "agent-layers" and not context.is_relative_to(TESTS.parent)


@pytest.mark.docker
def test_a_changed_package_or_file_content_is_a_new_layer_over_the_same_task_image(builder, tmp_path):
    cfg = typed("agent=noop_with_jq")
    hello = tmp_path / "hello.txt"
    hello.write_text("one\n")
    one = plan(with_needs(cfg, files={HELLO: str(hello)}), builder=builder)
    hello.write_text("two\n")
    two = plan(with_needs(cfg, files={HELLO: str(hello)}), builder=builder)
    more = plan(with_needs(cfg, files={HELLO: str(hello)}, packages=["jq", "tree"]), builder=builder)
    install = plan(with_needs(cfg, files={HELLO: str(hello)}, install="true"), builder=builder)
    layers = {p.agent_image.tag for p in (one, two, more, install)}
    assert len(layers) == 4, "a package, a file's content or the install step did not change the layer"
    assert {p.image.tag for p in (one, two, more, install)} == {one.image.tag}
    assert {str(p.spec.image) for p in (one, two, more, install)} == {str(one.spec.image)}
    assert len({p.spec.spec_hash for p in (one, two, more, install)}) == 4


@pytest.mark.docker
def test_a_missing_image_file_is_one_line_naming_the_agent_and_the_file(builder):
    cfg = with_needs(typed("agent=noop_with_jq"), files={HELLO: "tests/agent_probe/no_such_file.txt"})
    with pytest.raises(ConfigError) as info:
        plan(cfg, builder=builder)
    message = str(info.value)
    assert "noop_with_jq" in message and "tests/agent_probe/no_such_file.txt" in message and "\n" not in message


@pytest.mark.docker
def test_a_relative_destination_is_refused(builder):
    with pytest.raises(ConfigError, match="absolute"):
        plan(with_needs(typed("agent=noop_with_jq"), files={"opt/x": "tests/agent_probe/hello.txt"}), builder=builder)


@pytest.mark.slow
@pytest.mark.docker
def test_a_planned_base_names_a_layer_as_it_will_once_built(docker_client, base_image, tmp_path):
    """The layer over a task image not built yet has the tag it has once the task image is."""
    from engine.build.images import ContentAddressedBuilder

    def context(name: str, dockerfile: str) -> tuple[Path, Path]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(dockerfile)
        return tmp_path / name / "Dockerfile", tmp_path / name

    task = context("task", f"ARG BASE\nFROM ${{BASE}}\nRUN echo {uuid.uuid4().hex} > /nonce\n")
    layer = context("layer", "ARG BASE\nFROM ${BASE}\nRUN echo layer > /layer\n")
    first = ContentAddressedBuilder(docker_client, ca_bundle=None)
    task_ref = first.plan(*task, {"BASE": base_image}, "test-task")
    with pytest.raises(BuildError, match="not present"):
        ContentAddressedBuilder(docker_client, ca_bundle=None).plan(*layer, {"BASE": task_ref.tag}, "test-layer")
    before = first.plan(*layer, {"BASE": task_ref.tag}, "test-layer")
    try:
        first.ensure(task_ref)
        fresh = ContentAddressedBuilder(docker_client, ca_bundle=None)
        assert fresh.plan(*layer, {"BASE": task_ref.tag}, "test-layer").tag == before.tag
    finally:
        docker_client.api.remove_image(task_ref.tag, force=True)


# ---------------------------------------------------------------- a real run
class SpyRuntime:
    """The session's runtime, recording which image each workspace was provisioned from."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.provisioned: list[tuple[str, str]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def provision(self, image, **kwargs):
        self.provisioned.append((kwargs["purpose"], image.tag))
        return self.inner.provision(image, **kwargs)


def has_in_image(tag: str, command: str) -> bool:
    return (
        subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c", command], capture_output=True, timeout=120
        ).returncode
        == 0
    )


@pytest.mark.docker
@pytest.mark.slow
def test_the_agent_works_in_its_layer_and_grading_in_the_task_image(docker_client, base_image, tmp_path):
    from engine.run.batch import run_one
    from engine.run.session import session_for

    cfg = typed("agent=probe_with_jq", "integrity=strict")
    session = session_for(cfg)
    spy = SpyRuntime(session.runtime)
    session = dataclasses.replace(session, runtime=spy)
    planned = plan(cfg, builder=session.builder)
    assert planned.agent_image is not None
    record = asyncio.run(run_one(planned, session, run_dir=tmp_path / "run"))

    assert record.status == "completed", (record.error_phase, record.error)
    assert record.reward == 0.0  # the probe changes nothing: graded as the baseline
    seen = {step.arguments["command"]: (step.result, step.is_error) for step in record.steps}
    assert seen["jq --version"][0].startswith("jq-") and not seen["jq --version"][1]
    assert seen[f"cat {HELLO}"] == ((TESTS / "agent_probe" / "hello.txt").read_text().strip(), False)
    assert seen["cat /opt/crucible-probe/marker"] == ("installed", False)
    assert seen["id -u"] == ("1000", False), "the agent must act as the uid the integrity mode says"
    assert seen[CAPABILITIES_SEEN] == ("", False), "it declares none: the run serves it neither MCP nor ssh"
    # It works in its task's setup layer (engine/plan/setup_layer.py), made over its own layer.
    assert planned.setup_image is not None and dict(planned.setup_image.build_args)["BASE"] == planned.agent_image.tag
    assert sorted(spy.provisioned) == [("agent", planned.setup_image.tag), ("grade", planned.image.tag)]
    assert record.image_tag == planned.image.tag and record.spec["agent_image"]["tag"] == planned.agent_image.tag

    assert not has_in_image(planned.image.tag, f"command -v jq || test -e {HELLO}"), (
        "the task image has the agent's needs"
    )
    assert has_in_image(planned.agent_image.tag, f"command -v jq && test -e {HELLO}")
    assert has_in_image(planned.setup_image.tag, f"command -v jq && test -e {HELLO}")


@pytest.mark.docker
def test_the_layer_context_is_content_addressed_under_the_cache(builder):
    """Planning twice writes nothing new; the context holds the Dockerfile and the file copy."""
    first = plan(typed("agent=noop_with_jq"), builder=builder)
    context = Path(first.agent_image.context_dir)
    assert (context / "files" / "0").read_text() == (TESTS / "agent_probe" / "hello.txt").read_text()
    assert f'COPY ["files/0", "{HELLO}"]' in (context / "Dockerfile").read_text()
    siblings = sorted(p.name for p in context.parent.iterdir())
    plan(typed("agent=noop_with_jq"), builder=builder)
    assert sorted(p.name for p in context.parent.iterdir()) == siblings
