"""Spare execs (engine/runtimes/docker/spares.py) on a real container: a command handed to a spare
gives what an exec of its own gives (streams, exit code, stdin byte for byte, words that need
quoting, its user, directory and environment, its timeout); a spare its agent killed, or whose
directory was replaced, never runs a command wrongly or twice; root's commands never get one.
The whole Workspace contract with spares is the ``docker-spares`` backend of
tests/runtimes/test_workspace_conformance.py.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

import engine.runtimes.docker.exec as docker_exec
from engine.errors import WorkspaceError
from engine.runtimes.docker.runtime import DockerRuntime
from engine.runtimes.docker.spares import SPARE_WRAPPER, kind_of

pytestmark = [pytest.mark.docker, pytest.mark.slow]

AGENT = 1000
WORDS = ["two words", "it's", '"quoted"', "$HOME `id`", "back\\slash", "line\nbreak", "ünïcode", "a=b", "", "-n"]
STDIN = bytes(range(256)) * 64 + b"\n\nthe end, no newline"


@pytest.fixture
def workspace(base_image, run):
    ws = DockerRuntime(spare_execs=True, spawner=False).provision(
        base_image, run_id=f"spares-{uuid.uuid4().hex[:8]}", network=False, purpose="test"
    )
    run(ws.__aenter__())
    yield ws
    run(ws.close())


@pytest.fixture
def started(monkeypatch) -> list[str]:
    """How each exec began: "spare" (one started ahead) or "own" (an exec of its own)."""
    seen: list[str] = []
    original = docker_exec.start_exec

    def recording(api, container_id, argv, **kwargs):
        seen.append("spare" if tuple(argv) == SPARE_WRAPPER else "own")
        return original(api, container_id, argv, **kwargs)

    monkeypatch.setattr(docker_exec, "start_exec", recording)
    return seen


def _keep(run, ws, user: int, cwd: str | None) -> None:
    """``keep_spare_exec`` as the engine calls it: on the workspace's event loop."""

    async def keep() -> None:
        ws.keep_spare_exec(user=user, cwd=cwd)

    run(keep())


SPARE_SHELL = "dd bs=1 coun[t]"
"""A pattern for a spare's shell in /proc/PID/cmdline that a command searching for it does not match."""


def _spare_ready(run, ws, user: int, cwd: str | None) -> None:
    """Until the spare of that kind has started (what a command arriving later finds) and its shell
    is in the container (runc may still be making it when the engine says the exec started)."""
    kind = kind_of(user, cwd, ws.default_env(user))
    run(asyncio.shield(ws._spares._waiting[kind]))
    look = f"until cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q '{SPARE_SHELL}'; do :; done"
    assert run(ws.exec(["sh", "-c", look], timeout=120)).ok


def test_a_command_in_a_spare_gives_what_its_own_exec_gives(workspace, run, started):
    ws = workspace
    _keep(run, ws, AGENT, "/tmp")
    commands = [
        (["printf", "[%s]\\n", *WORDS], None),
        (["sh", "-c", "cat; echo; echo to-stderr >&2; exit 3"], STDIN),
        (["sh", "-c", 'id -u; id -g; pwd -P; echo "$HOME $LANG $CRUCIBLE_X"'], None),
        (["sh", "-c", "head -c 5; echo; cat | wc -c"], b"12345" + b"x" * 100_000),
    ]
    for argv, stdin in commands:
        spared = run(ws.exec(argv, user=AGENT, cwd="/tmp", stdin=stdin, timeout=60))
        own = run(ws.exec(argv, user=AGENT, cwd="/tmp/", stdin=stdin, timeout=60))  # another kind: its own exec
        assert (spared.exit_code, spared.stdout, spared.stderr) == (own.exit_code, own.stdout, own.stderr), argv
    # Each kept command went to a spare (and the next spare started beside it); the others had their own.
    assert started.count("own") == len(commands)
    assert started.count("spare") == len(commands) + 1


def test_a_spare_keeps_the_commands_timeout(workspace, run, started):
    _keep(run, workspace, AGENT, "/tmp")
    result = run(workspace.exec(["sleep", "30"], user=AGENT, cwd="/tmp", timeout=0.5))
    assert (result.timed_out, result.exit_code) == (True, 124)
    assert started[0] == "spare" and "own" not in started[:2]


def test_a_spare_the_agent_killed_runs_nothing_and_its_command_runs_once_on_its_own(workspace, run, started):
    ws = workspace
    _keep(run, ws, AGENT, "/tmp")
    _spare_ready(run, ws, AGENT, "/tmp")
    killed = run(ws.exec(["sh", "-c", "kill -9 -1"], user=AGENT, cwd="/"))  # every uid-1000 process, itself too
    assert killed.exit_code == 137, killed.text()
    result = run(ws.exec(["sh", "-c", "echo ran >> /tmp/ran; echo ok"], user=AGENT, cwd="/tmp"))
    assert (result.exit_code, result.stdout) == (0, b"ok\n")
    assert run(ws.exec(["cat", "/tmp/ran"])).stdout == b"ran\n"
    # kept, looked for (root), the kill, then the command: the dead spare taken (the next one
    # starting), and its own exec: those two from two threads, in either order
    assert started[:3] == ["spare", "own", "own"] and sorted(started[3:5]) == ["own", "spare"], started


def test_a_spare_runs_its_command_in_its_directory_as_it_is_now(workspace, run, started):
    ws = workspace
    run(ws.exec(["sh", "-c", "mkdir /tmp/work && chown 1000:1000 /tmp/work"]))
    _keep(run, ws, AGENT, "/tmp/work")
    _spare_ready(run, ws, AGENT, "/tmp/work")
    replaced = "mv /tmp/work /tmp/work.old && mkdir /tmp/work && touch /tmp/work/new-one && chown -R 1000 /tmp/work"
    assert run(ws.exec(["sh", "-c", replaced])).ok
    assert started == ["own", "spare", "own", "own"]  # made, kept, looked for, replaced
    listed = run(ws.exec(["ls"], user=AGENT, cwd="/tmp/work"))
    assert listed.stdout == b"new-one\n" and started[4:] == ["spare"]  # it ran in the spare; the next one starts
    _spare_ready(run, ws, AGENT, "/tmp/work")
    assert run(ws.exec(["rm", "-rf", "/tmp/work"])).ok
    with pytest.raises(WorkspaceError, match="/tmp/work"):  # no spare can go there: its own exec says why
        run(ws.exec(["ls"], user=AGENT, cwd="/tmp/work"))
    assert started[-1] == "own"


def test_root_never_gets_a_spare(workspace, run, started):
    _keep(run, workspace, 0, "/tmp")
    assert workspace._spares._waiting == {}
    assert run(workspace.exec(["true"], cwd="/tmp")).ok
    assert "spare" not in started


def test_a_spare_the_agent_fed_a_false_pid_kills_nothing_of_roots(workspace, run):
    """The agent may write to its own spare's stdin (/proc/PID/fd/0) before the engine does: a spare
    that reports pid 1, or root's pid, and never runs the command is killed with the agent's rights."""
    ws = workspace
    ws.backstop_grace = 0.5  # the spare became `sleep`: no in-container timeout, the host's backstop ends it
    root_marker = run(ws.exec(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"])).stdout.decode().strip()
    _keep(run, ws, AGENT, "/tmp")
    _spare_ready(run, ws, AGENT, "/tmp")
    # Until the spare's shell is there to feed (its exec has started; runc may still be making
    # it): found by its script's words, spelled so that this command's own line does not match.
    feed = r"""
    line='echo 1; exec sleep 600'
    while :; do
      for d in /proc/[0-9]*; do
        if tr '\0' ' ' < "$d/cmdline" 2>/dev/null | grep -q 'dd bs=1 coun[t]'; then
          printf '%s\n%s' "${#line}" "$line" > "$d/fd/0" && echo fed && exit 0
        fi
      done
    done
    """
    fed = run(ws.exec(["sh", "-c", feed], user=AGENT, cwd="/", timeout=120))  # another kind: not the one it feeds
    assert b"fed" in fed.stdout, fed.text()
    result = run(ws.exec(["echo", "never"], user=AGENT, cwd="/tmp", timeout=0.5))
    assert result.timed_out and b"never" not in result.stdout
    alive = run(ws.exec(["sh", "-c", f"kill -0 {root_marker} && echo alive"]))
    assert alive.stdout == b"alive\n", "root's processes survive a kill on the agent's word"
