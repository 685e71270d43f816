"""The synthetic SWE-bench Pro instances that the strict-grading modules share (test_swe_strict*.py):
generated once a session, with pytest, Go and JavaScript instances; each module points its
commands at them with a module fixture of its own (``swe_synth.pointed_at``)."""

from __future__ import annotations

import pytest
import swe_synth


@pytest.fixture(scope="session")
def strict_instances(tmp_path_factory, base_image):
    return swe_synth.generate(
        tmp_path_factory.mktemp("swe-strict"), base_image, with_pytest=True, with_go=True, with_js=True
    )
