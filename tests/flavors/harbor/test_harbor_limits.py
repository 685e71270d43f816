"""A Harbor task's own limits are the run's: task.toml's ``[agent].timeout_sec`` ends the agent's
turn, ``[environment]`` memory and cpus are every workspace's cgroup (the agent's and grading's),
``allow_internet = false`` takes the agent's network away even under ``none``, and ``true`` never
gives ``strict``'s agent one (the run's warnings say so). All of it is in the spec and its hash;
the task's values win over ``timeouts.*`` given on the command line."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import harbor_tasks
import pytest

from engine.config.compose import compose_config, to_typed
from engine.plan.spec import plan
from engine.run.records import limit_warnings

ROOT = Path(__file__).resolve().parents[3]

LIMITED_TOML = """version = "1.0"

[agent]
timeout_sec = {agent}

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory = "256M"
allow_internet = {internet}
"""

DOCKERFILE = "FROM ubuntu:24.04\nWORKDIR /app\n"

SEEN = """#!/bin/bash
# What the agent's container gives it: its memory limit, its CPU quota, its network interfaces.
{ cat /sys/fs/cgroup/memory/memory.limit_in_bytes; cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us
  ls /sys/class/net | tr '\\n' ' '; echo; } > /app/seen.txt
"""

CHECK_LIMITS = """#!/bin/bash
# 1 iff the agent's container and this grading one both had 256 MiB, one CPU, and the agent no network.
own="$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
cp /app/seen.txt /logs/verifier/seen.txt 2>/dev/null
echo "grading: $own"
if [ "$own" = "268435456 100000" ] && [ "$(sed -n 1p /app/seen.txt)" = 268435456 ] \\
   && [ "$(sed -n 2p /app/seen.txt)" = 100000 ] && [ "$(sed -n 3p /app/seen.txt)" = "lo " ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SLOW_SOLVE = "#!/bin/bash\nsleep 120\necho done > /app/done.txt\n"
DONE_TEST = "#!/bin/bash\nif [ -f /app/done.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"


def _task(root: Path, name: str, *, agent: float, internet: str, solve: str, test: str) -> None:
    # solve.sh calls its helper by Harbor's absolute path, as real tasks do (python3 /solution/solve.py).
    harbor_tasks._write(
        root / name,
        {
            "task.toml": LIMITED_TOML.format(agent=agent, internet=internet),
            "instruction.md": "Record what your container gives you.\n",
            "environment/Dockerfile": DOCKERFILE,
            "tests/test.sh": test,
            "solution/solve.sh": "#!/bin/bash\nexec bash /solution/helper.sh\n",
            "solution/helper.sh": solve,
        },
    )


@pytest.fixture(scope="module")
def limits_env(tmp_path_factory) -> dict[str, str]:
    """harbor/lim: ``limited`` (256M, 1 cpu, no internet; its test checks both containers' cgroups)
    and ``slow`` (a 3 s agent limit, a solve.sh that sleeps 120 s)."""
    base = tmp_path_factory.mktemp("harbor-limits")
    _task(base / "lim", "limited", agent=120.0, internet="false", solve=SEEN, test=CHECK_LIMITS)
    _task(base / "lim", "slow", agent=3.0, internet="false", solve=SLOW_SOLVE, test=DONE_TEST)
    _task(base / "lim", "online", agent=120.0, internet="true", solve=SEEN, test=DONE_TEST)
    harbor_tasks.source_conf(base / "conf", "lim", base / "lim")
    return {**os.environ, "CRUCIBLE_CONFIG_PATH": str(base / "conf")}


@pytest.fixture(scope="module")
def builder(docker_client, base_image):
    from engine.build.images import ContentAddressedBuilder

    return ContentAddressedBuilder(docker_client)


def planned(builder, env: dict[str, str], *overrides: str):
    old = os.environ.get("CRUCIBLE_CONFIG_PATH")
    os.environ["CRUCIBLE_CONFIG_PATH"] = env["CRUCIBLE_CONFIG_PATH"]
    try:
        return plan(to_typed(compose_config(list(overrides))), builder=builder).spec
    finally:
        if old is None:
            os.environ.pop("CRUCIBLE_CONFIG_PATH", None)
        else:
            os.environ["CRUCIBLE_CONFIG_PATH"] = old


@pytest.mark.docker
def test_task_limits_are_folded_into_the_spec_over_the_command_line_and_move_its_hash(builder, limits_env):
    spec = planned(builder, limits_env, "task=harbor/lim/slow", "integrity=none", "timeouts.agent=999")
    assert spec.timeouts.agent == 3.0  # the task's own limit wins over timeouts.agent=
    assert spec.limits.memory_bytes == 256 << 20 and spec.limits.cpus == 1.0
    assert spec.integrity.agent_network is False  # allow_internet = false, even under none
    more_cpus = dataclasses.replace(spec, limits=dataclasses.replace(spec.limits, cpus=2.0))
    assert more_cpus.spec_hash != spec.spec_hash
    assert spec.to_dict()["limits"]["memory_bytes"] == 256 << 20


@pytest.mark.docker
def test_allow_internet_never_gives_strict_a_network_and_the_run_warns(builder, limits_env):
    from engine.runtimes.docker.runtime import DockerRuntime

    strict = planned(builder, limits_env, "task=harbor/lim/online", "integrity=strict")
    assert strict.integrity.agent_network is False
    assert limit_warnings(strict, DockerRuntime()) == [
        "task limit: the task allows the agent internet access; integrity strict gives it no network"
    ]
    loose = planned(builder, limits_env, "task=harbor/lim/online", "integrity=none")
    assert loose.integrity.agent_network is True and limit_warnings(loose, DockerRuntime()) == []
    # A runtime without cgroups (bubblewrap's) says what it cannot apply.
    from engine.runtimes.local.runtime import LocalRuntime

    assert limit_warnings(loose, LocalRuntime()) == [
        "task limit: the task's cpus/memory are not applied: runtime local sets no cgroups"
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_the_agent_and_grading_containers_get_the_tasks_memory_cpus_and_no_network_and_its_time_limit(
    docker_client, limits_env
):
    proc = subprocess.run(
        [sys.executable, "-m", "engine.cli", "check", "task=glob(harbor/lim/*)", "integrity=none"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=limits_env,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    table = {line.split()[0]: line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("harbor/")}
    # limited: 256 MiB and one CPU's quota seen in both containers, only loopback in the agent's
    # (and the oracle's solve.sh found its helper at /solution/helper.sh, as in Harbor).
    assert table["harbor/lim/limited"][:2] == ["1", "0"] and table["harbor/lim/limited"][-1] == "ok", out
    # slow: the golden's solve.sh outlives the task's 3 s and the run ends as a timeout.
    assert table["harbor/lim/slow"][-1] == "FAIL", out
    from engine.store.duckdb import DuckDBStore

    rows = DuckDBStore().query("""SELECT stop_reason, reward FROM runs WHERE task_id = 'harbor/lim/slow'
                                  AND agent = 'integration_test' ORDER BY started_at DESC LIMIT 1""")[1]
    assert rows and tuple(rows[0]) == ("timeout", 0.0), (rows, out)  # graded after, as Harbor does
    assert "agent exceeded timeouts.agent=3s" in out
