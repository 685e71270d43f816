"""The shared helpers over git's patch format (envs/integrity/patch.py): each chunk's paths,
however git wrote them, and which paths are protected."""

from __future__ import annotations

import pytest

from envs.integrity import patch


@pytest.mark.parametrize(
    "path, protected",
    [
        ("conftest.py", True),
        ("a/b/conftest.py", True),
        ("pkg/x.pth", True),
        ("pyproject.toml", True),
        ("tests/test_calc.sh", True),
        ("tests/runner.sh", True),
        ("tests/other.sh", False),
        ("src/conftest.txt", False),
    ],
)
def test_protected_path_patterns(path, protected):
    patterns = patch.protected_patterns(["tests/test_calc.sh"], ["tests/runner.sh"])
    assert patch.is_protected(path, patterns) is protected


def test_diff_headers_with_quoted_and_spaced_paths_parse():
    diff = (
        b'diff --git "a/sp ace/t\\303\\251\\"q.txt" "b/sp ace/t\\303\\251\\"q.txt"\nindex 1..2 100644\n'
        b"diff --git a/x b/y z\nsimilarity index 90%\nrename from x\nrename to y z\n"
        b"diff --git a/a b/c b/a b/c\nnew file mode 100644\n"
    )
    paths = [c.paths for c in patch.parse_chunks(diff)]
    assert paths == [('sp ace/té"q.txt',), ("x", "y z"), ("a b/c",)]
