# shellcheck shell=bash
# Functions every engine git script gets: envs/coding/gitops.py (script_argv) runs
#   bash -c "SCRIPT_PRELUDE + this + SCRIPT" crucible ARGS...
# as root, where SCRIPT_PRELUDE is `set -euo pipefail` and the HARDEN array of git flags.
#   shadow_init DIR  a throwaway git dir whose objects fall through to the vault's
#                    (alternates), so the vault is only ever read, and temporary objects die
#                    with DIR (DIR/objects is there for a scratch object store).
#   require_vault    exit 3 unless the vault, the baseline in it and the workdir are there.
#   shadow_read_base the scratch index of the baseline's tree (after shadow_init, cd WORKDIR)
# shellcheck disable=SC2154  # VAULT, BASE and WORKDIR are set by the script that calls these

shadow_init() {
  # Few processes: each costs a few ms in a container, and `git init` ~6 ms of CPU, so the
  # repo is written here as `git init --bare --template=` lays it out on Linux (HEAD, config,
  # objects/{info,pack}, refs/{heads,tags}), not bare, in one mkdir. DIR itself is root's
  # alone (700), as is each directory named here (their parents are root-only already).
  local dir=$1
  # shellcheck disable=SC2174  # -m on the named directories only is meant
  mkdir -p -m 700 -- "$dir" "$dir/repo/objects/info" "$dir/repo/objects/pack" "$dir/repo/refs/heads" \
    "$dir/repo/refs/tags" "$dir/repo/info" "$dir/objects"
  printf 'ref: refs/heads/master\n' > "$dir/repo/HEAD"
  printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n' > "$dir/repo/config"
  printf '%s\n' "$VAULT/objects" > "$dir/repo/objects/info/alternates"
  export GIT_DIR="$dir/repo" GIT_WORK_TREE="$WORKDIR" GIT_INDEX_FILE="$dir/index"
}
require_vault() {
  # Exit 3: the workspace is not what the engine expects (an infrastructure failure).
  if [ ! -d "$VAULT" ]; then echo "crucible: vault $VAULT is missing" >&2; exit 3; fi
  if ! git --git-dir="$VAULT" cat-file -e "$BASE^{commit}" 2>/dev/null; then
    echo "crucible: baseline $BASE is not in the vault $VAULT" >&2; exit 3
  fi
  if [ ! -d "$WORKDIR" ]; then echo "crucible: workdir $WORKDIR is missing" >&2; exit 3; fi
}

# The image's own index of the baseline (Dockerfile.hud writes it last, named by the commit):
# its entries carry the stat data of the tree as the image holds it, which a container from
# the image still shows, so git stats each file where it would hash it (read-tree leaves no
# stat data): ~0.17 s less for 5,000 files in every fresh container. Missing (an image built
# another way, the local runtime's copied tree): read from the vault. A file whose stat
# differs is hashed as before; only a root process can make one match again (ctime), so the
# agent's workspace uses the copy only behind the uid wall (capture.sh).
KEPT_INDEXES=/var/lib/crucible/index
shadow_read_base() {
  local kept=$KEPT_INDEXES/$BASE
  if [[ $BASE =~ ^[0-9a-f]{40}$|^[0-9a-f]{64}$ ]] && [ -f "$kept" ] && cp -p -- "$kept" "$GIT_INDEX_FILE" 2>/dev/null; then
    return 0
  fi
  git "${HARDEN[@]}" read-tree "$BASE"
}
