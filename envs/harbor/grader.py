"""Grading a Harbor task in the FRESH grading workspace (``sh/grade.sh``): the captured diff
applied onto the baseline (and, for a task that captures its container, the files it changed
outside the working directory put back), tests/ laid into /tests only now, test.sh run under its
``[verifier].timeout_sec``, the reward files read back. Returns the raw grade; the verdict is
``reward.verdict`` of it alone.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

from engine.errors import GradeError, WorkspaceError
from engine.interfaces import Workspace
from engine.models import CapturedSubmission, RunSpec
from engine.util import shell
from envs.harbor import folder as harbor_folder

STAGE = "/var/lib/crucible/harbor"
"""Root-only in the image (tail.Dockerfile): the diff, tests and test.sh's output wait here."""
MARGIN = 120.0
"""Seconds the grading script may take beyond test.sh's own limit (the apply, the tar, the reads)."""


def mode_of(spec: RunSpec) -> str:
    """``none`` where the agent's container state is Harbor's (no vault), else the mode's name."""
    return "none" if not spec.integrity.vault else ("strict" if spec.integrity.uid_wall else "vault")


async def grade(ws: Workspace, spec: RunSpec, submission: CapturedSubmission) -> dict[str, Any]:
    task = spec.task
    tests = Path(task.path) / "tests"
    if harbor_folder.digest(tests) != task.pins.get("tests_sha256"):
        raise GradeError(f"harbor task {task.id}: {tests} changed since the run was planned")
    mode = mode_of(spec)
    diff = base64.b64decode(submission.data["diff_b64"]) if "diff_b64" in submission.data else submission.diff.encode()
    carried = base64.b64decode(submission.data.get("carried") or "") if mode == "none" else b""
    try:
        await ws.write_file(f"{STAGE}/agent.diff", diff, mode=0o600)
        await ws.write_file(f"{STAGE}/tests.tar", harbor_folder.tarball(tests), mode=0o600)
        await ws.write_file(f"{STAGE}/carried.tar", carried, mode=0o600)
        await ws.write_file(
            f"{STAGE}/container.tar", base64.b64decode(submission.data.get("container") or ""), mode=0o600
        )
        nonce = secrets.token_hex(8)
        limit = float(task.verifier_timeout_sec)
        env = {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": "/root",
            "LANG": "C.UTF-8",
            **dict(task.verifier_env),
        }
        result = await ws.exec(
            ["bash", "-c", shell.script(__file__, "grade.sh"), "crucible", task.workdir, f"{limit:g}", mode, nonce],
            env=env,
            timeout=limit + MARGIN,
            max_output=4 << 20,
        )
    except WorkspaceError as exc:
        raise GradeError(f"harbor grading could not run: {exc}") from exc
    if result.timed_out:
        raise GradeError(f"harbor grading took longer than test.sh's limit ({limit:g} s) + {MARGIN:g} s")
    raw = _parsed(result.stdout, nonce)
    if "apply" not in raw:
        raise GradeError(f"harbor grading ended early (exit {result.exit_code}): {result.stderr[-400:]!r}")
    return {
        "mode": mode,
        "limit": limit,
        **raw,
        **({"violations": submission.violations} if submission.violations else {}),
    }


def _parsed(stdout: bytes, nonce: str) -> dict[str, Any]:
    """The script's "NONCE key value" lines (nothing else on its stdout counts)."""
    raw: dict[str, Any] = {"outlived": []}
    for line in stdout.decode("utf-8", "replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 2 or parts[0] != nonce:
            continue
        key, value = parts[1], parts[2] if len(parts) > 2 else ""
        if key == "exit":
            raw["exit_code"] = int(value)
            raw["timed_out"] = int(value) == 124
        elif key == "outlived":
            raw["outlived"].append(base64.b64decode(value).decode("utf-8", "replace").strip())
        elif key in ("apply", "reward_txt", "reward_json", "output"):
            raw[key] = value
    return raw
