"""The repository every scan test changes (tests/scan_changes.py)."""

from __future__ import annotations

import pytest
from scan_changes import make_repo


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)
