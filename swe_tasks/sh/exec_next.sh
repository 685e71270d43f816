# shellcheck shell=bash
# The start of each program crucible-strict puts first on run_script.sh's PATH (sh/node_wrap.sh,
# sh/sed_wrap.sh follow it in the same file: swe_tasks/jsresults.py's node_wrap_program,
# swe_tasks/edits.py's wrap_program): how each one hands over to the program it stands before.
exec_next() {  # NAME ARGS...: exec the next NAME on PATH that is not this file (however its directory is spelled, or repeated)
  local name=$1 dir
  shift
  IFS=: read -r -a dirs <<< "$PATH"
  for dir in "${dirs[@]}"; do
    if [ -n "$dir" ] && [ -f "$dir/$name" ] && [ -x "$dir/$name" ] && ! [ "$dir/$name" -ef "$0" ]; then
      exec "$dir/$name" "$@"
    fi
  done
  echo "crucible: no $name on PATH after ${0%/*}" >&2
  exit 127
}
