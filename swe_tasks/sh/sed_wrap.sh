# shellcheck shell=bash
# The `sed` that run_script.sh finds first on its PATH under crucible-strict where the script
# edits every test file in a find|while loop (swe_tasks/edits.py). sh/replay.sh writes it root's
# into WORK/sed-wrap/sed, beside sed-edits: one line per edit root already made to a locked test
# file before the run, the argument list as `printf %q` writes it. Called with exactly such an
# argument list it exits 0 and writes nothing: the file holds that edit, and the tests' uid could
# not write it anyway. Anything else goes to the next sed on PATH that is not this file, so every
# other edit, of a locked file too, is the real sed's, refused or made as before.
# (exec_next: sh/exec_next.sh, which edits.wrap_program puts before this.)
self=${0%/*}
printf -v call '%q ' "$@"
while IFS= read -r done_edit; do
  if [ "$done_edit" = "$call" ]; then exit 0; fi
done < "$self/sed-edits"
exec_next sed "$@"
