#!/bin/sh
# The mock remote's pre-receive hook (host side): main is the task's baseline, read-only for
# the agent, so nothing pushed can change what main holds; every other branch is the agent's.
# stdin: "<old> <new> <ref>" per updated ref.
status=0
while read -r old new ref; do
  case "$ref" in
    refs/heads/main)
      echo "refusing to update $ref: main is protected (push a branch and open a pull request)" >&2
      status=1 ;;
    refs/heads/*) : ;;
    *)
      echo "refusing to update $ref: only branches (refs/heads/*) may be pushed" >&2
      status=1 ;;
  esac
  : "$old" "$new"
done
exit "$status"
