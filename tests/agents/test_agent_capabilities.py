"""Agents declare the run's capabilities they connect to; a run serves only those
(engine/interfaces.py ``capabilities_used``; the run itself: tests/build/test_agent_image.py,
whose probe agent declares none and is given none)."""
from __future__ import annotations

import pytest

from engine.agents.integration_test import IntegrationTestAgent
from engine.agents.noop import NoopAgent
from engine.errors import AgentError
from engine.interfaces import CAPABILITIES, capabilities_used


def test_noop_connects_to_nothing_and_the_integration_test_agent_to_both():
    assert capabilities_used(NoopAgent()) == frozenset()
    assert capabilities_used(IntegrationTestAgent()) == frozenset({"mcp", "ssh"})


def test_a_plug_in_that_declares_nothing_is_served_everything():
    class Older:
        takes_model = False
        deterministic = True

    assert capabilities_used(Older()) == frozenset(CAPABILITIES)


def test_a_capability_no_run_serves_is_refused_in_one_line_naming_the_agent():
    class Asks:
        name = "asks"
        capabilities = ("mcp", "telepathy")

    with pytest.raises(AgentError) as caught:
        capabilities_used(Asks())
    message = str(caught.value)
    assert "'asks'" in message and "telepathy" in message and "\n" not in message
