# shellcheck shell=bash
# The agent's diff against the baseline, through the vault's objects and a throwaway index,
# never the agent's .git. envs/coding/repo.py (_run_capture) runs
#   SCRIPT crucible WORKDIR BASE VAULT DIR [PATHSPEC...]
# Through envs/coding/gitops.py (run_script): as root, after SCRIPT_PRELUDE (set -euo pipefail,
# the HARDEN array of git flags) and sh/shadow.sh (shadow_init, require_vault).
# One exec: the diff comes back on stdout, and the scratch DIR goes with the script (trap).
# PATHSPECs are re-diffed with diff forced to binary (base85): for files whose text is not
# UTF-8, so the stored diff is always valid text and still applies byte-exactly.
# shellcheck disable=SC2154  # HARDEN comes from the prelude
# shellcheck disable=SC2164  # set -e (the prelude) ends the script when cd fails

WORKDIR=$1 BASE=$2 VAULT=$3 DIR=$4
shift 4
trap 'rm -rf -- "$DIR"' EXIT
if [ "${CRUCIBLE_CAPTURE_HELD:-}" = 1 ]; then
  # Started while the agent works (envs/coding/held.py): the scratch repo now, and nothing of
  # the workspace read until the word comes, once the agent is done (its workdir looked up
  # only then: the agent may have replaced it). The baseline comes with the word, not on the
  # command line, which any uid can read all the while (/proc/PID/cmdline).
  shadow_init "$DIR"
  read -r word BASE || exit 4
  [ "$word" = go ] && [ -n "$BASE" ] || exit 4
  require_vault
else
  require_vault
  shadow_init "$DIR"
fi
cd "$WORKDIR"
# New blobs go to a scratch object store: the vault is only read.
export GIT_OBJECT_DIRECTORY="$DIR/objects" GIT_ALTERNATE_OBJECT_DIRECTORIES="$VAULT/objects"
# Repos the agent created or cloned inside the tree would become gitlinks (or, with no
# commit, fail the add): their directories are left out and named on stderr.
glob_escape() {
  local s=$1 out='' c i
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
# The image's kept index only where the agent cannot have rewritten it (CRUCIBLE_KEPT_INDEX=1:
# behind the uid wall, envs/coding/repo.py capture_env); else the baseline read afresh.
if [ "${CRUCIBLE_KEPT_INDEX:-}" = 1 ]; then shadow_read_base; else git "${HARDEN[@]}" read-tree "$BASE"; fi
git "${HARDEN[@]}" add -A -- .
[ $# = 0 ] || printf '* -diff\n' > "$GIT_DIR/info/attributes"
git "${HARDEN[@]}" diff --cached --binary --full-index --no-ext-diff --no-textconv --no-color \
  -M --src-prefix=a/ --dst-prefix=b/ "$BASE" -- "$@"
