"""Engine-side git plumbing run inside a workspace, as root, through ``Workspace.exec``.

Every git command the engine runs against a task repo goes through here, hardened so
nothing the agent left in its workspace can steer it: the repo is always named
explicitly (``GIT_DIR``/``GIT_WORK_TREE``, so no discovery and no ownership checks), no
system or global config is read, hooks and fsmonitor are off, and external diff and
textconv drivers are never run. Images only guarantee bash, coreutils and git, so the
scripts are plain bash, in sh/ beside this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.interfaces import ROOT_UID, Workspace
from engine.models import ExecResult
from engine.util import shell

VAULT = "/var/lib/crucible/vault/repo.git"
"""The image's real history (a git dir), root-only: /var/lib/crucible is mode 700."""
CRUCIBLE_DIR = "/var/lib/crucible"
SCRATCH_DIR = "/var/lib/crucible/scratch"
"""Root-only scratch space for temporary indexes, object stores and patches."""
KEPT_INDEX_ENV = "CRUCIBLE_KEPT_INDEX"
"""Set to 1, a capture starts from the image's kept index of the baseline (sh/shadow.sh)."""

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

GIT_ENV: dict[str, str] = {
    "PATH": PATH,
    "HOME": "/nonexistent-crucible-home",  # no ~/.gitconfig, no XDG config
    "XDG_CONFIG_HOME": "/nonexistent-crucible-home",
    "LANG": "C",
    "LC_ALL": "C",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
}

# Passed as `git $HARDEN ...` (a bash array in the scripts below). Config from -c wins
# over the repo's own config, which matters for repos the agent could have touched.
HARDEN_FLAGS: tuple[str, ...] = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.autocrlf=false",
    "-c",
    "core.safecrlf=false",
    "-c",
    "core.symlinks=true",
    "-c",
    "core.filemode=true",
    "-c",
    "core.ignorecase=false",
    "-c",
    "core.quotePath=true",
    "-c",
    "diff.renames=true",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "color.ui=never",
    "-c",
    "gc.auto=0",
)


def _bash_array(name: str, items: Sequence[str]) -> str:
    quoted = " ".join("'" + item.replace("'", "'\\''") + "'" for item in items)
    return f"{name}=({quoted})"


SCRIPT_PRELUDE = "set -euo pipefail\n" + _bash_array("HARDEN", HARDEN_FLAGS) + "\n"

SCRIPT_CWD = "/"
"""Where a script runs (its paths are absolute)."""


async def run_script(
    ws: Workspace,
    script: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stdin: bytes | None = None,
    max_output: int = 1 << 20,
) -> ExecResult:
    """Run a bash ``script`` (with the prelude) as root; ``$1..`` are ``args``."""
    return await ws.exec(
        script_argv(script, args),
        user=ROOT_UID,
        cwd=SCRIPT_CWD,
        env={**GIT_ENV, **(env or {})},
        timeout=timeout,
        stdin=stdin,
        max_output=max_output,
    )


def script_argv(script: str, args: Sequence[str] = ()) -> list[str]:
    """The argv that runs a bash ``script`` with the prelude and sh/shadow.sh's functions
    (``shadow_init DIR``, ``require_vault``); run it as root with ``GIT_ENV``."""
    return ["bash", "-c", SCRIPT_PRELUDE + shell.script(__file__, "shadow.sh") + script, "crucible", *args]


def brief(result: ExecResult, limit: int = 2000) -> str:
    """The end of a command's output, for error messages."""
    text = result.text().strip()
    return text[-limit:] if text else f"(no output, exit code {result.exit_code})"
