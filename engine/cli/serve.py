"""``crucible serve task=...``: a task's run, worked by any outside agent; ``crucible finish RUN_ID``.

The task is provisioned as a run of agent ``external`` (engine/agents/external.py). Once it is
set up, this prints — and writes as ``serve.json`` into the run directory, mode 0600 — the
run's MCP URL and bearer token, an ``ssh`` command line (its private key and pinned host key
written beside it, 0600), and an MCP client config snippet; then it waits. Ctrl-C, ``crucible
finish RUN_ID`` (SIGUSR1 to this process, whose pid the run's record holds) or the agent's
``finish`` tool ends the turn: the run captures, grades in a fresh workspace and is stored as
any other. A second Ctrl-C cancels the run instead. ``timeouts.agent`` bounds the wait.

Both endpoints (MCP and SSH) listen on 127.0.0.1 unless ``--host`` binds another address on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import UserError
from engine.util import paths

SERVE_FILE = "serve.json"
KEY_FILE = "ssh_key"
KNOWN_HOSTS_FILE = "ssh_known_hosts"
FINISH_SIGNAL = signal.SIGUSR1

if TYPE_CHECKING:
    from engine.agents.external import Endpoints, Reception
    from engine.models import RunRecord


def run_serve(ns: argparse.Namespace, overrides: list[str]) -> int:
    from engine.agents.external import RECEPTION, Reception
    from engine.capabilities.serving import SERVE_OPTIONS, ServeOptions
    from engine.cli.sweep import print_record
    from engine.config.compose import compose_config, to_typed
    from engine.plan.spec import plan
    from engine.run.batch import run_one
    from engine.run.records import new_run_id
    from engine.run.session import housekeeping, require_integrity, session_for

    chosen = [o for o in overrides if o.partition("=")[0].lstrip("+~") == "agent" and o.partition("=")[2] != "external"]
    if chosen:
        raise UserError(f"serve runs agent=external (the agent is whatever connects), not {chosen[0]}: drop it")
    overrides = [o for o in overrides if o.partition("=")[0].lstrip("+~") != "agent"]
    if ns.progress_every <= 0:
        raise UserError(f"--progress-every must be a positive number of seconds, not {ns.progress_every:g}")
    run_id = new_run_id()
    run_dir = paths.runs_dir() / "serve" / run_id
    reception = Reception(announce=lambda endpoints: announce(endpoints, run_dir, run_id, ns.host))
    RECEPTION.set(reception)
    SERVE_OPTIONS.set(
        ServeOptions(host=ns.host, progress_every=ns.progress_every, allowed_origins=tuple(ns.allow_origin))
    )
    cfg = compose_config([*overrides, "agent=external"])
    typed = to_typed(cfg)
    session = session_for(typed)
    housekeeping(session.store)
    require_integrity(session.runtime, typed.integrity)
    planned = plan(typed, builder=session.builder)
    print(f"serving {planned.spec.task_id} as run {run_id}: provisioning ...", flush=True)
    record = asyncio.run(_served(run_one(planned, session, run_dir=run_dir, config=cfg, run_id=run_id), reception))
    print_record(record)
    return 0 if record.status == "completed" else 1


async def _served(run: Awaitable[RunRecord], reception: Reception) -> RunRecord:
    """The run, with Ctrl-C and SIGUSR1 ending the agent's turn (a second Ctrl-C cancels it)."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None

    def finish(by: str) -> None:
        if reception.request_finish(by):
            print(f"finishing ({by}): capturing and grading; Ctrl-C again cancels the run", file=sys.stderr, flush=True)
        elif by == "Ctrl-C":
            main.cancel()

    loop.add_signal_handler(signal.SIGINT, finish, "Ctrl-C")
    loop.add_signal_handler(FINISH_SIGNAL, finish, "crucible finish")
    try:
        return await run
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(FINISH_SIGNAL)


def announce(endpoints: Endpoints, run_dir: Path, run_id: str, host: str) -> None:
    """Print how to reach the run and write it all as ``serve.json`` (with the SSH key files)."""
    info = served_info(endpoints, run_dir, run_id)
    _private(run_dir / SERVE_FILE, json.dumps(info, indent=2) + "\n")
    mcp = info["mcp"]
    lines = [
        f"run {run_id} is ready for an outside agent ({run_dir / SERVE_FILE})",
        f"  MCP url:    {mcp['url']}",
        f"  MCP token:  {mcp['token']}",
    ]
    if "ssh" in info:
        lines.append(f"  ssh:        {info['ssh']['command']}")
    lines += [
        "  MCP client config:",
        *("    " + line for line in json.dumps(info["mcp_config"], indent=2).splitlines()),
        f"finish with Ctrl-C, `crucible finish {run_id}`, or the agent's `finish` tool",
    ]
    if host not in ("127.0.0.1", "localhost", "::1"):
        lines.append(f"note: the endpoints (MCP and SSH) listen on {host}, not on loopback only")
    print("\n".join(lines), flush=True)


def served_info(endpoints: Endpoints, run_dir: Path, run_id: str) -> dict[str, Any]:
    """``serve.json``: the endpoints, with the SSH key and known-hosts files written beside it."""
    info: dict[str, Any] = {
        "run_id": run_id,
        "run_dir": str(run_dir),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "mcp": {
            "url": endpoints.mcp_url,
            "token": endpoints.mcp_token,
            "headers": {"Authorization": f"Bearer {endpoints.mcp_token}"},
        },
        "mcp_config": {
            "mcpServers": {
                "crucible": {
                    "type": "http",
                    "url": endpoints.mcp_url,
                    "headers": {"Authorization": f"Bearer {endpoints.mcp_token}"},
                }
            }
        },
        "finish": f"crucible finish {run_id}",
    }
    if endpoints.ssh_url and endpoints.ssh_credential:
        from engine.capabilities.ssh_client import SSHEndpoint

        ssh = SSHEndpoint.from_capability(endpoints.ssh_url, endpoints.ssh_credential)
        key, known = run_dir / KEY_FILE, run_dir / KNOWN_HOSTS_FILE
        _private(key, ssh.client_key if ssh.client_key.endswith("\n") else ssh.client_key + "\n")
        _private(known, f"[{ssh.host}]:{ssh.port} {ssh.host_key}\n")
        command = (
            f"ssh -i {key} -o UserKnownHostsFile={known} -o StrictHostKeyChecking=yes "
            f"-o IdentitiesOnly=yes -p {ssh.port} {ssh.username}@{ssh.host}"
        )
        info["ssh"] = {
            "host": ssh.host,
            "port": ssh.port,
            "user": ssh.username,
            "key_file": str(key),
            "known_hosts_file": str(known),
            "command": command,
        }
    return info


def _private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, 0o600)


def run_finish(run_id: str) -> int:
    """Ask the serve process of run ``run_id`` to end the agent's turn (it then grades)."""
    from engine.run.session import open_housekept_store

    record = open_housekept_store().get_run(run_id)
    if record is None:
        raise UserError(f"no run '{run_id}' in the store")
    if record.agent != "external":
        raise UserError(f"run {record.run_id} is agent {record.agent}'s, not a served run (crucible serve)")
    if record.status != "running":
        raise UserError(f"run {record.run_id} is not running (it is {record.status})")
    served = Path(record.run_dir or "") / SERVE_FILE
    try:
        info = json.loads(served.read_text())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"run {record.run_id}: {served} is missing or unreadable ({exc}); is it still being set up?"
        ) from exc
    if info.get("pid") != record.owner_pid or info.get("host") != record.owner_host:
        raise UserError(f"run {record.run_id}: {served} names another process than the run's record")
    if record.owner_host != socket.gethostname():
        raise UserError(f"run {record.run_id} is served on host {record.owner_host}; run `crucible finish` there")
    try:
        os.kill(int(info["pid"]), FINISH_SIGNAL)
    except ProcessLookupError as exc:
        raise UserError(f"run {record.run_id}: its serve process {info['pid']} is gone") from exc
    print(f"asked run {record.run_id} to finish (serve process {info['pid']}); it now captures and grades")
    return 0
