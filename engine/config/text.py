"""A config as YAML text, exactly as ``OmegaConf.to_yaml`` writes it, with libyaml's emitter.

Every run directory keeps its config (``.hydra/config.yaml``, what ``rerun`` plans again from)
and each sweep job its overrides; OmegaConf's own dumper emits in Python (~2.5 ms a run's
config here), libyaml's in C (~0.4 ms). Same representers, same resolver, same options: the
text is the same (tests/config/test_text.py compares them), but for characters beyond the
Basic Multilingual Plane, which libyaml escapes where Python's emitter writes them: a config
holding one, or PyYAML built without libyaml, is written by OmegaConf's own dumper.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf._utils import OmegaConfDumper

_CDumper: Any = getattr(yaml, "CDumper", None)
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


class _LibyamlDumper(_CDumper or object):  # type: ignore[misc]
    """OmegaConf's dumper (strings that would read back as another type are quoted) over libyaml."""


if _CDumper is not None:
    _LibyamlDumper.add_representer(str, OmegaConfDumper.str_representer)


def config_yaml(cfg: Any) -> str:
    """``OmegaConf.to_yaml(cfg)``: interpolations kept, keys in their order."""
    container = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True) if OmegaConf.is_config(cfg) else cfg
    if _CDumper is None or _has_astral(container):
        return OmegaConf.to_yaml(cfg)
    text: str = yaml.dump(
        container, Dumper=_LibyamlDumper, default_flow_style=False, allow_unicode=True, sort_keys=False
    )
    return text


def _has_astral(data: Any) -> bool:
    if isinstance(data, str):
        return _ASTRAL.search(data) is not None
    if isinstance(data, dict):
        return any(_has_astral(k) or _has_astral(v) for k, v in data.items())
    if isinstance(data, list):
        return any(_has_astral(item) for item in data)
    return False
