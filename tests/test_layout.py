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
    offenders = [
        f"{path.relative_to(ENGINE.parent)}:{line}: {name}"
        for path in sorted(ENGINE.rglob("*.py"))
        for line, name in flavor_imports(path.read_text())
    ]
    assert offenders == [], "engine/ must import nothing from envs/ or swe_tasks/:\n" + "\n".join(offenders)


def test_the_check_finds_imports_in_every_form():
    source = (
        "import envs.coding\nfrom swe_tasks import rows\n"
        "def f():\n    from envs.coding.grader import grade\n"
        "if TYPE_CHECKING:\n    import swe_tasks.x as y\nimport engine.envs_like\n"
    )
    assert [name for _, name in flavor_imports(source)] == [
        "envs.coding",
        "swe_tasks",
        "envs.coding.grader",
        "swe_tasks.x",
    ]


SHARED_CATALOGUE = ENGINE.parent / "envs" / "integrity"
FLAVOR_ROOMS = ("envs.coding", "envs.sdlc", "envs.harbor", "swe_tasks")
"""The flavors' own rooms: the defence catalogue they all import (envs/integrity/) imports none."""


def modules_imported(source: str) -> list[tuple[int, str]]:
    """Every module ``source`` imports, wherever it stands, as (line, dotted name); for
    ``from A import b`` both ``A`` and ``A.b`` (``b`` may be a module)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def room_imports(source: str) -> list[tuple[int, str]]:
    """The imports of a flavor room (``FLAVOR_ROOMS``) in ``source``, as (line, module)."""
    return sorted(
        {
            (line, name)
            for line, name in modules_imported(source)
            if any(name == room or name.startswith(room + ".") for room in FLAVOR_ROOMS)
        }
    )


def test_the_shared_defence_catalogue_imports_no_flavor_room():
    offenders = [
        f"{path.relative_to(ENGINE.parent)}:{line}: {name}"
        for path in sorted(SHARED_CATALOGUE.rglob("*.py"))
        for line, name in room_imports(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "envs/integrity/ is shared by the flavors and imports none of them:\n" + "\n".join(
        offenders
    )


def test_the_room_check_finds_imports_in_every_form():
    source = (
        "from envs import coding\nimport swe_tasks.strict\nfrom envs.integrity import patch\n"
        "def f():\n    from envs.sdlc.flavor import SdlcFlavor\n"
        "if TYPE_CHECKING:\n    from envs.harbor import grader\nimport envs.codingish\n"
    )
    assert [name for _, name in room_imports(source)] == [
        "envs.coding",
        "swe_tasks.strict",
        "envs.sdlc.flavor",
        "envs.sdlc.flavor.SdlcFlavor",
        "envs.harbor",
        "envs.harbor.grader",
    ]


CODING = "envs.coding"
REACHING_CODING = ("swe_tasks", "envs/sdlc")
"""Flavors built on the coding flavor: they use its public names only, so it can change its insides."""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _in_coding(module: str) -> bool:
    return module == CODING or module.startswith(CODING + ".")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def private_coding_names(source: str) -> list[tuple[int, str]]:
    """Every private name (a leading underscore, not a dunder) of envs/coding that ``source``
    reaches, as (line, dotted name): imported from it, a private module of it, or an attribute
    of what it imported from it (``repo._submission`` after ``from envs.coding import repo``)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a local name -> what of envs.coding it stands for
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(alias.asname, alias.name) for alias in node.names if _in_coding(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _in_coding(node.module):
            pairs = [(alias.asname or alias.name, f"{node.module}.{alias.name}") for alias in node.names]
        else:
            continue
        for local, full in pairs:
            found += [(node.lineno, full)] if any(_private(part) for part in full.split(".")) else []
            if local:
                bound[local] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and (dotted := _dotted(node.value)):
            first, _, rest = dotted.partition(".")
            full = ".".join(filter(None, [bound.get(first, first), rest]))
            if _in_coding(full):
                found.append((node.lineno, f"{full}.{node.attr}"))
    return sorted(found)


def test_no_flavor_built_on_coding_reaches_its_private_names():
    root = ENGINE.parent
    offenders = [
        f"{path.relative_to(root)}:{line}: {name}"
        for folder in REACHING_CODING
        for path in sorted((root / folder).rglob("*.py"))
        for line, name in private_coding_names(path.read_text(encoding="utf-8"))
    ]
    assert offenders == [], "swe_tasks/ and envs/sdlc/ may use only envs/coding's public names:\n" + "\n".join(
        offenders
    )


def test_the_private_name_check_finds_every_form():
    source = (
        "from envs.coding import repo, _hidden\nfrom envs.coding.grader import _tail, grade\n"
        "import envs.coding.scanner as sc\nimport envs.coding._internal\n"
        "def f():\n    return repo._submission(1) + sc._rule + envs.coding.protect._split + repo.capture_diff\n"
        "x = grade.__name__ + other._private\n"
    )
    assert sorted(name for _, name in private_coding_names(source)) == [
        "envs.coding._hidden",
        "envs.coding._internal",
        "envs.coding.grader._tail",
        "envs.coding.protect._split",
        "envs.coding.repo._submission",
        "envs.coding.scanner._rule",
    ]


# -- the engine's floors, in pipeline order (DESIGN.md "Layout", docs/architecture.md) -----------

STAGES = (
    "base",
    "config",
    "interfaces",
    "plan",
    "build",
    "runtimes",
    "capabilities",
    "agents",
    "store",
    "run",
    "report",
    "view",
    "cli",
)
"""The engine's packages in pipeline order; a module may import only from its own stage or an
earlier one. DESIGN.md's order, with two placements the code decides: ``engine/interfaces.py``
comes right after ``config`` (the contracts are written in the config schemas' types, and the
schemas import no contract), and ``store`` comes before ``run`` (a run writes its records to
the store; the store knows nothing of runs being made). ``base`` is the shared floor:
``engine/errors.py``, ``engine/models/`` and ``engine/util/``."""
BASE = ("errors", "models", "util")


def stage_of(module: str) -> str:
    """The pipeline stage of an engine module (``engine.plan.spec`` -> ``plan``)."""
    parts = module.split(".")
    return "base" if len(parts) == 1 or parts[1] in BASE else parts[1]


def engine_modules() -> dict[str, str]:
    """Every module under engine/, by dotted name (a package by its own name), to its source."""
    found = {}
    for path in sorted(ENGINE.rglob("*.py")):
        parts = list(path.relative_to(ENGINE.parent).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text(encoding="utf-8")
    return found


def _statements(body: list[ast.stmt], module_level: bool):
    """The import statements of ``body``: all of them, or only those run when the module is
    imported (not in a function, not under ``if TYPE_CHECKING:``)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not module_level:
            yield from (n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _statements(node.orelse, module_level)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, block, []):
                    yield from _statements(
                        child.body if isinstance(child, ast.ExceptHandler) else [child], module_level
                    )


def engine_imports(modules: dict[str, str], module: str, *, module_level: bool) -> list[tuple[int, str]]:
    """What ``module`` imports of ``modules`` (as (line, module)): ``from a import b`` is ``a.b``
    when that is a module, else ``a``; a relative import is resolved against ``module``."""
    package = module if any(m.startswith(module + ".") for m in modules) else module.rpartition(".")[0]
    found = []
    for node in _statements(ast.parse(modules[module]).body, module_level):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        found += [(node.lineno, t) for t in dict.fromkeys(targets) if t.split(".")[0] == "engine"]
    return found


def backward_imports(modules: dict[str, str]) -> list[str]:
    """Every import (in any form: module level, in a function, under TYPE_CHECKING) from a
    module of an earlier stage of a module of a later one."""
    return [
        f"{module} ({stage_of(module)}):{line} imports {target} ({stage_of(target)})"
        for module in sorted(modules)
        for line, target in engine_imports(modules, module, module_level=False)
        if STAGES.index(stage_of(target)) > STAGES.index(stage_of(module))
    ]


def import_circles(modules: dict[str, str]) -> list[list[str]]:
    """The circles among ``modules``' module-level imports (importing ``a.b.c`` runs ``a.b`` too):
    each strongly connected set of two or more modules, sorted."""
    graph: dict[str, set[str]] = {}
    for module in modules:
        edges = graph.setdefault(module, set())
        for _, target in engine_imports(modules, module, module_level=True):
            parts = target.split(".")
            for depth in range(2, len(parts) + 1):
                name = ".".join(parts[:depth])
                if name in modules and name != module and not module.startswith(name + "."):
                    edges.add(name)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_every_engine_package_has_its_place_in_the_pipeline():
    unplaced = sorted({stage_of(m) for m in engine_modules()} - set(STAGES))
    assert unplaced == [], f"engine packages with no place in STAGES (add each where the pipeline uses it): {unplaced}"


def test_no_import_circle_among_engine_modules():
    circles = import_circles(engine_modules())
    assert circles == [], "import circles under engine/ (move the shared code below both):\n" + "\n".join(
        " -> ".join(circle) for circle in circles
    )


def test_the_circle_check_finds_a_circle_through_packages_and_ignores_lazy_imports():
    modules = {
        "engine": "",
        "engine.config": "",
        "engine.config.compose": "from engine.plan import spec\n",
        "engine.plan": "",
        "engine.plan.spec": "import engine.plan.lock as lock\n",
        "engine.plan.lock": "try:\n    from engine.config.compose import option_file\nexcept ImportError:\n    pass\n",
        "engine.build": "",
        "engine.build.images": "def f():\n    from engine.build import layer\n",
        "engine.build.layer": "from engine.build.images import f\n"
        "if TYPE_CHECKING:\n    from engine.build.images import g\n",
    }
    assert import_circles(modules) == [["engine.config.compose", "engine.plan.lock", "engine.plan.spec"]]


def test_no_engine_module_imports_from_a_later_stage():
    offenders = backward_imports(engine_modules())
    assert offenders == [], (
        "imports from an earlier pipeline stage of a later one (move the code to the "
        "stage that owns it, or hand it in):\n" + "\n".join(offenders)
    )


def test_the_stage_check_finds_a_backward_import_in_every_form():
    modules = {
        "engine": "",
        "engine.errors": "",
        "engine.interfaces": "",
        "engine.build": "",
        "engine.build.images": (
            "import engine.errors\nfrom engine import interfaces\nfrom . import layer\n"
            "def f():\n    from engine.cli.doctor import ensure_engine\n"
            "if TYPE_CHECKING:\n    from engine.run.progress import BuildProgress\n"
            "from ..store import duckdb\n"
        ),
        "engine.build.layer": "",
        "engine.cli": "",
        "engine.cli.doctor": "",
        "engine.run": "",
        "engine.run.progress": "",
        "engine.store": "",
        "engine.store.duckdb": "",
    }
    assert [line.split(" imports ")[1] for line in backward_imports(modules)] == [
        "engine.cli.doctor (cli)",
        "engine.run.progress (run)",
        "engine.store.duckdb (store)",
    ]


MODULE_LINE_LIMIT = 500
"""No module of the product past this many lines (issue 33): past it a module holds more than one
idea, and a reader cannot keep it in view."""


def modules_over(limit: int, roots: tuple[Path, ...]) -> list[str]:
    """Each ``*.py`` under ``roots`` longer than ``limit`` lines, as ``path: lines``."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found.append(f"{path.relative_to(root.parent)}: {lines}")
    return found


def test_no_module_of_the_product_is_over_500_lines():
    roots = tuple(ENGINE.parent / name for name in ("engine", *FLAVOR_PACKAGES))
    assert modules_over(MODULE_LINE_LIMIT, roots) == []


def test_no_test_module_is_over_500_lines_either():
    """The same for the suite's own modules: a test module past it holds more than one theme."""
    assert modules_over(MODULE_LINE_LIMIT, (ENGINE.parent / "tests",)) == []


def test_the_size_check_names_a_long_module(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "short.py").write_text("x = 1\n" * 500)
    (package / "long.py").write_text("x = 1\n" * 501)
    assert modules_over(MODULE_LINE_LIMIT, (package,)) == ["pkg/long.py: 501"]
