# shellcheck shell=bash
# Gives the agent's repo its remote, after the coding flavor's repo setup. envs/sdlc/flavor.py
# (SdlcFlavor.setup) runs it through envs/coding/gitops.py (run_script), as root:
#   SCRIPT WORKDIR RELAY   (RELAY: the relay's path inside the workspace, in the bridge)
set -eu
WORKDIR=$1 RELAY=$2
CONFIG="$WORKDIR/.git/config"
# --file: root edits the agent's config without git's ownership check on the repo.
git config --file "$CONFIG" protocol.ext.allow always
git config --file "$CONFIG" remote.origin.url "ext::python3 $RELAY %S"
git config --file "$CONFIG" remote.origin.fetch '+refs/heads/*:refs/remotes/origin/*'
git config --file "$CONFIG" user.name >/dev/null || git config --file "$CONFIG" user.name agent
git config --file "$CONFIG" user.email >/dev/null || git config --file "$CONFIG" user.email agent@crucible.invalid
