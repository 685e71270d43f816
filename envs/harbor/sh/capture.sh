# shellcheck shell=bash
# Capture, run by envs/harbor/flavor.py (capture) as root in the agent's workspace:
#   bash -c "<this>" crucible WORKDIR CARRY CONTAINER MARK
# Prints the binary diff of WORKDIR against the baseline the image committed into the root-only
# /var/lib/crucible/harbor/base.git (every file, ignored ones too; a .git inside WORKDIR is not
# part of it). Then, after a line "MARK carried", CARRY=1 (integrity none: Harbor grades in the
# agent's own container): what the agent left in /logs/verifier and /tests, as a base64 tar.
# After a line "MARK container", CONTAINER=1 (a task whose state lives outside WORKDIR): every
# file and symlink outside WORKDIR changed since the image was built (ctime newer than the
# build's marker /var/lib/crucible/harbor/built; the kernel sets ctime, no user can backdate it),
# as a base64 tar; /proc, /sys, /dev, /run, /logs, /tests, crucible's own state and the files the
# runtime mounts are left out. Deletions outside WORKDIR are not seen.
set -euo pipefail
workdir=$1
carry=$2
container=$3
mark=$4
git_base=(git -c safe.directory='*' -c core.quotepath=off --git-dir=/var/lib/crucible/harbor/base.git
          --work-tree="$workdir")
"${git_base[@]}" add -A -f >/dev/null
"${git_base[@]}" diff --cached --binary --no-color --no-ext-diff HEAD
if [ "$carry" = 1 ]; then
  echo "$mark carried"
  paths=()
  for p in logs/verifier tests; do
    if [ -e "/$p" ]; then paths+=("$p"); fi
  done
  if [ "${#paths[@]}" -gt 0 ]; then
    tar -C / -cf - "${paths[@]}" | base64 -w0
  fi
  echo
fi
if [ "$container" = 1 ]; then
  echo "$mark container"
  find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /logs -o -path /tests \
      -o -path /var/lib/crucible -o -path "$workdir" -o -path /etc/hosts -o -path /etc/hostname \
      -o -path /etc/resolv.conf -o -path /.dockerenv \) -prune \
      -o \( -type f -o -type l \) -cnewer /var/lib/crucible/harbor/built -printf '%P\0' \
    | tar -C / --null -T - -cf - | base64 -w0
  echo
fi
