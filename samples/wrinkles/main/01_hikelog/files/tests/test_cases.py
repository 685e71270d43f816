"""Every tests/cases/*.json file is a list of {"text": ..., "seconds": N} cases for
parse_duration; ``"seconds": null`` means the text must be rejected."""
import json
from pathlib import Path

import pytest

from hikelog.duration import parse_duration

CASES = Path(__file__).parent / "cases"


@pytest.mark.parametrize("name", sorted(path.name for path in CASES.glob("*.json")))
def test_cases(name):
    for case in json.loads((CASES / name).read_text(encoding="utf-8")):
        if case["seconds"] is None:
            with pytest.raises(ValueError):
                parse_duration(case["text"])
        else:
            assert parse_duration(case["text"]) == case["seconds"], case
