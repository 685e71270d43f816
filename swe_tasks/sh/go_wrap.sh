# shellcheck shell=bash
# The `go` that run_script.sh finds first on its PATH under crucible-strict, where it also runs
# a go command that knows -json (swe_tasks/gojson.py, `wrapped`: teleport's `go list ./...`,
# whose import paths would turn into JSON objects under GOFLAGS=-json). sh/replay.sh writes it
# root's into WORK/go-wrap/go and puts that directory first on run_script.sh's PATH: `go test`
# gets -json (after -C, which must come first), every other go command runs as given. The go it
# runs is the next one on PATH (this directory left out).
self=${0%/*}
path=":$PATH:"
path=${path//:$self:/:}
path=${path#:}
path=${path%:}
real=$(PATH=$path command -v go) || { echo "crucible: no go on PATH after $self" >&2; exit 127; }
if [ "${1-}" != test ]; then exec "$real" "$@"; fi
shift
first=()
if [ "${1-}" = -C ] && [ $# -ge 2 ]; then first=("$1" "$2"); shift 2
elif [[ "${1-}" == -C=* ]]; then first=("$1"); shift
fi
exec "$real" test "${first[@]}" -json "$@"
