"""Where a run is placed (``runtime.hosts``, ``runtime.bridge``) is no part of its spec: the same
run on other hosts, or resumed with other hosts, has the same spec hash, and a runtime's spec is
what it was before hosts existed."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.docker]


def _spec(*extra: str):
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.session import session_for

    typed = to_typed(compose_config(["task=sample/last_page", "agent=noop", *extra]))
    return plan(typed, builder=session_for(typed).builder).spec


def test_the_hosts_and_the_bridge_leave_the_spec_hash_as_it_was(base_image):
    here = _spec()
    elsewhere = _spec("runtime.hosts=[{url:'ssh://me@box:22',slots:3},{url:'unix:///x.sock',slots:1}]")
    relayed = _spec("runtime.bridge=relay")
    assert here.spec_hash == elsewhere.spec_hash == relayed.spec_hash
    assert sorted(here.to_dict()["runtime"]) == [
        "_target_",
        "api_timeout",
        "cpus",
        "default_exec_timeout",
        "memory",
        "name",
        "pids_limit",
    ]
    assert _spec("runtime.pids_limit=512").spec_hash != here.spec_hash  # what the run is, still is in it
