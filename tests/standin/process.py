"""Start the stand-in model server (``python -m tests.standin.server``) as its own process.

A STAND-IN for a hosted model API, which is unreachable here: it speaks the real
OpenAI-chat / Anthropic-messages protocols on 127.0.0.1 and follows a script file.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


@contextmanager
def standin_server(
    folder: Path, script: str, *, start_timeout: float = 30.0, require_key_env: str | None = None
) -> Iterator[str]:
    """Run the stand-in with ``script`` (Python source defining ``script``) written under
    ``folder``; yields its base URL (``http://127.0.0.1:PORT/v1``) and stops it after.
    ``require_key_env``: it answers 401 unless a request carries that variable's value."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.py").write_text(script)
    port_file = folder / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.standin.server",
            "--port",
            "0",
            "--script",
            str(folder / "script.py"),
            "--port-file",
            str(port_file),
            "--log",
            str(folder / "exchanges.jsonl"),
            *(["--require-key-env", require_key_env] if require_key_env else []),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + start_timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the stand-in did not start: {proc.stderr.read() if proc.poll() is not None else 'timeout'}"
                )
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
