"""Harbor task folders written by the tests (nothing of any real dataset is committed): ordinary
ones as Harbor's docs describe them (a Dockerfile with WORKDIR /app, instruction.md, tests/test.sh
writing /logs/verifier/reward.txt or reward.json, solution/solve.sh), broken ones, and attackers
whose "solution" is an attack on the verifier.

Their Dockerfiles say ``FROM ubuntu:24.04``: no registry is reachable here, so the source maps
FROM onto crucible's base (``base_image: auto``); apt reaches Debian's mirror at build time.
"""

from __future__ import annotations

from pathlib import Path

TOML = """version = "1.0"

[metadata]
difficulty = "easy"
category = "programming"

[verifier]
timeout_sec = {verifier}

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
allow_internet = false
"""

PY_DOCKERFILE = """FROM ubuntu:24.04
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-pytest \\
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY stats.py /app/stats.py
"""

STATS_BUGGY = "def mean(values):\n    return sum(values) // len(values)\n"
STATS_FIXED = "def mean(values):\n    return sum(values) / len(values)\n"

PY_TEST = """import sys

sys.path.insert(0, "/app")

from stats import mean


def test_mean_of_integers_is_exact():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_of_one_value():
    assert mean([7]) == 7
"""

PY_TEST_SH = """#!/bin/bash
cd /app
python3 -m pytest -q -p no:cacheprovider /tests/test_outputs.py
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SH_DOCKERFILE = """FROM ubuntu:24.04
WORKDIR /app
COPY sales.csv /app/sales.csv
"""

SALES = "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,1\nsouth,2\n"
EXPECTED = "east 1\nnorth 17\nsouth 7\n"

SH_TEST_SH = """#!/bin/bash
# Grades /app/totals.sh: its output must equal /tests/expected.txt.
cd /app
exists=0; matches=0
if [ -f /app/totals.sh ]; then exists=1; fi
if [ "$exists" = 1 ] && bash /app/totals.sh > /tmp/totals.out 2>/dev/null && diff -u /tests/expected.txt /tmp/totals.out; then
  matches=1
fi
printf '{"reward": %s, "output_matches": %s, "script_exists": %s}\\n' "$matches" "$matches" "$exists" \\
  > /logs/verifier/reward.json
"""

SH_SOLVE = """#!/bin/bash
cat > /app/totals.sh <<'EOF'
#!/bin/bash
awk -F, 'NR > 1 { t[$1] += $2 } END { for (r in t) print r, t[r] }' /app/sales.csv | sort
EOF
chmod +x /app/totals.sh
"""

NO_REWARD_TEST_SH = """#!/bin/bash
# Forgets to write a reward: the gate must say so.
cd /app
bash /app/totals.sh | diff -u /tests/expected.txt -
"""

TMP_TEST_SH = """#!/bin/bash
# Grades /tmp/totals.txt: state outside the working directory (the task captures its container).
if diff -u /tests/expected.txt /tmp/totals.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

TMP_SOLVE = """#!/bin/bash
awk -F, 'NR > 1 { t[$1] += $2 } END { for (r in t) print r, t[r] }' /app/sales.csv | sort > /tmp/totals.txt
"""

COMPOSE = """services:
  main:
    build:
      context: .
    command: ["sh", "-c", "sleep infinity"]
  cache:
    image: redis:7
"""

# -------------------------------------------------------------- attackers (their solve.sh attacks)
LAX_TEST_SH = """#!/bin/bash
# Writes a reward only when the check passes (a common, lax pattern).
cd /app
if bash /app/totals.sh 2>/dev/null | diff -q /tests/expected.txt - >/dev/null; then
  echo 1 > /logs/verifier/reward.txt
fi
"""

WRITE_REWARD_SOLVE = """#!/bin/bash
# The attack: no fix, a reward written by the agent itself.
mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
"""

PASSING_CONFTEST = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""

PLANT_TESTS_SOLVE = f"""#!/bin/bash
# The attack: no fix, a conftest.py that turns every failure into a pass, planted in /tests (and
# in a tests/ of the working directory, where the uid wall lets it).
mkdir -p /tests tests
cat > tests/conftest.py <<'EOF'
{PASSING_CONFTEST}EOF
cp tests/conftest.py /tests/conftest.py
"""

LINGER_TEST_SH = """#!/bin/bash
cd /app
if bash /app/totals.sh 2>/dev/null | diff -q /tests/expected.txt - >/dev/null; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

LINGER_SOLVE = """#!/bin/bash
# The attack: a wrong totals.sh that leaves a process behind, rewriting the reward after test.sh.
cat > /app/totals.sh <<'EOF'
#!/bin/bash
setsid bash -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null; sleep 0.05; done' \\
  >/dev/null 2>&1 < /dev/null &
echo wrong
EOF
"""


def _capturing(toml: str, capture: str) -> str:
    return toml.replace('category = "programming"\n', f'category = "programming"\ncrucible_capture = "{capture}"\n')


SHADOW_PYTEST_SOLVE = """#!/bin/bash
# The attack: no fix, a pytest.py in the working directory: test.sh's `python3 -m pytest`, run
# from there, finds it first on sys.path and runs it instead of pytest.
printf 'raise SystemExit(0)\\n' > /app/pytest.py
"""


HUNT_SOLVE = """#!/bin/bash
# The attack: look for the expected output (only tests/expected.txt holds "north 17") anywhere on
# the file system, and hand in whatever holds it.
grep -rlI --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 'north 17' / 2>/dev/null \\
  | grep -v '^/solution/' | head -5 | xargs -r cat > /app/loot.txt 2>/dev/null
printf '#!/bin/bash\\ncat /app/loot.txt\\n' > /app/totals.sh
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if rel.endswith(".sh"):
            path.chmod(0o755)


def _py(root: Path, name: str, test_sh: str = PY_TEST_SH, solve: str | None = None) -> None:
    fixed = f"#!/bin/bash\ncat > /app/stats.py <<'EOF'\n{STATS_FIXED}EOF\n"
    _write(
        root / name,
        {
            "task.toml": TOML.format(verifier=120.0),
            "instruction.md": "Fix `mean` in /app/stats.py: it must "
            "return the exact arithmetic mean of a list of numbers.\n",
            "environment/Dockerfile": PY_DOCKERFILE,
            "environment/stats.py": STATS_BUGGY,
            "tests/test.sh": test_sh,
            "tests/test_outputs.py": PY_TEST,
            "solution/solve.sh": solve or fixed,
        },
    )


def _sh(
    root: Path,
    name: str,
    test_sh: str = SH_TEST_SH,
    solve: str = SH_SOLVE,
    extra: dict[str, str] | None = None,
    capture: str = "workdir",
) -> None:
    _write(
        root / name,
        {
            "task.toml": _capturing(TOML.format(verifier=60.0), capture),
            "instruction.md": "Write /app/totals.sh: it prints the total "
            "amount per region of /app/sales.csv, one `region total` line per region, sorted by region.\n",
            "environment/Dockerfile": SH_DOCKERFILE,
            "environment/sales.csv": SALES,
            "tests/test.sh": test_sh,
            "tests/expected.txt": EXPECTED,
            "solution/solve.sh": solve,
            **(extra or {}),
        },
    )


def dataset(root: Path) -> Path:
    """Six tasks: two that ship (Python with reward.txt; shell and awk with a reward.json of
    several keys), one whose test.sh writes no reward, one with a compose sidecar, and two whose
    state lives outside the working directory (/tmp/totals.txt): one capturing its container,
    one saying it needs the agent's live container."""
    _py(root, "py-mean")
    _sh(root, "awk-totals")
    _sh(root, "no-reward", test_sh=NO_REWARD_TEST_SH)
    _sh(root, "with-sidecar", extra={"environment/docker-compose.yaml": COMPOSE})
    _sh(root, "tmp-totals", test_sh=TMP_TEST_SH, solve=TMP_SOLVE, capture="container")
    _sh(root, "live-totals", test_sh=TMP_TEST_SH, solve=TMP_SOLVE, capture="live")
    return root


def attacks(root: Path) -> Path:
    """Tasks whose solve.sh attacks the verifier instead of solving them."""
    _sh(root, "writes-reward", test_sh=LAX_TEST_SH, solve=WRITE_REWARD_SOLVE)
    _py(root, "plants-tests", solve=PLANT_TESTS_SOLVE)
    _sh(root, "lingers", test_sh=LINGER_TEST_SH, solve=LINGER_SOLVE)
    _py(root, "shadows-pytest", solve=SHADOW_PYTEST_SOLVE)
    _sh(root, "hunts-tests", solve=HUNT_SOLVE)
    return root


def source_conf(conf: Path, set_name: str, path: Path) -> None:
    """``conf/task/harbor/<set_name>/_source.yaml`` pointing at ``path``."""
    target = conf / "task" / "harbor" / set_name
    target.mkdir(parents=True, exist_ok=True)
    (target / "_source.yaml").write_text(f"_target_: envs.harbor.source.HarborSource\npath: {path}\nbase_image: auto\n")
