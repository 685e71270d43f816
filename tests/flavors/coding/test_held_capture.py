"""A capture started ahead (envs/coding/held.py) on real containers from a real task image: what it
captures is what a capture exec captures, whatever the agent did to the tree meanwhile (its
workdir replaced included); the agent under the uid wall cannot stop it; and one that did not
end well (killed, as a root agent could) is never believed: a fresh exec captures instead.
"""

from __future__ import annotations

import time

import coding_task as ct
import pytest

from envs.coding import repo as coding_repo
from envs.coding.flavor import CodingFlavor
from envs.coding.repo import capture_diff, hold_capture, setup_repo

pytestmark = [pytest.mark.docker, pytest.mark.slow]

AGENT_WORK = r"""
set -e
cd /app
printf 'changed\n' >> README.md
mkdir -p pkg/new && printf 'print("new")\n' > pkg/new/mod.py
rm obsolete.txt
mkdir -p vendored && git -C vendored init -q
"""
"""An agent's turn: a change, a new file in a new directory, a deletion, a nested repository."""

KILL_ALL = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case $(cat "$d/comm" 2>/dev/null) in sleep | spawner | docker-init) continue ;; esac  # the container's own
  [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null || true
done
"""
"""Every process the agent may signal, but its own shell and the container's keeper: a root
agent's reaches the held capture (and its own exec's wrapper)."""

REPLACE_WORKDIR = r"""
set -e
mv /app /app.old && cp -a /app.old /app && rm -rf /app.old
printf 'after the move\n' >> /app/README.md
"""


@pytest.fixture
def fresh_captures(monkeypatch) -> list[list[str]]:
    """The captures done by a fresh exec (``_run_capture``), each by its arguments."""
    done: list[list[str]] = []
    original = coding_repo._run_capture

    async def counted(ws, args, binary_paths, timeout, what="capture"):
        done.append([*args, *binary_paths])
        return await original(ws, args, binary_paths, timeout, what)

    monkeypatch.setattr(coding_repo, "_run_capture", counted)
    return done


def _set_up(run, ws, repo, mode: str = "strict"):
    task, integrity = ct.task(repo), ct.integrity(mode)
    run(setup_repo(ws, task, integrity))
    return task, integrity


def _as_agent(run, ws, script: str, uid: int) -> None:
    result = run(ws.exec(["bash", "-c", script], user=uid, cwd=ct.WORKDIR, timeout=60))
    assert result.ok, result.text()


@pytest.mark.parametrize("mode, uid", [("strict", 1000), ("none", 0)])
def test_a_held_capture_captures_what_a_capture_exec_does(workspace, run, repo, fresh_captures, mode, uid):
    ws = workspace()
    task, integrity = _set_up(run, ws, repo, mode)
    held = run(hold_capture(ws, task, integrity))
    _as_agent(run, ws, AGENT_WORK, uid)
    _as_agent(run, ws, REPLACE_WORKDIR, 0)  # the tree it waited on is not the tree it captures
    from_held = run(capture_diff(ws, task, integrity, held=held))
    assert fresh_captures == []
    from_exec = run(capture_diff(ws, task, integrity))
    assert len(fresh_captures) == 1
    assert from_held.diff == from_exec.diff and from_held.violations == from_exec.violations
    for change in ("+changed", "+after the move", "b/pkg/new/mod.py", "deleted file mode", "a/obsolete.txt"):
        assert change in from_held.diff, change
    assert "vendored" not in from_held.diff  # the nested repository is left out, as an exec leaves it


@pytest.mark.parametrize(
    "mode, uid, afresh",
    [
        ("strict", 1000, 0),  # behind the uid wall the agent cannot stop it: the held capture answers
        ("none", 0, 1),  # a root agent kills it: not believed, a fresh exec captures
    ],
)
def test_an_agent_killing_every_process_it_may(workspace, run, repo, fresh_captures, mode, uid, afresh):
    ws = workspace()
    task, integrity = _set_up(run, ws, repo, mode)
    held = run(hold_capture(ws, task, integrity))
    _as_agent(run, ws, AGENT_WORK, uid)
    killed = run(ws.exec(["bash", "-c", KILL_ALL], user=uid, cwd=ct.WORKDIR, timeout=60))
    assert killed.exit_code in (0, 137), killed.text()  # its own exec's wrapper may go too
    captured = run(capture_diff(ws, task, integrity, held=held))
    assert len(fresh_captures) == afresh and "+changed" in captured.diff


def test_the_flavor_holds_its_capture_from_setup_and_uses_it(workspace, run, repo, fresh_captures):
    spec = ct.spec(ct.task(repo), "strict", "timeouts.setup=120")
    flavor, ws = CodingFlavor(), workspace()
    run(flavor.setup(ws, spec))
    _as_agent(run, ws, AGENT_WORK, 1000)
    submission = run(flavor.capture(ws, spec))
    assert fresh_captures == [] and "+changed" in submission.diff


def test_what_the_agent_can_read_of_it_names_no_baseline(workspace, run, repo, fresh_captures):
    """/proc/PID/cmdline is anyone's to read; the baseline the fresh repo hides comes with the word."""
    ws = workspace()
    task, integrity = _set_up(run, ws, repo, "strict")
    held = run(hold_capture(ws, task, integrity))
    deadline = time.monotonic() + 120
    while True:  # its exec is Docker's once hold returns; runc may start its process a moment later
        seen = run(ws.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"], user=1000, cwd=ct.WORKDIR))
        if "CRUCIBLE_CAPTURE_HELD" in seen.stdout.decode() or time.monotonic() > deadline:
            break
    assert "CRUCIBLE_CAPTURE_HELD" in seen.stdout.decode()  # the held capture is there to read
    assert repo.baseline not in seen.stdout.decode() and repo.baseline in held.args
    _as_agent(run, ws, AGENT_WORK, 1000)
    assert "+changed" in run(capture_diff(ws, task, integrity, held=held)).diff and fresh_captures == []
