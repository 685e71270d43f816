#!/bin/bash
# go test's -exec program under crucible-strict (swe_tasks/gojson.py): `go test -json` starts the
# test binary with -test.v=test2json (its own result lines framed by ^V, so only they become
# results), but run_script.sh's own `-v` reaches the binary after it as -test.v=true and wins:
# unframed, a `--- PASS` line the code under test prints would be read as a result. So that
# argument is turned back into -test.v=test2json here; everything else runs as given.
args=()
for arg in "$@"; do
  if [ "$arg" = -test.v=true ]; then args+=(-test.v=test2json); else args+=("$arg"); fi
done
exec "${args[@]}"
