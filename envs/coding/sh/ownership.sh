# shellcheck shell=bash
# The end of repo setup (envs/coding/repo.py, setup_repo): after sh/setup_fresh.sh or
# sh/setup_history.sh, which set WORKDIR, UID_WALL (1: the agent is uid 1000) and GIT_DIR.
# shellcheck disable=SC2154  # WORKDIR, UID_WALL and GIT_DIR are the setup script's

if [ "$UID_WALL" = 1 ]; then
  chown -R 1000:1000 -- "$GIT_DIR"
else
  # The agent is root but the tree is uid 1000's: without this git refuses the repo
  # ("dubious ownership"). System config is the agent's side; the engine never reads it.
  git config --system --get-all safe.directory 2>/dev/null | grep -qxF -- "$WORKDIR" \
    || git config --system --add safe.directory "$WORKDIR" || true
fi
