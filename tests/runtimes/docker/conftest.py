"""The two extra Docker hosts the ``runtime.hosts`` modules share (``two_hosts.py``): each module
that asks gets its own, started once for it and gone after it (test_hosts.py stops d2)."""

from __future__ import annotations

import pytest
from two_hosts import second_dockerd, ssh_host


@pytest.fixture(scope="module")
def d2(docker_client):
    with second_dockerd() as daemon:
        yield daemon


@pytest.fixture(scope="module")
def ssh(docker_client):
    with ssh_host() as host:
        yield host
