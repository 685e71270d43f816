# shellcheck shell=bash
# The agent's repo with the vault (integrity vault/strict): a FRESH one-commit repo in
# WORKDIR holding the baseline tree only, no history. envs/coding/repo.py (setup_repo) runs
#   SCRIPT crucible WORKDIR BASE VAULT UID_WALL    (env FRESH_DATE), then sh/ownership.sh.
# Through envs/coding/gitops.py (run_script): as root, after SCRIPT_PRELUDE (set -euo pipefail,
# the HARDEN array of git flags) and sh/shadow.sh (shadow_init, require_vault).
# shellcheck disable=SC2154  # HARDEN (the prelude), FRESH_DATE (the environment)
# shellcheck disable=SC2034  # UID_WALL is read by sh/ownership.sh, which follows

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
