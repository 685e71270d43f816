"""Each agent's and runtime's schema lives beside its class, named by the class's
``config_schema`` and found from the config's ``_target_``, as a flavor's are: engine/config
holds only the bases they extend, and a misspelled key still fails at compose, naming it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from engine.config import schema
from engine.config.compose import compose_config, to_typed
from engine.config.plugins import plugin_class
from engine.config.tree import CONF_DIR
from engine.errors import ConfigError

TASK = "task=sample/last_page"
BUILT_IN = [(group, path.stem) for group in schema.PLUGIN_GROUPS for path in sorted((CONF_DIR / group).glob("*.yaml"))]


@pytest.mark.parametrize(("group", "option"), BUILT_IN, ids=[f"{g}={o}" for g, o in BUILT_IN])
def test_each_built_in_plugin_is_typed_by_its_classs_own_schema_and_a_bad_key_fails_at_compose(group, option):
    target = yaml.safe_load((CONF_DIR / group / f"{option}.yaml").read_text())["_target_"]
    cls = plugin_class(target, where=group)
    own = cls.__dict__.get("config_schema")
    assert own is not None, f"{target} names no config_schema of its own"
    assert dataclasses.is_dataclass(own) and issubclass(own, schema.PLUGIN_GROUPS[group])
    assert own.__module__ == cls.__module__, f"{own.__name__} lives in {own.__module__}, not beside {target}"
    assert own._target_ == target  # the schema's default names the class it belongs to
    assert type(getattr(to_typed(compose_config([TASK, f"{group}={option}"])), group)) is own

    with pytest.raises(ConfigError) as info:
        compose_config([TASK, f"{group}={option}", f"{group}.no_such_key=1"])
    assert str(info.value) == (f"unknown config key '{group}.no_such_key' (from override '{group}.no_such_key=1')")


def test_engine_config_holds_only_the_bases_and_registers_no_plugin_schema():
    from hydra.core.config_store import ConfigStore

    extending = [
        name
        for name, obj in vars(schema).items()
        if isinstance(obj, type)
        and obj.__module__ == schema.__name__
        and any(issubclass(obj, base) and obj is not base for base in schema.PLUGIN_GROUPS.values())
    ]
    assert extending == []
    schema.register()
    assert not set(schema.PLUGIN_GROUPS) & set(ConfigStore.instance().repo)


def test_a_key_the_options_file_omits_is_set_by_override_and_typed_by_the_schema():
    typed = to_typed(
        compose_config([TASK, "agent=tool_calling", "agent.max_steps=7", "runtime=local", "runtime.install_timeout=60"])
    )
    assert (typed.agent.max_steps, typed.runtime.install_timeout, typed.runtime.bwrap) == (7, 60.0, "/usr/bin/bwrap")
    with pytest.raises(
        ConfigError, match=r"^bad config value at 'agent\.max_steps': .*\(from override 'agent\.max_steps=many'\)$"
    ):
        compose_config([TASK, "agent=tool_calling", "agent.max_steps=many"])


@pytest.mark.parametrize(
    ("group", "text", "key"),
    [
        ("agent", "_target_: engine.agents.tool_calling.ToolCallingAgent\nmax_stepz: 3\n", "agent.max_stepz"),
        (
            "runtime",
            "_target_: engine.runtimes.docker.runtime.DockerRuntime\nimage:\n  pakages: [jq]\n",
            "runtime.image",
        ),
    ],
)
def test_a_misspelled_key_in_an_options_file_fails_at_compose_naming_it(group, text, key, tmp_path: Path, monkeypatch):
    (tmp_path / group).mkdir()
    (tmp_path / group / "typo.yaml").write_text(f"{text}name: typo\n")
    monkeypatch.setenv("CRUCIBLE_CONFIG_PATH", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        compose_config([TASK, f"{group}=typo"])
    assert str(info.value) == f"unknown config key '{key}'"
