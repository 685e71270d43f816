# shellcheck shell=bash
# The `node` that run_script.sh finds first on its PATH under crucible-strict on jest and mocha
# instances (swe_tasks/jsresults.py). sh/replay.sh writes it root's into WORK/node-wrap/node, the
# hook beside that directory (WORK/results-hook.js), and puts the directory first on
# run_script.sh's PATH. yarn, npm, npx and the runners' bins start through `#!/usr/bin/env node`:
# here the hook's --require goes back into NODE_OPTIONS where a run script replaced it
# (protonmail's `export NODE_OPTIONS=...`), and the node it runs is the next one on PATH that is
# not this file (exec_next: sh/exec_next.sh, which jsresults.node_wrap_program puts before this).
self=${0%/*}
hook=${self%/*}/results-hook.js
case " ${NODE_OPTIONS:-} " in
  *" --require=$hook "*) ;;
  *) export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require=$hook" ;;
esac
exec_next node "$@"
