"""engine/config/text.py writes a config's YAML with libyaml: the text must be OmegaConf's own,
byte for byte, for every config crucible composes and for the strings YAML reads as something else."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from engine.config.compose import compose_config
from engine.config.text import _CDumper, config_yaml
from engine.config.tree import group_options

TRICKY = [
    "",
    "true",
    "False",
    "yes",
    "off",
    "null",
    "~",
    "1",
    "-1",
    "1.5",
    "1e3",
    ".inf",
    "0x1F",
    "0o17",
    "12:30",
    "2026-12-06",
    "a: b",
    "- item",
    "#not a comment",
    "value # comment",
    "${oc.env:HOME}",
    "${task.id}",
    "'quoted'",
    '"double"',
    " leading space",
    "trailing space ",
    "tab\there",
    "line one\nline two\n",
    "ends with newline\n",
    "unicode: é ü 漢字 🙂",
    "control \x07 bell",
    "word " * 40,
    "x" * 200,
    "@at",
    "`tick`",
    "*star",
    "&anchor",
    "!tag",
    "%percent",
    "{a: 1}",
    "[1, 2]",
    "?",
    "-",
    ":",
]


def test_the_samples_configs_are_written_as_omegaconf_writes_them() -> None:
    for task in [o for o in group_options("task") if o.startswith("sample/")]:
        for agent in ("noop", "integration_test"):
            cfg = compose_config([f"task={task}", f"agent={agent}"])
            assert config_yaml(cfg) == OmegaConf.to_yaml(cfg), (task, agent)


@pytest.mark.parametrize("text", TRICKY)
def test_a_string_yaml_would_read_as_something_else_is_written_as_omegaconf_writes_it(text: str) -> None:
    cfg = OmegaConf.create({"plain": text, "nested": {"list": [text, 1, None, True, 2.5], text or "empty": text}})
    written = config_yaml(cfg)
    assert written == OmegaConf.to_yaml(cfg)
    assert OmegaConf.create(written) == cfg  # and it reads back as the same config


def test_an_override_list_is_written_as_omegaconf_writes_it() -> None:
    combo = ["task=sample/last_page", "agent.model=x:y", "seed=1", "+extra='a b'", "hydra.launcher.n_jobs=2"]
    assert config_yaml(OmegaConf.create(combo)) == OmegaConf.to_yaml(OmegaConf.create(combo))


def test_libyaml_is_what_writes_it_here() -> None:
    assert _CDumper is not None, "PyYAML without libyaml: every config would go through OmegaConf's Python emitter"
