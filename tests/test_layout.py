"""The engine knows no flavor: nothing under engine/ imports envs/ or swe_tasks/ (DESIGN.md)."""
from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "engine"
FLAVOR_PACKAGES = ("envs", "swe_tasks")


def flavor_imports(source: str) -> list[tuple[int, str]]:
    """Every import of a flavor package in ``source``, wherever it stands (module level, in a
    function, under TYPE_CHECKING), as (line, module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, name) for name in names if name.split(".")[0] in FLAVOR_PACKAGES]
    return found


def test_no_module_under_engine_imports_a_flavor():
    offenders = [f"{path.relative_to(ENGINE.parent)}:{line}: {name}"
                 for path in sorted(ENGINE.rglob("*.py")) for line, name in flavor_imports(path.read_text())]
    assert offenders == [], "engine/ must import nothing from envs/ or swe_tasks/:\n" + "\n".join(offenders)


def test_the_check_finds_imports_in_every_form():
    source = ("import envs.coding\nfrom swe_tasks import rows\n"
              "def f():\n    from envs.coding.grader import grade\n"
              "if TYPE_CHECKING:\n    import swe_tasks.x as y\nimport engine.envs_like\n")
    assert [name for _, name in flavor_imports(source)] == ["envs.coding", "swe_tasks", "envs.coding.grader", "swe_tasks.x"]
