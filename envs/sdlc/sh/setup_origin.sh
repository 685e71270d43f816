# shellcheck shell=bash
# Gives the agent's repo its remote, after the coding flavor's repo setup. envs/sdlc/flavor.py
# (SdlcFlavor.setup) runs it through envs/coding/gitops.py (run_script), as root:
#   SCRIPT WORKDIR RELAY UID_WALL   (RELAY: the relay's path inside the workspace, in the bridge)
set -eu
WORKDIR=$1 RELAY=$2 UID_WALL=$3
CONFIG="$WORKDIR/.git/config"
# --file: root edits the agent's config without git's ownership check on the repo.
git config --file "$CONFIG" protocol.ext.allow always
git config --file "$CONFIG" remote.origin.url "ext::python3 $RELAY %S"
git config --file "$CONFIG" remote.origin.fetch '+refs/heads/*:refs/remotes/origin/*'
git config --file "$CONFIG" user.name >/dev/null || git config --file "$CONFIG" user.name agent
git config --file "$CONFIG" user.email >/dev/null || git config --file "$CONFIG" user.email agent@crucible.invalid
# A root agent works in a tree owned by uid 1000, and git refuses that repo unless it is a
# safe.directory, which only the system or global config may say. The coding setup writes the
# system config; where /etc is read-only (runtime=local without a host /etc/gitconfig) that
# cannot land, so root's own global config (a per-run home) says it too.
if [ "$UID_WALL" != 1 ]; then
  git config --file /root/.gitconfig --get-all safe.directory 2>/dev/null | grep -qxF -- "$WORKDIR" \
    || git config --file /root/.gitconfig --add safe.directory "$WORKDIR"
fi
