"""The repo lifecycle (seed 002), engine-side: never visible to the agent.

``setup_repo`` hands the agent a repo in ``task["workdir"]``. With the vault (integrity
vault/strict) that is a FRESH one-commit repo — no history, refs, remotes or reflog to
mine — while the real history stays in the root-only vault. Without it (integrity none)
the agent gets a copy of the vault, history as cloned, and the vault stays trusted.

``capture_diff`` takes the agent's full diff against the pinned baseline through the
TRUSTED vault objects and a throwaway index, never through the agent's ``.git``: hooks,
config, attributes files or fake objects the agent planted there cannot change it.
"""
from __future__ import annotations

import logging
import uuid

from engine.errors import CaptureError, SetupError, WorkspaceError
from engine.interfaces import Workspace
from engine.models import CapturedSubmission, ExecResult
from envs.coding import patch, protect
from envs.coding.gitops import SCRATCH_DIR, VAULT, brief, run_script

log = logging.getLogger(__name__)

FRESH_DATE = "2000-01-01T00:00:00+0000"
"""Fixed identity and date: the fresh commit's SHA depends only on the baseline tree."""

_SETUP_FRESH = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 UID_WALL=$4
require_vault
chmod 700 /var/lib/crucible
# Tests before rm: a process saved where there is nothing to remove (each costs a few ms).
if [ -e "$WORKDIR/.git" ] || [ -L "$WORKDIR/.git" ]; then rm -rf -- "$WORKDIR/.git"; fi
git init -q --template= -- "$WORKDIR"
export GIT_DIR="$WORKDIR/.git" GIT_WORK_TREE="$WORKDIR"
# Written, not `git config`-ed: one process fewer per key (each costs a few ms).
printf '[core]\n\tlogAllRefUpdates = false\n[user]\n\tname = agent\n\temail = agent@crucible.invalid\n' \
  >> "$GIT_DIR/config"
# Only the baseline TREE's objects cross over: packed from the vault, no commit, no history.
tree=$(git --git-dir="$VAULT" rev-parse "$BASE^{tree}")
git --git-dir="$VAULT" rev-list --objects "$tree" \
  | git --git-dir="$VAULT" pack-objects -q --stdout \
  | git index-pack --stdin >/dev/null
commit=$(GIT_AUTHOR_NAME=crucible GIT_AUTHOR_EMAIL=crucible@crucible.invalid \
  GIT_COMMITTER_NAME=crucible GIT_COMMITTER_EMAIL=crucible@crucible.invalid \
  GIT_AUTHOR_DATE="$FRESH_DATE" GIT_COMMITTER_DATE="$FRESH_DATE" \
  git commit-tree "$tree" -m "baseline")
git update-ref refs/heads/main "$commit"
printf 'ref: refs/heads/main\n' > "$GIT_DIR/HEAD"
git "${HARDEN[@]}" read-tree HEAD
git "${HARDEN[@]}" update-index -q --refresh >/dev/null || true
mkdir -p "$GIT_DIR/hooks" "$GIT_DIR/info"
if [ -e "$GIT_DIR/logs" ]; then rm -rf -- "$GIT_DIR/logs"; fi
"""

_SETUP_HISTORY = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 UID_WALL=$4
require_vault
rm -rf -- "$WORKDIR/.git"
cp -a -- "$VAULT" "$WORKDIR/.git"
export GIT_DIR="$WORKDIR/.git" GIT_WORK_TREE="$WORKDIR"
git config core.bare false
if [ "$(git rev-parse -q --verify HEAD^{commit} || true)" != "$(git rev-parse "$BASE^{commit}")" ]; then
  git update-ref --no-deref HEAD "$BASE"
fi
git "${HARDEN[@]}" read-tree HEAD
git "${HARDEN[@]}" update-index -q --refresh >/dev/null || true
"""

_OWNERSHIP = r"""
if [ "$UID_WALL" = 1 ]; then
  chown -R 1000:1000 -- "$GIT_DIR"
else
  # The agent is root but the tree is uid 1000's: without this git refuses the repo
  # ("dubious ownership"). System config is the agent's side; the engine never reads it.
  git config --system --get-all safe.directory 2>/dev/null | grep -qxF -- "$WORKDIR" \
    || git config --system --add safe.directory "$WORKDIR" || true
fi
"""


async def setup_repo(ws: Workspace, task: dict, integrity: dict, *, timeout: float = 300.0) -> None:
    """Make ``task["workdir"]`` the agent's repo. Raises ``SetupError``."""
    script = (_SETUP_FRESH if integrity.get("vault", True) else _SETUP_HISTORY) + _OWNERSHIP
    args = [workdir_of(task), baseline_of(task), VAULT, "1" if integrity.get("uid_wall") else "0"]
    try:
        result = await run_script(ws, script, args, env={"FRESH_DATE": FRESH_DATE}, timeout=timeout)
    except WorkspaceError as exc:
        raise SetupError(f"repo setup could not run: {exc}") from exc
    if not result.ok:
        raise SetupError(f"repo setup failed in {task.get('workdir')}: {brief(result)}")


# One exec: the diff comes back on stdout, and the scratch dir goes with the script (trap).
# Paths after the first four args are re-diffed with diff forced to binary (base85): for
# files whose text is not UTF-8, so the stored diff is always valid text and still applies
# byte-exactly.
_CAPTURE = r"""
WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4
shift 4
trap 'rm -rf -- "$DIR"' EXIT
require_vault
shadow_init "$DIR"
cd "$WORKDIR"
# New blobs go to a scratch object store: the vault is only read.
export GIT_OBJECT_DIRECTORY="$DIR/objects" GIT_ALTERNATE_OBJECT_DIRECTORIES="$VAULT/objects"
# Repos the agent created or cloned inside the tree would become gitlinks (or, with no
# commit, fail the add): their directories are left out and named on stderr.
glob_escape() {
  local s=$1 out= c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in '\'|'*'|'?'|'['|']'|'!'|'#'|' ') out+="\\$c" ;; *) out+=$c ;; esac
  done
  printf '%s' "$out"
}
if command -v find >/dev/null 2>&1; then
  while IFS= read -r -d '' nested; do
    rel=${nested#"$WORKDIR"/}
    rel=${rel%/.git}
    printf '/%s/\n' "$(glob_escape "$rel")" >> "$GIT_DIR/info/exclude"
    printf 'crucible: nested repository left out of the capture: %s\n' "$rel" >&2
  done < <(find "$WORKDIR" -mindepth 2 -name .git -prune -print0 2>/dev/null)
fi
git "${HARDEN[@]}" read-tree "$BASE"
git "${HARDEN[@]}" add -A -- .
[ $# = 0 ] || printf '* -diff\n' > "$GIT_DIR/info/attributes"
git "${HARDEN[@]}" diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color \
  -M --src-prefix=a/ --dst-prefix=b/ "$BASE" -- "$@"
"""

MAX_DIFF_BYTES = 512 << 20
"""A bigger diff is refused (CaptureError) rather than held in memory."""


async def capture_diff(ws: Workspace, task: dict, integrity: dict, *, timeout: float = 120.0) -> CapturedSubmission:
    """The agent's diff against the baseline; protected paths dropped when asked. Raises ``CaptureError``."""
    args = [workdir_of(task, CaptureError), baseline_of(task, CaptureError), VAULT]
    try:
        chunks = await _captured_chunks(ws, args, timeout)
    except WorkspaceError as exc:
        raise CaptureError(f"capture could not run: {exc}") from exc
    except ValueError as exc:
        raise CaptureError(f"git produced a diff crucible cannot parse: {exc}") from exc
    return _submission(chunks, task, integrity)


async def _run_capture(ws: Workspace, args: list[str], binary_paths: list[str], timeout: float,
                       what: str = "capture") -> ExecResult:
    scratch = f"{SCRATCH_DIR}/capture-{uuid.uuid4().hex}"
    # Twice the bound: the output buffer keeps the first half of its limit whole.
    result = await run_script(ws, _CAPTURE, [*args, scratch, *binary_paths], timeout=timeout,
                              max_output=2 * MAX_DIFF_BYTES)
    if not result.ok:
        raise CaptureError(f"{what} failed: {brief(result)}")
    if result.truncated:
        raise CaptureError(f"{what}: the diff is larger than {MAX_DIFF_BYTES >> 20} MiB")
    return result


async def _captured_chunks(ws: Workspace, args: list[str], timeout: float) -> list[patch.FileChunk]:
    result = await _run_capture(ws, args, [], timeout)
    for line in result.stderr.decode("utf-8", "replace").splitlines():
        if line.startswith("crucible: "):
            log.warning("%s", line[len("crucible: "):])
    chunks = patch.parse_chunks(result.stdout)
    if all(_is_utf8(c) for c in chunks):
        return chunks
    return await _with_binary_fallback(ws, args, chunks, timeout)


async def _with_binary_fallback(ws: Workspace, args: list[str], chunks: list[patch.FileChunk],
                                timeout: float) -> list[patch.FileChunk]:
    """A second pass (rare: only for non-UTF-8 text) that re-diffs those paths as binary."""
    bad = [c for c in chunks if not _is_utf8(c)]
    specs = sorted({f":(literal){p}" for c in bad for p in c.paths})
    result = await _run_capture(ws, args, specs, timeout, what="capture (binary re-diff)")
    rebuilt = patch.parse_chunks(result.stdout)
    if not all(_is_utf8(c) for c in rebuilt):
        raise CaptureError("capture: a re-diffed chunk is still not UTF-8")
    return [c for c in chunks if _is_utf8(c)] + rebuilt


def _submission(chunks: list[patch.FileChunk], task: dict, integrity: dict) -> CapturedSubmission:
    touched = sorted({p for c in chunks for p in c.paths})
    kept, violations = chunks, []
    if integrity.get("drop_protected"):
        kept, violations = protect.split_protected(chunks, task)
    diff = b"".join(c.data for c in kept).decode("utf-8")
    return CapturedSubmission(diff=diff, files_changed=touched, violations=violations)


def _is_utf8(chunk: patch.FileChunk) -> bool:
    try:
        chunk.data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def workdir_of(task: dict, error: type[Exception] = SetupError) -> str:
    workdir = str(task.get("workdir") or "/app").rstrip("/") or "/"
    if not workdir.startswith("/"):
        raise error(f"task workdir must be absolute, got {workdir!r}")
    return workdir


def baseline_of(task: dict, error: type[Exception] = SetupError) -> str:
    try:
        return str(task["pins"]["baseline"])
    except (KeyError, TypeError) as exc:
        raise error("task has no pinned baseline SHA (task.pins.baseline)") from exc


__all__ = ["FRESH_DATE", "baseline_of", "capture_diff", "setup_repo", "workdir_of"]
