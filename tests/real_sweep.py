"""A real small sweep into a store of its own, for the tests that read stores back (plots,
exports): ``crucible run -m`` of the golden replay and the baseline over two sample tasks,
through Hydra's joblib launcher, real images and containers, into the file ``store``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from engine.util.paths import PROJECT_ROOT

TASKS = ("sample/last_page", "sample/query_ops")
AGENTS = ("integration_test", "noop")


def crucible(*args: str, store: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``crucible ARGS`` as a user runs it (``store``: its $CRUCIBLE_STORE)."""
    env = {**os.environ, **({"CRUCIBLE_STORE": str(store)} if store else {})}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def sweep_into(store: Path) -> str:
    """Run the sweep into ``store``; its sweep id. Four runs: the golden replays solve, the baselines do not."""
    proc = crucible(
        "run", "-m", f"agent={','.join(AGENTS)}", f"task={','.join(TASKS)}", "hydra/launcher=joblib", store=store
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    found = re.search(r"^sweep (\S+): (\d+) run\(s\) stored", proc.stdout, re.M)
    assert found and found.group(2) == "4", proc.stdout[-2000:]
    return found.group(1)
