"""``runtime.bridge``: mount (the default) or relay; anything else is one line naming the key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engine.config.compose import compose_config, to_typed
from engine.errors import ConfigError


def test_the_bridge_is_mounted_unless_relay_is_asked_for():
    assert to_typed(compose_config(["task=sample/last_page"])).runtime.bridge == "mount"
    assert to_typed(compose_config(["task=sample/last_page", "runtime.bridge=relay"])).runtime.bridge == "relay"


def test_an_unknown_bridge_mode_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"runtime\.bridge must be one of mount, relay, got 'sideways'"):
        to_typed(compose_config(["task=sample/last_page", "runtime.bridge=sideways"]))
    cli = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "run", "task=sample/last_page", "runtime.bridge=sideways"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 2 and cli.stderr.strip().splitlines() == [
        "crucible run: runtime.bridge must be one of mount, relay, got 'sideways'"
    ], cli.stderr
