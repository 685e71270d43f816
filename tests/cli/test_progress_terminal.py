"""On a terminal, long commands say how they are doing: ``crucible check`` driven under a real
pty shows the build of its image step by step with where its full log is, then its runs done /
running / failed with an ETA, drawn by rich on stderr; its verdicts are unchanged."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import uuid
from pathlib import Path

import docker
import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def under_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    """Run the CLI with a pty (200 columns) as its stdin, stdout and stderr; its exit code and
    everything it drew, escapes removed. Reads until the command has closed the terminal."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine.cli.main", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every process holding the terminal has closed it
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), ANSI.sub("", b"".join(chunks).decode(errors="replace"))


@pytest.mark.docker
@pytest.mark.slow
def test_check_on_a_terminal_shows_its_build_steps_the_log_path_and_runs_done_running_failed_with_an_eta(
    tmp_path, docker_client, base_image
):
    # A CA bundle of its own is an input of the task image: a new image, really built here.
    bundle = tmp_path / "ca.pem"
    bundle.write_text(f"# {uuid.uuid4().hex}\n" + Path("/etc/ssl/certs/ACCVRAIZ1.pem").read_text())
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "TERM": "xterm-256color"}
    for name in ("CI", "CRUCIBLE_STORE", "COLUMNS"):
        env.pop(name, None)
    code, text = under_a_terminal(["check", "task=sample/last_page", f"build.ca_bundle={bundle}"], env)
    built = re.findall(r"building (crucible/\S+)\s+\(full log: (\S+)\)", text)
    try:
        assert code == 0, text[-3000:]
        assert built, text[-3000:]
        for _, log in built:
            assert Path(log).is_file() and Path(log).parent == tmp_path / "home" / "builds", log
        assert "Step 1/" in text and re.search(r"Step \d+/\d+ : RUN ", text), text[-3000:]
        frames = set(
            re.findall(
                r"check: (\d+)/2 done, (\d+) completed, (\d+) failed, (\d+) running, (\d+) waiting"
                r" \| \d+:\d\d elapsed, (ETA [-\d:]+|done)",
                text,
            )
        )
        assert any(int(running) > 0 for *_, running, _, _ in frames), (frames, text[-3000:])
        assert ("2", "2", "0", "0", "0", "done") in frames, (frames, text[-3000:])
        assert any(eta.startswith("ETA") for *_, eta in frames), frames
        assert "all 1 task(s) ship" in text  # the verdicts, as ever, after the progress
    finally:
        for tag, _ in built:
            try:
                docker_client.api.remove_image(tag)
            except docker.errors.APIError:
                pass


@pytest.mark.docker
@pytest.mark.slow
def test_a_sweep_on_a_terminal_draws_its_line_and_each_runs_line_scrolls_above_it(tmp_path, docker_client, base_image):
    env = {**os.environ, "CRUCIBLE_HOME": str(tmp_path / "home"), "TERM": "xterm-256color"}
    for name in ("CI", "CRUCIBLE_STORE", "COLUMNS"):
        env.pop(name, None)
    code, text = under_a_terminal(["run", "-m", "task=sample/last_page", "agent=noop,integration_test"], env)
    assert code == 0, text[-3000:]
    assert re.search(
        r"sweep \S+: 2/2 done, 2 completed, 0 failed, 0 running, 0 waiting \| \d+:\d\d elapsed, done", text
    ), text[-3000:]
    # Each run's line (stdout, the same terminal) is printed whole, above the live line.
    for agent, reward in (("noop", "0.0"), ("integration_test", "1.0")):
        # (after a "\r": the live line is cleared, the run's line written in its place, the live line redrawn below)
        assert re.search(rf"(^|\r)completed reward={reward} sample/last_page {agent}  run \S+", text, re.M), text[
            -3000:
        ]
