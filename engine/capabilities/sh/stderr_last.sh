# shellcheck shell=bash
# The ssh capability's wrapper (engine/capabilities/ssh_client.py, run_bash), run by the
# session's bash as the agent's user:
#   bash -c SCRIPT crucible-ssh COMMAND     (stdin: the marker line)
# Runs COMMAND under bash -lc with an empty stdin, keeps its stderr aside and sends it
# after the marker once the command has ended. The marker comes on stdin, so it is in no
# process's argv, where a `ps` in the command could print it.

IFS= read -r mark || exit 125
err=$(mktemp) || exit 125
bash -lc "$1" </dev/null 2>"$err"; rc=$?
printf "%s" "$mark"; cat -- "$err"; rm -f -- "$err"; exit "$rc"
