"""``crucible run`` of one job runs it without Hydra's app (engine/cli/run.py: _run_directly),
which composed the same config twice more to name a directory. What Hydra's run mode gave
the run, it still gets: the directory Hydra would name, the config and overrides it saved,
and the same spec. A Hydra flag or ``hydra.*`` override still goes through Hydra's app,
which is how the two are compared here (``hydra.job.chdir=false`` is conf/config.yaml's own
value: it changes nothing of the run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.cli.run import override_dirname
from engine.store.duckdb import DuckDBStore

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.docker


def crucible(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def one_run(*overrides: str) -> tuple[Path, str]:
    proc = crucible("run", *overrides)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = re.search(r"\brun (\S+)  \((.+)\)$", proc.stdout.strip())
    assert found is not None, proc.stdout
    return Path(found.group(2)), found.group(1)


def test_a_single_run_without_hydras_app_gets_what_hydra_gave_it(docker_client, base_image):
    overrides = ["task=sample/last_page", "agent=noop", "seed=7"]
    direct_dir, direct_id = one_run(*overrides)
    hydra_dir, hydra_id = one_run(*overrides, "hydra.job.chdir=false")

    # Named alike: <runs>/single/<local time>-<override dirname>, the time apart.
    named = re.compile(r"\d{8}-\d{6}-(.*)")
    direct_rel = direct_dir.relative_to(direct_dir.parents[1])  # the dirname holds a '/' (task=sample/x)
    hydra_rel = hydra_dir.relative_to(hydra_dir.parents[1])
    assert direct_dir.parents[1] == hydra_dir.parents[1] and direct_dir.parents[1].name == "single"
    # (Hydra's own name holds its hydra.* override too: sorted in with the rest.)
    hydra_items = named.fullmatch(str(hydra_rel)).group(1).split(",")
    assert named.fullmatch(str(direct_rel)).group(1) == ",".join(i for i in hydra_items if not i.startswith("hydra."))
    assert named.fullmatch(str(direct_rel)).group(1) == override_dirname(overrides)

    # The config Hydra saved, and its overrides (less its own hydra.* one).
    assert (direct_dir / ".hydra" / "config.yaml").read_text() == (hydra_dir / ".hydra" / "config.yaml").read_text()
    hydra_overrides = yaml.safe_load((hydra_dir / ".hydra" / "overrides.yaml").read_text())
    assert yaml.safe_load((direct_dir / ".hydra" / "overrides.yaml").read_text()) == [
        o for o in hydra_overrides if not o.startswith("hydra.")
    ]

    # One spec: the same plan, whichever way the run was started.
    store = DuckDBStore()
    hashes = {
        run_id: store.query(f"SELECT spec_hash, status FROM runs WHERE run_id = '{run_id}'")[1][0]
        for run_id in (direct_id, hydra_id)
    }
    assert hashes[direct_id] == hashes[hydra_id] and hashes[direct_id][1] == "completed"


def test_an_ambiguous_single_run_still_gets_hydras_one_line(docker_client, base_image):
    proc = crucible("run", "task=sample/last_page", "agent=noop,integration_test")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and "multirun" in (proc.stdout + proc.stderr).lower(), proc.stderr
