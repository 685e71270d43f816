# shellcheck shell=bash
# The agent's repo without the vault (integrity none): a copy of the vault in WORKDIR,
# history as cloned. envs/coding/repo.py (setup_repo) runs
#   SCRIPT crucible WORKDIR BASE VAULT UID_WALL, then sh/ownership.sh.
# Through envs/coding/gitops.py (run_script): as root, after SCRIPT_PRELUDE (set -euo pipefail,
# the HARDEN array of git flags) and sh/shadow.sh (shadow_init, require_vault).
# shellcheck disable=SC2154  # HARDEN comes from the prelude
# shellcheck disable=SC2034  # UID_WALL is read by sh/ownership.sh, which follows

WORKDIR=$1 BASE=$2 VAULT=$3 UID_WALL=$4
require_vault
rm -rf -- "$WORKDIR/.git"
cp -a -- "$VAULT" "$WORKDIR/.git"
export GIT_DIR="$WORKDIR/.git" GIT_WORK_TREE="$WORKDIR"
git config core.bare false
if [ "$(git rev-parse -q --verify "HEAD^{commit}" || true)" != "$(git rev-parse "$BASE^{commit}")" ]; then
  git update-ref --no-deref HEAD "$BASE"
fi
git "${HARDEN[@]}" read-tree HEAD
git "${HARDEN[@]}" update-index -q --refresh >/dev/null || true
