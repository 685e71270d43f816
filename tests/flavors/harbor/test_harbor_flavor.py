"""The harbor flavor (envs/harbor): Harbor task folders, generated here into a temporary dataset,
ship through `crucible check` (golden = solution/solve.sh as Harbor's oracle, baseline = nop)
under `none`, `vault` and `strict` on the docker runtime; the gate names each broken task and why
(no reward written, a compose sidecar, a task needing its live container under `strict`); a task
whose state lives outside its working directory ships by capturing its container; and
three attacks on Harbor's verifier win under `none` (where Harbor's own behaviour lets them) and
score 0 under `strict`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import harbor_tasks
import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def harbor_env(tmp_path_factory) -> dict[str, str]:
    """One generated dataset (harbor/gen) and one of attackers (harbor/attacks), on the config path."""
    base = tmp_path_factory.mktemp("harbor")
    conf = base / "conf"
    harbor_tasks.source_conf(conf, "gen", harbor_tasks.dataset(base / "gen"))
    harbor_tasks.source_conf(conf, "attacks", harbor_tasks.attacks(base / "attacks"))
    return {**os.environ, "CRUCIBLE_CONFIG_PATH": str(conf)}


def crucible(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900
    )


def rows(stdout: str) -> dict[str, list[str]]:
    """``crucible check``'s table: task -> [golden, baseline, ..., gate]."""
    return {line.split()[0]: line.split()[1:] for line in stdout.splitlines() if line.startswith("harbor/")}


def query(sql: str) -> list[tuple]:
    from engine.store.duckdb import DuckDBStore

    return DuckDBStore().query(sql)[1]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["none", "vault", "strict"])
def test_check_ships_the_good_harbor_tasks_and_names_why_each_broken_one_fails(docker_client, harbor_env, mode):
    proc = crucible(harbor_env, "check", "task=glob(harbor/gen/*)", f"integrity={mode}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    table = rows(proc.stdout)
    shipping = ["py-mean", "awk-totals", "tmp-totals"] + ([] if mode == "strict" else ["live-totals"])
    for name in shipping:
        assert table[f"harbor/gen/{name}"][:2] == ["1", "0"] and table[f"harbor/gen/{name}"][-1] == "ok", out
    broken = {"no-reward", "with-sidecar", "live-totals"} - set(shipping)
    assert all(table[f"harbor/gen/{name}"][-1] == "FAIL" for name in broken), out
    assert f"{len(broken)} of 6 task(s) are not shippable" in out
    assert "reason: test.sh wrote no reward file (/logs/verifier/reward.txt or reward.json)" in out
    assert "docker-compose.yaml services beside main (cache) are not supported yet" in out
    if mode == "strict":
        assert "harbor task harbor/gen/live-totals needs the agent's live container to grade" in out
    # reward.json's every key is a subscore; reward.txt's number is the reward.
    subscores = query(f"""SELECT s.name, s.value FROM subscores s JOIN runs r USING (run_id)
                          WHERE r.task_id = 'harbor/gen/awk-totals' AND r.agent = 'integration_test'
                          AND r.integrity_requested = '{mode}' ORDER BY s.name""")
    assert dict(subscores) == {"output_matches": 1.0, "reward": 1.0, "script_exists": 1.0}, subscores


@pytest.mark.docker
@pytest.mark.slow
def test_verifier_attacks_win_under_none_as_in_harbor_and_score_0_under_strict(docker_client, harbor_env):
    """plants-tests: a conftest.py that passes every test planted in /tests (Harbor lays tests/ over
    it: it wins under none); shadows-pytest: a pytest.py in the working directory, which test.sh's
    `python3 -m pytest` runs instead of pytest (wins under none); writes-reward: the agent writes /logs/verifier/reward.txt itself
    (test.sh writes one only on success; Harbor's verifier removes stale reward files first, and
    so does none); hunts-tests: the expected output searched for over the whole file system (tests/
    is in no agent's workspace, whatever the mode); lingers: a process left behind by the code under test that keeps rewriting
    reward.txt after test.sh (a race under none, as in Harbor)."""
    lax = crucible(harbor_env, "check", "task=glob(harbor/attacks/*)", "integrity=none")
    table = rows(lax.stdout)
    assert table["harbor/attacks/plants-tests"][0] == "1", lax.stdout + lax.stderr
    assert table["harbor/attacks/shadows-pytest"][0] == "1", lax.stdout + lax.stderr
    assert table["harbor/attacks/writes-reward"][0] == "0", lax.stdout + lax.stderr
    assert table["harbor/attacks/hunts-tests"][0] == "0", lax.stdout + lax.stderr  # no mode lets tests/ in
    strict = crucible(harbor_env, "check", "task=glob(harbor/attacks/*)", "integrity=strict")
    out = strict.stdout + strict.stderr
    assert strict.returncode == 1 and "5 of 5 task(s) are not shippable" in out, out
    assert "dropped from the graded diff (strict's protected paths): pytest.py" in out, out
    assert all(row[0] == "0" for row in rows(strict.stdout).values()), out
    raws = dict(
        query("""SELECT task_id, raw_grade FROM runs WHERE agent = 'integration_test'
                         AND integrity_requested = 'strict' AND task_id LIKE 'harbor/attacks/%'""")
    )
    lingers = _json(raws["harbor/attacks/lingers"])
    assert lingers["reason"].startswith("processes of the tests outlived test.sh"), lingers
    assert any("reward.txt" in cmd for cmd in lingers["outlived"]), lingers
    planted = _json(raws["harbor/attacks/plants-tests"])
    assert planted["rewards"] == {"reward": 0.0}, planted  # the planted conftest never reached /tests


def _json(value) -> dict:
    return value if isinstance(value, dict) else json.loads(value)


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_runs_export_as_atif_trajectories(docker_client, harbor_env, tmp_path):
    """The oracle's runs of a Harbor task, in Harbor's own trajectory format: the instruction as
    the user's step, each bash call of the oracle with its result."""
    proc = crucible(harbor_env, "run", "task=harbor/gen/awk-totals", "agent=integration_test", "integrity=strict")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "atif"
    proc = crucible(harbor_env, "export", "--trajectories", "ATIF", str(out), "--task", "harbor/gen/awk-totals")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    golden = [t for t in found if t["agent"]["name"] == "integration_test"]
    assert golden, [t["agent"] for t in found]
    steps = golden[0]["steps"]
    assert steps[0]["source"] == "user" and "totals.sh" in steps[0]["message"]
    calls = [c for s in steps[1:] for c in s.get("tool_calls", [])]
    assert calls and all(c["function_name"] == "bash" for c in calls)
    assert "solve.sh" in calls[-1]["arguments"]["command"]
