# shellcheck shell=bash
# The `node` that run_script.sh finds first on its PATH under crucible-strict on jest instances
# (swe_tasks/jestjson.py). sh/replay.sh writes it root's into WORK/node-wrap/node, the hook beside
# that directory (WORK/jest-hook.js), and puts the directory first on run_script.sh's PATH. yarn,
# npm and jest's bin start through `#!/usr/bin/env node`: here the hook's --require goes back into
# NODE_OPTIONS where a run script replaced it (protonmail's `export NODE_OPTIONS=...`), and the
# node it runs is the next one on PATH (this directory left out).
self=${0%/*}
hook=${self%/*}/jest-hook.js
case " ${NODE_OPTIONS:-} " in
  *" --require=$hook "*) ;;
  *) export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require=$hook" ;;
esac
path=":$PATH:"
path=${path//:$self:/:}
path=${path#:}
path=${path%:}
real=$(PATH=$path command -v node) || { echo "crucible: no node on PATH after $self" >&2; exit 127; }
exec "$real" "$@"
