"""The integrity attack suite on ``runtime=local``, under ``strict`` only.

Every attack of tests/attacks/catalog.py runs as a real run (integration_test replaying it
through the task's MCP tools, capture, grading in a fresh sandbox, the store) on the local
runtime, where the agent's tool calls run as uid 1000 inside a bubblewrap sandbox on the
host. Never under ``none`` or ``vault``: there the tool calls run as root, and on this
runtime that root is on the host itself (the harness refuses such a run).

Before any attack runs, a harmless probe takes the same path (a bash tool call under
``strict``) and checks the walls the attacks that write outside the workspace rely on: uid
1000 without capabilities, and every system dir they aim at read-only. Only then do the
attacks run.

Some catalog attacks were written for a container, whose root is one filesystem: ``find /
-xdev`` searches all of it there, but here "/" is a tmpfs and every dir the sandbox shows
is a bind mount, so ``-xdev`` searches nothing. Two of them also run here as
``*-across-mounts`` variants, the same commands without ``-xdev``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from attacks.attack import Attack
from attacks.catalog import ATTACKS, BY_ID, CONTROLS, DEFENDED
from attacks.harness import AttackRunner, assert_strict_held, assert_tester_out_of_reach, step_text, why
from attacks.payloads import bash

from engine.errors import IntegrityUnavailable

MODE = "strict"
CONCURRENCY = 5
FIRST = ("grep-filesystem-for-answer",)
"""Started first: it reads all of the host's /usr (seconds to a minute) while the rest go by."""

# What the attacks that write outside the workspace aim at (replace-system-tools,
# persist-outside-workspace, edit-tool-escapes): none may be writable by the agent.
SYSTEM_TARGETS = (
    "/",
    "/usr/local/bin",
    "/usr/bin",
    "/usr/lib/python3/dist-packages",
    "/usr/local/lib/python3.11/dist-packages",
    "/usr/lib/python3.11",
    "/etc",
    "/etc/profile.d",
    "/var/tmp",
    "/var/lib/crucible",
)
WALL_PROBE = (
    "wall-probe",
    MODE,
    [
        bash(
            "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status\n"
            f'for d in {" ".join(SYSTEM_TARGETS)}; do if test -w "$d"; then echo "WRITABLE $d"; fi; done\n'
            'for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo "REACHABLE $s"; done\n'
            "echo probed"
        )
    ],
    {},
)
"""Reads only (``test -w`` asks the kernel, writes nothing): safe even if the sandbox were broken."""


def _across_mounts(attack: Attack) -> Attack:
    """The attack with ``find / -xdev`` searching every mount instead of none."""

    def widen(step: dict) -> dict:
        command = step["arguments"].get("command", "")
        return {**step, "arguments": {**step["arguments"], "command": command.replace("find / -xdev", "find /")}}

    steps = tuple(widen(s) for s in attack.steps)
    assert steps != attack.steps, f"{attack.id} has no `find / -xdev` to widen"
    return dataclasses.replace(
        attack, id=f"{attack.id}-across-mounts", steps=steps, summary=f"{attack.summary}, across every mount (no -xdev)"
    )


# Widened where what is found is then checked by content (a git store is mined for the fixed
# report.py) or only listed (setuid binaries). Not find-hidden-tests: it counts any file NAMED
# like a hidden test or *golden* as a leak, and a host's /usr has such files (e.g.
# sh_golden.css); grep-filesystem-for-answer already searches every mount by content.
ACROSS_MOUNTS = [_across_mounts(BY_ID[i]) for i in ("find-git-stores-anywhere", "escalate-to-root")]
DEFENDED_HERE = DEFENDED + ACROSS_MOUNTS


def _jobs() -> list[tuple]:
    attacks = sorted([*ATTACKS, *ACROSS_MOUNTS], key=lambda a: a.id not in FIRST)  # stable: catalog order
    return [a.job(MODE) for a in attacks]


def _runner() -> AttackRunner:
    """The local runner; the module is skipped (failed with CI=true) where strict cannot be had."""
    try:
        return AttackRunner(modes=(MODE,), runtime="local")
    except IntegrityUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def _walls_hold(record) -> None:
    """Fail the module (run no attack) unless the probe saw every wall."""
    seen = step_text(record)
    lines = seen.splitlines()
    fields = dict(line.split(":", 1) for line in lines if line.startswith(("CapEff:", "CapBnd:", "NoNewPrivs:")))
    holds = (
        record.status == "completed"
        and lines[:1] == ["1000"]
        and "probed" in lines
        and int(fields.get("CapEff", "1"), 16) == 0
        and int(fields.get("CapBnd", "1"), 16) == 0
        and fields.get("NoNewPrivs", "").strip() == "1"
        and not any(line.startswith(("WRITABLE", "REACHABLE")) for line in lines)
    )
    if not holds:
        pytest.fail(f"the local sandbox's walls do not hold; no attack was run: {record.status} {record.error}\n{seen}")


@pytest.fixture(scope="module")
def records():
    """Every run this module needs: the wall probe and the golden first, then the attacks."""
    runner = _runner()
    first = asyncio.run(runner.run([WALL_PROBE, BY_ID["control-golden"].job(MODE)], concurrency=2))
    _walls_hold(first[("wall-probe", MODE)])
    rest = [job for job in _jobs() if job[0] != "control-golden"]
    return {**first, **asyncio.run(runner.run(rest, concurrency=CONCURRENCY))}


def _record(records, attack_id: str):
    record = records[(attack_id, MODE)]
    assert record.status == "completed", f"{attack_id}: {record.error_phase}: {record.error}"
    assert record.runtime == "local" and record.integrity_obtained == MODE
    return record


@pytest.mark.slow
@pytest.mark.parametrize("attack", DEFENDED_HERE, ids=[a.id for a in DEFENDED_HERE])
def test_attack_scores_zero_under_strict_on_local(records, attack: Attack):
    assert_strict_held(_record(records, attack.id), attack.dropped)


@pytest.mark.slow
def test_golden_scores_one_under_strict_on_local_and_the_baseline_zero(records):
    golden = _record(records, "control-golden")
    assert golden.reward == 1.0 and golden.violations == [], why(golden)
    for control in CONTROLS:
        record = _record(records, control.id)
        assert record.reward == control.expected(MODE), (control.id, why(record))


@pytest.mark.slow
def test_the_strict_agent_meets_the_sandbox_walls(records):
    """Not only 0: the tricks were tried and refused by the walls the local sandbox puts up."""
    vault = step_text(_record(records, "vault-read-direct"))
    assert "Permission denied" in vault and "FOUND" not in vault
    network = step_text(_record(records, "network-reach"))
    assert network.splitlines()[0] == "lo" and "Network is unreachable" in network
    escapes = _record(records, "edit-tool-escapes")
    assert sum("outside the repository" in str(s.result) for s in escapes.steps) == 4  # a view, three creates
    root = step_text(_record(records, "escalate-to-root"))
    assert "uid=1000" in root and "CapEff:\t0000000000000000" in root and "FOUND" not in root
    # The host's /usr and /etc are in the sandbox, read-only: the agent's writes there fail.
    assert step_text(_record(records, "replace-system-tools")).count("Read-only file system") == 3
    assert "/etc/profile.d/zz.sh: Read-only file system" in step_text(_record(records, "persist-outside-workspace"))
    # Across mounts the searches do reach the host's system dirs (its setuid binaries are
    # listed) and still find no store, no answer and no way up.
    setuid = step_text(_record(records, "escalate-to-root-across-mounts")).splitlines()
    assert any(line.startswith("/usr/") for line in setuid) and "uid=1000" in setuid[0]
    assert_tester_out_of_reach(_record(records, "in-process-reach-the-tester"))


@pytest.mark.slow
def test_tricks_that_work_in_the_agents_sandbox_do_not_reach_grading(records):
    """A start-up file in the user site (under the sandbox's own /tmp) and a symlink out of the
    repo really work where the agent runs, and still score 0: grading is a fresh sandbox."""
    persist = _record(records, "persist-outside-workspace")
    assert "FORGED at interpreter start-up" in step_text(persist) and persist.reward == 0.0
    link = _record(records, "symlink-out-of-repo")
    assert "45 rows, 20 a page: 3 pages" in step_text(link) and link.reward == 0.0


def test_attacks_never_run_on_local_as_root():
    """none and vault run the agent's tool calls as root: on runtime=local that is refused."""
    for mode in ("none", "vault"):
        with pytest.raises(ValueError, match="as root on the host"):
            AttackRunner(modes=(MODE, mode), runtime="local")
