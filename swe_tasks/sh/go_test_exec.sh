# shellcheck shell=bash
# go test's -exec program under crucible-strict (swe_tasks/gojson.py): `go test -json` (Go 1.20+)
# starts the test binary with -test.v=test2json (its own result lines framed by ^V, so only they
# become results), but run_script.sh's own `-v` reaches the binary after it as -test.v=true and
# wins: unframed, a `--- PASS` line the code under test prints would be read as a result. So that
# argument is turned back into -test.v=test2json here, only where the go command asked for
# framing itself (an older go passes no -test.v=test2json, and its test binary knows none);
# everything else runs as given.
framed=''
for arg in "$@"; do
  if [ "$arg" = -test.v=test2json ]; then framed=1; fi
done
args=()
for arg in "$@"; do
  if [ -n "$framed" ] && [ "$arg" = -test.v=true ]; then args+=(-test.v=test2json); else args+=("$arg"); fi
done
exec "${args[@]}"
