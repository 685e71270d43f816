"""Helpers for tests of ``crucible serve``: the serve process, and the official TypeScript MCP SDK.

The SDK (``@modelcontextprotocol/sdk``, pinned by tests/mcp_ts/package-lock.json) is installed
with ``npm ci`` on first use when tests/mcp_ts/node_modules is missing; ``client.mjs`` there runs
one scenario against a served run and prints JSON lines.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TS_DIR = ROOT / "tests" / "mcp_ts"
SERVE_READY_TIMEOUT = 300.0


def ensure_ts_sdk() -> None:
    """The TypeScript SDK in tests/mcp_ts/node_modules (``npm ci`` once); fails (never skips
    under CI=true) without node and npm."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but node/npm are missing (the TypeScript MCP SDK tests need them)")
        pytest.skip("node and npm are needed for the TypeScript MCP SDK tests")
    if not (TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json").is_file():
        done = subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund"], cwd=TS_DIR, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"npm ci in {TS_DIR} failed:\n{done.stdout}\n{done.stderr}"


def ts_client(scenario: str, url: str, token: str, timeout: float = 240, **options) -> dict:
    """Run one scenario of tests/mcp_ts/client.mjs to its end; its final JSON object."""
    done = subprocess.run(
        ["node", "client.mjs", scenario, url, token, json.dumps(options)],
        cwd=TS_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return last_json(done.stdout, done.stderr)


def last_json(stdout: str, stderr: str = "") -> dict:
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert lines and "result" in lines[-1], f"the TypeScript client broke:\n{stdout}\n{stderr}"
    return lines[-1]["result"]


@dataclass
class Served:
    """A ``crucible serve`` process, with what it printed and its ``serve.json``."""

    proc: subprocess.Popen
    info: dict = field(default_factory=dict)
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return self.info["mcp"]["url"]

    @property
    def token(self) -> str:
        return self.info["mcp"]["token"]

    @property
    def run_id(self) -> str:
        return self.info["run_id"]

    def interrupt(self) -> float:
        """Ctrl-C (SIGINT) to the serve process; when it was sent (epoch seconds)."""
        sent = time.time()
        self.proc.send_signal(signal.SIGINT)
        return sent

    def wait(self, timeout: float = 300) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def stderr(self) -> str:
        return "".join(self.err)

    def stdout(self) -> str:
        return "".join(self.out)

    def __post_init__(self) -> None:
        self._ready = threading.Event()
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)
            if "is ready for an outside agent (" in line:
                path = line.rpartition("(")[2].rstrip().rstrip(")")
                self.info = json.loads(Path(path).read_text())
                self._ready.set()
        self._ready.set()  # the stream ended: ready or not, nobody waits any longer

    def until_ready(self) -> Served:
        assert self._ready.wait(SERVE_READY_TIMEOUT) and self.info, (
            f"crucible serve did not get ready:\n{self.stdout()}\n{self.stderr()}"
        )
        return self


def serve(*args: str) -> Served:
    """Start ``crucible serve ARGS`` and wait until it announces its endpoints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.main", "serve", *args],
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ},
    )
    return Served(proc).until_ready()


def crucible(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
